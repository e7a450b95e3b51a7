"""The Compare tab's Layers page (issue 33, item 3): CKA between every block of the current model and the second
one on the strip's images, the same matrix as `vitstudio compare-layers`; a run offers its base model; hover and
click; switches drop stale work."""

from __future__ import annotations

import json

import numpy as np
from PySide6.QtCore import QPointF

from tests.core.generators import drain
from tests.gui.helpers import settle as _settle
from vitstudio.core.models.demo import bundled_demo, render_digits
from vitstudio.core.models.loading import load_model
from vitstudio.gui.explore.compare_panel import ComparePanel


def _quick_run(tmp_path):
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config

    data = render_digits(tmp_path / "digits", per_class=3)
    drain(fine_tune(make_config(str(data), str(bundled_demo()), str(tmp_path / "run"), "quick", epochs=5)))
    return data, tmp_path / "run"


def test_a_run_is_compared_with_its_base_block_by_block_as_the_cli_does(panel, qtbot, tmp_path, capsys):
    """A quick run loaded offers its base model as the second; CKA on the strip's 8 digits: diagonal 1 (a quick run
    changes only the head), equal to `vitstudio compare-layers --json` (1e-6) and to what is drawn; hover names a cell's
    value, a click shows both blocks' PCA maps; a cancel leaves the page usable; a model switch drops the matrix and the
    maps. [panel] [fine-tune] Greyed, the button says why in its tooltip and in the line right under it (it was below
    the plot, out of sight at 1280×720), and the empty plot's axes count blocks without an SI prefix (it read "−600…600
    (x0.001)": the walk).
    """
    from vitstudio.cli import main

    data, run = _quick_run(tmp_path)
    images = sorted(data.glob("*/*.png"))[:8]
    compare = panel(ComparePanel, model=run, images=images)
    assert compare.other_name.currentText() == str(bundled_demo())  # before vs after fine-tuning, offered first
    page = compare.layers
    compare.pages.setCurrentWidget(page)
    assert not page.run_button.isEnabled() and "second model" in page.note.text()
    assert page.run_button.toolTip() == page.note.text()  # why it is greyed, on the button and under it (walk)
    assert page.layout().itemAt(1).widget() is page.note
    for side in ("left", "bottom"):  # the empty plot's axes count blocks: no "(x0.001)" (the walk)
        assert not page.plot.getAxis(side).autoSIPrefix
    compare.load_other()
    qtbot.waitUntil(lambda: compare.other is not None, timeout=60000)
    assert page.run_button.isEnabled() and "8 images" in page.run_button.text()
    page.run_button.click()
    qtbot.waitUntil(lambda: page.result is not None, timeout=60000)
    matrix = page.result.matrix
    assert matrix.shape == (4, 4)
    np.testing.assert_allclose(np.diag(matrix), 1.0, atol=1e-5)  # a quick run changes only the head
    assert main(["compare-layers", *map(str, images), "--model", str(run), "--model", str(bundled_demo()),
                 "--json"]) == 0
    np.testing.assert_allclose(json.loads(capsys.readouterr().out)["cka"], matrix, atol=1e-6)
    np.testing.assert_allclose(page.heat.image, matrix, atol=1e-6)  # what is drawn is the result

    # hover names the cell's value; a click shows both blocks' PCA maps of the selected image
    view = page.plot.getViewBox()
    page._on_mouse(view.mapViewToScene(QPointF(2.0, 1.0)))
    assert page.hover.text() == f"block 1 × block 2: CKA {matrix[1, 2]:.3f}"
    page.select_cell(1, 2)
    qtbot.waitUntil(lambda: page.jobs.current("pair") is not None, timeout=30000)
    assert "block 1" in page.map_titles[0].text() and "block 2" in page.map_titles[1].text()
    assert page.maps[0].overlay.image is not None and page.maps[0].overlay.image.shape[-1] == 3

    # a cancel leaves the page usable; another current model drops the matrix (it was the old model's)
    page.run_button.click()
    page.cancel_button.click()
    assert "Cancelled" in page.note.text() and page.run_button.isEnabled()
    compare.state.set_model(load_model("custom:img=32,patch=8,width=32,depth=2,heads=2,classes=10"))
    _settle(qtbot)
    assert page.result is None and page.heat.image is None and page.jobs.current("pair") is None
