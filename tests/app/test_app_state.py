"""The app's model runs without Qt: the current model, images, selection and predictions, and their events, driven
from a plain script (no QApplication, no PySide6 imported)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from PIL import Image

from tests.conftest import TINY_SPEC
from vitstudio.app.app_state import AppState, make_entry


def _entries(n: int):
    return [make_entry(f"/photos/{i}.png", Image.new("RGB", (40 + i, 30), (i * 40, 0, 0))) for i in range(n)]


def test_a_script_drives_the_model_images_and_predictions_without_qt(tiny_weights):
    """AppState's events (images added/removed, selection, model, prediction) fire in order without a QApplication; a
    model switch drops every image's previous-model prediction and a late result of the old model is not kept. A request
    makes the spec `loading` until the model comes, then `loaded_spec`.
    """
    from vitstudio.core.inference import classify
    from vitstudio.core.models.loading import load_model

    state, heard = AppState(), []
    for name in ("model_loaded", "images_added", "images_removed", "image_selected", "prediction_ready"):
        getattr(state, name).connect(lambda *args, name=name: heard.append(name))
    images = _entries(3)
    state.add_images(images)
    assert state.selected is images[0] and heard == ["images_added", "image_selected"]
    weights, _ = tiny_weights
    state.request_model(TINY_SPEC, weights=str(weights))  # asked for: under way until a model (or an error) comes
    assert state.loading == TINY_SPEC and state.view.requested.spec == TINY_SPEC
    first = load_model(TINY_SPEC, weights=str(weights))
    state.set_model(first)
    assert (state.loading, state.loaded_spec) == (None, TINY_SPEC)
    prediction = classify(first, [images[0].image])[0]
    state.set_prediction(images[0], first, prediction)
    assert state.prediction_for(images[0]) is prediction
    second = load_model(TINY_SPEC, weights=str(weights))
    state.set_prediction(images[1], first, prediction)  # accepted: `first` is still the model
    state.set_model(second)
    # what depends on the model goes with it: no image keeps the previous model's prediction
    assert [state.prediction_for(e) for e in images] == [None, None, None]
    assert all(e.prediction is None for e in images)
    state.set_prediction(images[2], first, prediction)  # a late result of the previous model is not kept
    assert images[2].prediction is None and heard.count("prediction_ready") == 2
    state.remove_images([images[0]])
    assert state.selected is images[1] and heard[-2:] == ["images_removed", "image_selected"]


def test_the_app_layer_imports_no_qt():
    """No Qt, and no torch at import either: the window is built from the app's model before torch loads.

    Importing every vitstudio.app module (≥ 3) and using AppState loads no PySide6/shiboken6/pyqtgraph/vitstudio.gui and
    no torch. [subprocess]
    """
    code = ("import sys, pkgutil, importlib, vitstudio.app as a\n"
            "mods = [m.name for m in pkgutil.walk_packages(a.__path__, 'vitstudio.app.')]\n"
            "for name in mods: importlib.import_module(name)\n"
            "state = a.app_state.AppState(); state.view.update(precision='fp32')\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph', 'torch')"
            " or m.startswith('vitstudio.gui')]\n"
            "print(len(mods), bad)\n"
            "sys.exit(1 if bad else 0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert int(out.stdout.split()[0]) >= 3  # the modules were found and imported


def test_devices_offered_later_are_announced_and_a_device_gone_falls_back():
    """`offer_devices` announces the device field's new choices on its spec event; a chosen device this machine lacks
    falls back to 'auto'.
    """
    state = AppState()
    offered = []
    state.view.spec_events.device.connect(lambda spec: offered.append(spec.choices))
    state.view.update(device="cpu")
    state.view.redeclare("device", choices=("auto", "cpu", "cuda:0"))
    state.view.update(device="cuda:0")
    state.offer_devices()  # this machine has no GPU: the choices shrink and the device falls back
    assert offered[-1] == ("auto", "cpu") and state.view.device == "auto"


def test_errors_written_for_the_user_are_one_line_and_bugs_keep_their_traceback():
    """ModelLoadError, DatasetError, RunInUse are `UserFacingError`s logged as one line; a KeyError is logged with its
    traceback (by class, not by class-name strings).
    """
    from vitstudio.app.notices import Notice, told
    from vitstudio.core.data.dataset_scan import DatasetError
    from vitstudio.core.models.adapter_checks import AdapterError
    from vitstudio.core.models.config_check import ConfigError
    from vitstudio.core.models.loading import ModelLoadError
    from vitstudio.core.train.runlock import RunInUse

    for exc in (ModelLoadError("Unknown model 'x'"), DatasetError("no class folders"), RunInUse("held by pid 7"),
                ConfigError("config.json: depth -1"), AdapterError("adapter_config.json: r 'sixteen'")):
        assert told(exc) and Notice(exc, "Loading").logged == f"Loading: {exc}"
    try:
        raise KeyError("bug")
    except KeyError as bug:
        assert not told(bug) and "Traceback" in Notice(bug).logged and "KeyError" in Notice(bug).logged


def test_a_concepts_switch_off_scale_and_order_are_fields():
    """Concepts → On the image: switched off or scaled, the "after" prediction's factors follow from the fields;
    the concept table's orders follow the concepts' classes (an order the new classes lack goes back to the first).

    On the image's switch-off and scale are fields whose factors the "after" prediction uses (a scale outside [0, 10]
    refused); the concept table's orders are a field whose choices follow the concepts' classes, falling back to the
    first.
    """
    from vitstudio.app.folder_states import SORTS, ConceptsState, ImageConceptsState, sorts_for

    image = ImageConceptsState()
    assert image.factors(7) == ()  # nothing changed: the model itself
    image.update(scale=2.5)
    assert image.factors(7) == ((7, 2.5),)
    image.update(off=True)
    assert image.factors(7) == ((7, 0.0),)
    with pytest.raises(ValueError, match="scale"):
        image.update(scale=11.0)
    concepts = ConceptsState()
    concepts.redeclare("sort", **sorts_for(["ant", "bee"]))
    assert concepts.fields()["sort"].labels == (*SORTS, "class: ant", "class: bee")
    concepts.sort = 4
    concepts.redeclare("sort", **sorts_for(["digit"]))  # concepts of another folder
    assert concepts.sort == 0


def test_the_base_model_follows_the_model_loaded_until_the_user_picks_one():
    """After a model switch the Training tab's base model still named the first model loaded (seen at 1280×720):
    it follows the model loaded, and a base model the user chose stays."""
    from vitstudio.app.training_states import TrainingState

    state = TrainingState()
    state.follow_loaded("digits-vit")
    state.follow_loaded("vit_small_patch16_224")
    assert state.base_model == "vit_small_patch16_224"
    state.base_model = "my-run"  # the user's choice
    state.follow_loaded("vit_base_patch16_224")
    assert state.base_model == "my-run"
