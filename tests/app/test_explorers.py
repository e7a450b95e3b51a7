"""The explorers' models (app/explorers.py), without Qt: the App builds one per explorer tab, each following the app
state itself — a model loaded redeclares its ranges and classes in the same update as its uid, an image selected is
its image — and running its jobs on the App's runner."""

from __future__ import annotations

from vitstudio.app.app import App
from vitstudio.app.app_state import make_entry
from vitstudio.app.jobs import ScriptRunner
from vitstudio.core.data.images import read_image
from vitstudio.core.models.demo import bundled_demo, render_digits

OTHER = "custom:img=32,patch=8,width=32,depth=2,heads=2,classes=3"


def test_each_explorer_follows_the_model_and_image_and_runs_its_jobs_on_the_apps_runner(tmp_path):
    """Loaded, the demo sets every explorer's model uid with the layer at its last block, the head and layer ranges
    and the class list declared from it; a selected image is the image of every explorer but Model internals (keyed
    by the model only, it never hears of images); another model redeclares the ranges (depth 2, 2 heads, 3 classes)
    and drops the patch picked on a grid it does not share; every change is announced once as `context_changed`; an
    attention job started on the explorer's jobs runs on the App's runner (a ScriptRunner: done when it returns)."""
    from vitstudio.app.explore_jobs import overview_job

    app = App(ScriptRunner())
    heard = {name: [] for name in app.explorers}
    for name, explorer in app.explorers.items():
        explorer.context_changed.connect(lambda name=name: heard[name].append(name))
    app.load_model(str(bundled_demo()))
    model, attention = app.model, app.explorers["attention"]
    assert {e.state.model for e in app.explorers.values()} == {model.uid}
    assert attention.state.layer == model.depth - 1 and attention.state.fields()["head"].range.hi == model.num_heads - 1
    assert attention.state.fields()["target"].choices[1:] == tuple(range(len(model.labels)))
    assert app.explorers["embeddings"].state.layer == model.token_depth - 1
    path = str(sorted(render_digits(tmp_path / "digits", 1).rglob("*.png"))[0])
    entry = make_entry(path, read_image(path))
    app.state.add_images([entry])
    app.state.select(entry)
    assert all(e.state.image == entry.uid for n, e in app.explorers.items() if n != "internals")
    assert app.explorers["internals"].state.image is None and heard["internals"] == ["internals"]
    attention.state.patch = (1, 1)
    done = []
    attention.jobs.start("overview", "Attention", overview_job, model, entry.image, attention.state.fusion,
                         attention.state.discard, on_result=done.append)
    assert done and attention.jobs.current("overview") is not None
    before = len(heard["attention"])
    app.load_model(OTHER)
    state = attention.state
    assert (state.layer, state.fields()["head"].range.hi, len(state.fields()["target"].choices)) == (1, 1, 4)
    assert state.patch is None and attention.jobs.current("overview") is None  # the demo's result answers no more
    assert len(heard["attention"]) == before + 1 and heard["internals"] == ["internals"] * 2  # once per change
