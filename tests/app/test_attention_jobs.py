"""The Attention tab's jobs decided on the app's model, without widgets: which registered analyses the tab draws over
the image, which job slot each one's view reads, and which view fields that job is keyed by."""

from vitstudio.app.analyses import registry
from vitstudio.app.explore_jobs import OVERVIEW, attention_methods, job_keys, job_slot


def test_each_drawn_entry_reads_the_shared_overview_or_a_slot_of_its_own():
    """Head maps and rollout, drawn from the one forward they share, read the overview's slot, keyed by the overview's
    keys (fusion, discard); token maps and gradient rollout have their own slot keyed by their view keys (patch,
    target); facet similarity (a compute function only, explained once per request) is keyed by its parameters;
    attention distance (averaged over a folder) is not drawn over the image."""
    drawn = attention_methods()
    assert {"heads", "rollout", "token", "gradient-rollout", "facet-similarity"} <= set(drawn)
    assert "distance" in registry.names("attention") and "distance" not in drawn
    for name in ("heads", "rollout"):
        assert job_slot(registry.get(name)) == OVERVIEW
        assert job_keys(registry.get(name)) == registry.OVERVIEW_KEYS == ("fusion", "discard")
    assert (job_slot(registry.get("token")), job_keys(registry.get("token"))) == ("token", ("patch",))
    assert job_keys(registry.get("gradient-rollout")) == ("target",)
    facets = registry.get("facet-similarity")
    assert facets.view_job is None and job_slot(facets) == "facet-similarity"
    assert job_keys(facets) == facets.param_names == ("layer", "patch", "facet")
