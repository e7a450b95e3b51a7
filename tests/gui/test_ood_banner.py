"""Does this model fit these images? The real window with the bundled digits model: photos raise the banner on the
Predictions tab and mark the strip, digits do not; on the Folder tab a folder of ants and bees photos raises the
banner, says its folders are not the model's classes where correct / mistake views would be empty, and the review
and the sort say their results are unreliable."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from tests.core.planted import distinct_photos
from tests.gui.helpers import settle as _settle
from vitstudio.core.models.demo import bundled_demo, render_digits, sample_images

pytestmark = pytest.mark.skipif(bundled_demo() is None, reason="the bundled demo model is not in this checkout")
COLOUR_PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry", "retina",
                 "astronaut-tile01", "coffee-tile10", "rocket-tile11")
TRAINED_ON = "don't look like what this model was trained on (32×32 grey digits)"




def _photos(folder: Path, names=COLOUR_PHOTOS) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    images = distinct_photos()
    paths = []
    for name in names:
        paths.append(folder / f"{name}.png")
        Image.fromarray(images[name]).save(paths[-1], compress_level=0)  # stored: ~1/8 of the CPU of level 6
    return paths


def _load_demo(window, qtbot):
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(str(bundled_demo()))


def _classified(window, qtbot, count: int):
    qtbot.waitUntil(lambda: len(window.state.images) == count, timeout=20000)
    _settle(qtbot)
    qtbot.waitUntil(lambda: all(window.state.prediction_for(e) is not None for e in window.state.images),
                    timeout=20000)


def test_photos_raise_the_banner_and_digits_do_not(window, qtbot, tmp_path):
    """Demo sample digits raise no banner or ⚠; adding 10 photos raises the banner, marks ≥ 9 photo thumbnails and
    titles the selected photo "Not like…"; removing them hides it. [window]
    """
    _load_demo(window, qtbot)
    banner = window.predictions.banner
    window.add_paths([str(p) for p in sample_images()])  # the demo's own sample digits
    _classified(window, qtbot, len(sample_images()))
    assert banner.isHidden() and not banner.text()
    assert not any("⚠" in caption for caption in window.strip.captions())
    assert "Like the model's training data (32×32 grey digits)" in window.predictions.title.text()

    window.add_paths([str(p) for p in _photos(tmp_path / "photos")])  # now 10 photos beside 6 digits
    _classified(window, qtbot, len(sample_images()) + len(COLOUR_PHOTOS))
    assert not banner.isHidden() and TRAINED_ON in banner.text()
    marked = [c for c in window.strip.captions() if "⚠" in c]
    assert len(marked) >= 9 and all(c.split("\n")[0].endswith(".png") and "digit" not in c for c in marked)
    photo = next(e for e in window.state.images if "astronaut.png" in e.path)
    window.state.select(photo)
    assert "Not like what this model was trained on (32×32 grey digits)" in window.predictions.title.text()

    # the photos taken out of the strip again: the digits left fit the model, the banner goes
    window.state.remove_images([e for e in window.state.images if "photos" in e.path])
    assert banner.isHidden() and len(window.state.images) == len(sample_images())


def test_folder_tab_says_the_model_does_not_fit_and_the_folders_are_not_its_classes(panel, qtbot, tmp_path,
                                                                                        monkeypatch):
    """digits: no banner; ants/bees photos: banner, "folders … are not this model's classes", empty mistakes view
    explained; review and sort say "results are unreliable". [panel]
    """
    from vitstudio.gui.folder.folder_map import colour_groups
    from vitstudio.gui.folder.folder_panel import FolderPanel

    panel = panel(FolderPanel, model=bundled_demo())  # the Folder tab alone on the demo

    panel.open_folder(str(render_digits(tmp_path / "digits", 6)))  # the model's own kind of images, its own classes
    _settle(qtbot)
    qtbot.waitUntil(lambda: panel.fit.fit is not None, timeout=20000)
    assert panel.fit.banner.isHidden() and panel.fit.mismatch.isHidden() and not panel.fit.unreliable_note()

    data = tmp_path / "hymenoptera"
    names = list(distinct_photos())
    _photos(data / "ants", [n for n in names if "tile" in n][:12])
    _photos(data / "bees", [n for n in names if n.startswith("face")][:12])
    panel.open_folder(str(data))
    _settle(qtbot)
    qtbot.waitUntil(lambda: panel.fit.fit is not None, timeout=20000)
    assert not panel.fit.banner.isHidden() and TRAINED_ON in panel.fit.banner.text()
    expected = "Your folders (ants, bees) are not this model's classes (0–9): fine-tune it to learn them"
    assert not panel.fit.mismatch.isHidden() and expected in panel.fit.mismatch.text()

    # "Show mistakes" is empty because nothing can be compared: said in words, not left blank
    panel.toolbar.correctness.setCurrentIndex(2)
    assert panel.visible_rows() == [] and expected in panel.fit.mismatch_text()
    panel.toolbar.correctness.setCurrentIndex(0)
    assert [name for name, _, _ in colour_groups(panel.results, "correct")] == ["folder not a model class"]

    # the review and the sort say their results rest on images the model was not trained for
    panel.start_review()
    _settle(qtbot)
    qtbot.waitUntil(lambda: panel.report is not None, timeout=60000)
    assert "results are unreliable" in panel.info.text()
    asked = []
    monkeypatch.setattr("vitstudio.gui.file_dialogs.choose_folder", lambda *a, **k: str(tmp_path / "out"))
    monkeypatch.setattr("PySide6.QtWidgets.QMessageBox.question",
                        lambda _parent, _title, text, *a, **k: asked.append(text) or 0)
    panel._sort_dialog()
    assert asked and "results are unreliable" in asked[0]
    assert not (tmp_path / "out").exists()  # cancelled: nothing was sorted


def test_the_predictions_line_says_cannot_tell_when_the_score_does_not_separate(tmp_path, tiny_weights):
    """The Predictions tab's line for an image under the threshold of a bank whose score does not separate outside
    images (lowest AUROC 0.62): 'Cannot tell', with why, never 'Like the model's training data'."""
    import numpy as np

    from tests.conftest import TINY_SPEC
    from vitstudio.core.inference import classify
    from vitstudio.core.models import ood
    from vitstudio.core.models.loading import load_model
    from vitstudio.gui.explore.predictions_panel import fit_line

    features = np.random.default_rng(0).normal(size=(20, 32)).astype(np.float16)
    ood.save_bank(tiny_weights[0].parent, ood.OODBank(features, 10.0, 1, "32×32 colour images of ants, bees",
                                                       {"noise": 0.62, "digits": 0.97}))
    model = load_model(TINY_SPEC, str(tiny_weights[0]))
    line = fit_line(model, classify(model, [Image.new("RGB", (32, 32), (90, 60, 30))])[0])
    assert line.startswith("Cannot tell whether this is like the model's training data (32×32 colour images of "
                           "ants, bees)") and "only at AUROC 0.62, under 0.95" in line and "Like the" not in line
