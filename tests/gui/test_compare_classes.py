"""Compare with a CLIP-style second model (issue 23): it classifies into the current model's classes (so a
fine-tuned run and zero-shot answer the same question), follows them when they change, and a headless second model
still shows its map."""

from __future__ import annotations

from tests.conftest import TINY_SPEC
from tests.gui.helpers import load_in_window
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import classify
from vitstudio.core.models.loading import load_model
from vitstudio.core.models.zeroshot import prompt_of, with_classes
from vitstudio.gui import workers


def _top1(window, qtbot):
    qtbot.waitUntil(lambda: window.compare.results is not None, timeout=60000)
    return window.compare.results[1][2]


def test_a_clip_second_model_takes_the_current_models_classes(window, qtbot, clip_dir, tiny_weights, photos):
    window.add_paths([str(photos["chelsea"])])
    qtbot.waitUntil(lambda: window.state.selected is not None, timeout=30000)
    main = load_in_window(window, qtbot, TINY_SPEC, str(tiny_weights[0]))  # a classifier with 5 labels
    window.show_tab("compare")
    window.compare.other_name.setEditText(str(clip_dir))
    window.compare.load_other()
    qtbot.waitUntil(lambda: window.compare.other is not None, timeout=60000)
    other = window.compare.other
    assert other.labels == main.labels and "zero-shot" in other.label_set
    reference = with_classes(load_model(str(clip_dir)), list(main.labels))
    expected = classify(reference, [read_image(photos["chelsea"])], topk=1)[0]
    assert _top1(window, qtbot) == f"{expected.labels[0]} ({expected.probs[0] * 100:.1f}%)"

    # the current model's classes change (a CLIP-style main model given words): the second model follows
    words = ["an astronaut", "a cat", "a cup of coffee"]
    with qtbot.waitSignal(window.state.model_loaded, timeout=60000):
        window.state.set_model(with_classes(load_model(str(clip_dir)), words, "{}"))
    qtbot.waitUntil(lambda: window.compare.other is not None and window.compare.other.labels == words, timeout=60000)
    assert prompt_of(window.compare.other) == "{}"  # the same prompt too: both sides answer the same question
    assert _top1(window, qtbot).split(" (")[0] in words
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=30000)


def test_a_headless_second_model_still_shows_its_map(window, qtbot, clip_dir, photos):
    window.add_paths([str(photos["chelsea"])])
    qtbot.waitUntil(lambda: window.state.selected is not None, timeout=30000)
    load_in_window(window, qtbot, str(clip_dir))  # headless: no classes to share
    window.show_tab("compare")
    window.compare.set_other(load_model(str(clip_dir)))
    assert _top1(window, qtbot) == "no classes (a headless model)"
    assert window.compare.results[1][1].size > 0
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=30000)
