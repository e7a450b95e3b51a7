"""The four stale-result races (issue 20): a slow job for one request (run, model, folder) is held on an Event, the
request changes, the job is released; the view shows nothing of the old request, then the new request's result.
Each test failed on the code before the views went through `workers.ViewJobs`."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from PySide6.QtCore import Qt

from tests.conftest import TINY_SPEC
from tests.gui.helpers import settle as _settle
from vitstudio.core.models.loading import load_model
from vitstudio.gui import workers
from vitstudio.gui.folder.folder_panel import FolderPanel

DEEP_SPEC = "custom:img=32,patch=8,width=32,depth=4,heads=4,classes=5"





class Gate:
    """Holds the calls whose first argument matches `held(arg)` until `release()`; records who was held."""

    def __init__(self, held) -> None:
        self.held, self.event, self.waiting = held, threading.Event(), []

    def wrap(self, real):
        def slow(first, *args, **kwargs):
            if self.held(first):
                self.waiting.append(first)
                assert self.event.wait(30), "the test never released the job"
            return real(first, *args, **kwargs)

        return slow

    def release(self) -> None:
        self.event.set()


@pytest.fixture
def gate_for(request):
    """gate_for(held) -> a Gate released at teardown whatever happens in the test."""
    gates = []

    def make(held):
        gates.append(Gate(held))
        return gates[-1]

    yield make
    for gate in gates:
        gate.release()


def test_internals_never_show_the_previous_models_pictures(panel, qtbot, monkeypatch, gate_for):
    """(d) Model internals computing for model A, tab hidden, model B loaded: A's pictures never appear.

    Model internals held for model A while B loads (tab hidden): A's pictures never appear; B's pos-embed picture equals
    core render(explain). [panel]
    """
    from vitstudio.core.analysis import explain as explain_module
    from vitstudio.gui.explore import internals_panel

    first: list[int] = []

    def is_first_model(model) -> bool:
        first[:] = first or [model.uid]
        return model.uid == first[0]

    gate = gate_for(is_first_model)
    monkeypatch.setattr(explain_module, "explain", gate.wrap(explain_module.explain))  # the internals job's
    a = load_model(TINY_SPEC)
    panel = panel(internals_panel.InternalsPanel, a)
    qtbot.waitUntil(lambda: bool(gate.waiting), timeout=10000)
    panel.hide()  # as when its tab is hidden: a model switch only marks it stale
    b = load_model(DEEP_SPEC)
    panel.state.set_model(b)
    gate.release()
    _settle(qtbot)
    assert panel.results.get("model") != a.uid and panel.export_data() is None
    assert all(panel.item(m).image is None for m in panel.methods)

    panel.show()
    _settle(qtbot)
    qtbot.waitUntil(lambda: panel.results.get("model") == b.uid, timeout=30000)
    from vitstudio.core.analysis.explain import explain, render

    np.testing.assert_array_equal(panel.item("pos-embed").image, render(explain(b, "pos-embed")))


def _run_with_report(folder, classes, photo):
    """A finished run folder holding only its evaluation: every class confused with the next, `photo` misclassified."""
    from vitstudio.core.train.evaluation import EvalReport, Misclassified

    n = len(classes)
    confusion = np.roll(np.eye(n, dtype=np.int64), 1, axis=1) + np.eye(n, dtype=np.int64)
    report = EvalReport(tuple(classes), confusion, (Misclassified(str(photo), 0, 1, 0.9),), ())
    folder.mkdir(parents=True)
    (folder / "eval.json").write_text(json.dumps(report.to_json()))
    return folder


def test_training_results_show_only_the_run_shown(panel, qtbot, monkeypatch, tmp_path, photos, gate_for):
    """(a) History: run A clicked (its gallery slow), then run B: A's gallery and confusion matrix never appear under
    B, in the view or in File > Export data.

    [panel]
    """
    from vitstudio.app import training_jobs
    from vitstudio.gui.training.training_panel import TrainingPanel

    run_a = _run_with_report(tmp_path / "run-a", ("a0", "a1"), photos["chelsea"])
    run_b = _run_with_report(tmp_path / "run-b", ("b0", "b1", "b2"), photos["coffee"])
    gate = gate_for(lambda report: report.classes[0] == "a0")
    monkeypatch.setattr(training_jobs, "make_thumbnails", gate.wrap(training_jobs.make_thumbnails))
    panel = panel(TrainingPanel)
    panel.show_run(run_a)
    qtbot.waitUntil(lambda: bool(gate.waiting), timeout=10000)
    panel.show_run(run_b)
    # B's gallery arrives while A's job is still held
    qtbot.waitUntil(lambda: panel.results.gallery.count() == 1 and not panel.results.gallery.item(0).icon().isNull(),
                    timeout=20000)
    gate.release()
    _settle(qtbot)
    assert panel.results.report.classes == ("b0", "b1", "b2")
    assert panel.results.cm_item.image.shape == (3, 3)
    assert panel.results.gallery.item(0).data(Qt.UserRole) == str(photos["coffee"])
    panel.right.setCurrentWidget(panel.results)
    name, matrix, meta = panel.export_data()
    assert name == "confusion" and matrix.shape == (3, 3) and meta["run"] == str(run_b)


def test_folder_distance_of_the_previous_model_never_replaces_the_new_ones(panel, qtbot, monkeypatch, photos,
                                                                             gate_for):
    """(c) Attention tab: the distance over a folder computing for model A, model B loaded: the plot shows B's
    distance for the image, never A's folder average.

    [panel]
    """
    from vitstudio.core.analysis import attention
    from vitstudio.core.analysis import explain as explain_module
    from vitstudio.gui.explore import attention_panel

    a = load_model(TINY_SPEC)
    panel = panel(attention_panel.AttentionPanel, a, [photos["chelsea"]])
    _settle(qtbot)
    gate = gate_for(lambda model: model is a)
    monkeypatch.setattr(explain_module, "explain_folder", gate.wrap(explain_module.explain_folder))
    panel.distance_for_folder(str(photos["chelsea"].parent))
    qtbot.waitUntil(lambda: bool(gate.waiting), timeout=10000)
    b = load_model(DEEP_SPEC)
    panel.state.set_model(b)
    assert panel.distance.values is None  # A's image distance went with A
    qtbot.waitUntil(lambda: panel.distance.values is not None, timeout=30000)
    gate.release()
    _settle(qtbot)
    x = b.to_tensor(b.crop(panel.state.selected.image))[None]
    np.testing.assert_allclose(panel.distance.values, attention.attention_stats(b, x).distance, rtol=1e-5)
    assert panel.distance.full_title.startswith("This image:")  # drawn cut with … where the plot is narrow


def test_label_review_of_the_previous_model_never_appears(panel, qtbot, monkeypatch, tmp_path, gate_for):
    """(b) Folder tab: the label review running for model A, model B loaded: A's review never appears; B's does
    once asked for.

    [panel]
    """
    import vitstudio.core.folder.audit as audit_module
    from vitstudio.core.models.demo import bundled_demo, render_digits

    data = render_digits(tmp_path / "digits", per_class=4)
    a = load_model(str(bundled_demo()))
    panel = panel(FolderPanel, a)
    panel.open_folder(str(data))
    _settle(qtbot, 60000)
    real = audit_module.audit

    def held_for_a(folder, loaded=None, *args, **kwargs):  # a generator function, as audit is (Gate.wrap is not)
        if gate.held(loaded):
            gate.waiting.append(loaded)
            assert gate.event.wait(30)
        return (yield from real(folder, loaded, *args, **kwargs))

    gate = gate_for(lambda loaded: loaded is a)
    monkeypatch.setattr(audit_module, "audit", held_for_a)
    panel.start_review()
    qtbot.waitUntil(lambda: bool(gate.waiting), timeout=10000)
    b = load_model("custom:img=32,patch=8,width=32,depth=2,heads=2,classes=10")
    panel.state.set_model(b)
    gate.release()
    _settle(qtbot, 60000)
    assert panel.side.page("review").list.count() == 0 and panel.side.page("duplicates").count() == 0
    assert panel.report is None
    assert panel.results is None

    panel.open_folder(str(data))
    _settle(qtbot, 60000)
    panel.start_review()
    _settle(qtbot, 60000)
    assert panel.report is not None and panel.report.model == b.name


def test_folder_map_shows_only_the_folder_opened(panel, qtbot, monkeypatch, tmp_path, gate_for):
    """(b) Folder tab: folder X's map on screen, folder Y opened, Y's map slow: X's points are gone at once (they
    would be coloured and box-selected with Y's rows), then Y's map appears.

    [panel]
    """
    from vitstudio.core.folder import neighbours
    from vitstudio.core.models.demo import bundled_demo, render_digits

    x = render_digits(tmp_path / "x", per_class=3)
    y = render_digits(tmp_path / "y", per_class=2)
    panel = panel(FolderPanel, str(bundled_demo()))
    panel.open_folder(str(x))
    _settle(qtbot, 60000)
    assert len(panel.side.page("map").map.coords) == 30
    gate = gate_for(lambda features: len(features) == 20)
    monkeypatch.setattr(neighbours, "project_2d", gate.wrap(neighbours.project_2d))
    panel.open_folder(str(y))
    qtbot.waitUntil(lambda: bool(gate.waiting), timeout=30000)
    assert len(panel.results) == 20
    assert len(panel.side.page("map").map.coords) == 0 and panel.coords is None
    gate.release()
    _settle(qtbot, 60000)
    assert len(panel.side.page("map").map.coords) == 20 and len(panel.coords) == 20


def _slow_double(cancel, event, x):
    assert event.wait(30)
    return 2 * x


def _fails(cancel, event):
    assert event.wait(30)
    raise ValueError("the old request's error")


def test_view_jobs_deliver_only_the_current_request(qtbot, qapp):
    """The path itself: a result, a yield-free error and a kept value reach the view only while their request is
    current; a model change discards the pending job (its token cancelled) and frees the old model's results."""
    from vitstudio.app.evented import ViewState

    state = ViewState(model=1, image=1, layer=0)
    jobs = workers.ViewJobs(state, {"double": ("layer",), "error": ()})
    got, errors = [], []
    with pytest.raises(TypeError):
        jobs.start("double", "closure", lambda cancel: 1, on_result=got.append)
    release = threading.Event()
    old = jobs.start("double", "double", _slow_double, release, 20, on_result=got.append)
    failing = jobs.start("error", "fails", _fails, release, on_error=errors.append)
    state.update(model=2)  # another model: both jobs are stale
    assert old.cancelled and failing.cancelled
    new = jobs.start("double", "double", _slow_double, release, 21, on_result=got.append)
    release.set()
    qtbot.waitUntil(lambda: new.done, timeout=10000)
    _settle(qtbot)
    assert got == [42] and errors == [] and jobs.current("double") == 42
    state.update(layer=1)  # the result no longer answers the request
    assert jobs.current("double") is None
    state.update(layer=0)
    assert jobs.current("double") == 42
    state.update(image=2)  # another image: the kept result is dropped
    assert jobs.results["double"] is None


def test_a_failed_map_says_why_until_the_request_changes_and_is_not_asked_again(panel, qtbot, photos, tmp_path):
    """The Attention tab's concept map with a file that is not this model's: the error, then the reason in the
    tab (it said "Computing concept map…" forever); the same request is not computed again on a redraw; another
    request (a file that works, or none) drops the reason."""
    from vitstudio.gui.explore import attention_panel

    panel = panel(attention_panel.AttentionPanel, TINY_SPEC, [photos["chelsea"]])
    _settle(qtbot)
    bad = tmp_path / "other-model.safetensors"
    bad.write_bytes(b"not a concepts file")
    errors = []
    panel.state.error.connect(errors.append)
    panel.view_state.update(method="concept", concepts=str(bad))
    qtbot.waitUntil(lambda: bool(errors), timeout=20000)
    _settle(qtbot)
    assert panel.info.text().startswith("Could not compute concept map: ") and "Computing" not in panel.info.text()
    panel.reload()  # a redraw (a tab shown again) does not ask for the failed request again
    _settle(qtbot)
    assert len(errors) == 1 and panel.info.text().startswith("Could not compute")
    panel.view_state.update(concepts=None)
    assert panel.info.text().startswith("Learn concepts or open a concepts file")
