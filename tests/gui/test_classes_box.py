"""The model bar's Classes box (issue 23): shown for CLIP-style models only; typed classes become the model's head
in a worker and every prediction is the core's zero-shot result for them."""

from __future__ import annotations

import pytest

from tests.conftest import TINY_SPEC
from tests.gui.helpers import load_in_window
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import classify
from vitstudio.core.models.loading import load_model
from vitstudio.core.models.zeroshot import with_classes
from vitstudio.gui import workers


def test_classes_box_turns_words_into_the_models_classes(window, qtbot, clip_dir, tiny_weights, photos, tmp_path):
    """Box hidden without a text tower; class folders fill it (hidden skipped); applying makes a new model whose
    predictions equal core zero-shot `classify`; one class is a ValueError notice and keeps the model. [window]
    """
    box = window.model_panel.classes
    load_in_window(window, qtbot, TINY_SPEC, str(tiny_weights[0]))
    assert not box.isVisible()  # no text tower: no box
    headless = load_in_window(window, qtbot, str(clip_dir))
    assert box.isVisible() and headless.labels == []
    for name in ("bee", "ant", ".hidden"):
        (tmp_path / "data" / name).mkdir(parents=True)
    box.use_folder(tmp_path / "data")
    assert box.classes.text() == "ant, bee"
    box.classes.setText("an astronaut, a cat, a cup of coffee")
    box.prompt.setText("{}")
    with qtbot.waitSignal(window.state.model_loaded, timeout=60000):
        box.apply()
    loaded = window.state.model
    assert loaded.labels == ["an astronaut", "a cat", "a cup of coffee"] and loaded.uid != headless.uid
    window.add_paths([str(photos["chelsea"])])
    qtbot.waitUntil(lambda: window.state.selected is not None
                    and window.state.prediction_for(window.state.selected) is not None, timeout=60000)
    shown = window.state.prediction_for(window.state.selected)
    assert window.state.selected.prediction.request == (loaded.uid,)  # made by the model with the classes
    reference = with_classes(load_model(str(clip_dir)), loaded.labels, "{}")
    expected = classify(reference, [read_image(photos["chelsea"])], topk=len(shown.probs))[0]
    assert shown.labels == expected.labels and shown.probs == pytest.approx(expected.probs, abs=1e-6)

    errors = []
    window.state.error.connect(errors.append)
    box.classes.setText("only-one")
    box.apply()
    assert errors and isinstance(errors[0].exc, ValueError) and "at least two" in str(errors[0].exc)
    assert window.state.model is loaded
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=30000)
