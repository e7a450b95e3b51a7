"""The Attention tab's jobs decided on the app's model, without widgets: which registered analyses the tab draws over
the image, which job slot each one's view reads, which view fields that job is keyed by, and which maps its
faithfulness measurement takes."""

from vitstudio.app.analyses import registry
from vitstudio.app.explore_jobs import OVERVIEW, attention_methods, job_keys, job_slot, unmeasurable


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


def test_faithfulness_measures_one_map_of_a_class_or_of_a_typed_text():
    """Rollout and gradient rollout are measured; head maps and token maps (a map per head) are refused, naming the
    shape they give; the concept map (where a concept fires) is refused; the text map waits for a text, then is
    measured, and its sanity check is refused (it re-draws the classifier, so it measures maps of a class)."""
    assert unmeasurable("rollout", None) is None and unmeasurable("gradient-rollout", None, sanity=True) is None
    for name in ("heads", "token"):
        assert "is not one (it gives (heads, gh, gw)" in unmeasurable(name, "a bee")
    assert "shows where it fires" in unmeasurable("concept", "a bee")
    assert unmeasurable("text", None).startswith("Type a text first")
    assert unmeasurable("text", "a bee") is None
    assert unmeasurable("text", "a bee", sanity=True).startswith("The sanity check re-draws the classifier")
