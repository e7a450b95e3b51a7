"""Compare → Match (issue 52): a click on image A maps its patch's similarity over image B (the cosine computed here
from the core's features), marks the best match and draws the mutual matches; block, facet and the map's opacity over
B are bound controls."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image
from PySide6.QtCore import QPointF, Qt

from vitstudio.core.data.images import read_image
from vitstudio.core.dense import matching
from vitstudio.core.models.loading import load_model
from vitstudio.gui.explore.compare_panel import ComparePanel

SPEC = "custom:img=64,patch=8,width=32,depth=2,heads=2,classes=2"  # an 8×8 grid


def test_a_click_on_a_shows_the_cosine_over_b_and_marks_its_best_match(panel, qtbot, tmp_path):
    """B from the strip's list, block and facet through their bound controls (the block's range the model's depth, the
    last chosen); a mouse click on A's view at a patch centre: the map drawn over B equals the cosine of the core's
    query features computed in the test (1e-5), B's marker sits on its highest patch, the 10 mutual matches and the
    point are drawn on both images, the line gives the similarity; Matches 3 draws 3 without computing again. [panel]
    """
    rng = np.random.default_rng(0)
    paths = []
    for i in range(2):
        path = tmp_path / f"im{i}.png"
        Image.fromarray(np.kron(rng.integers(0, 256, (12, 16, 3)), np.ones((4, 4, 1))).astype(np.uint8)).save(path)
        paths.append(str(path))
    torch.manual_seed(0)
    loaded = load_model(SPEC, None, "cpu", "fp32")
    compare = panel(ComparePanel, model=loaded, images=paths)
    page = compare.match
    assert compare.view_kind.isVisible()  # the Same image page's view controls, on that page only
    compare.pages.setCurrentWidget(page)
    assert not compare.view_kind.isVisible() and not compare.cmap.isVisible()
    assert [page.other.itemData(i) for i in range(page.other.count())] == paths  # B from the strip
    assert page.block.maximum() == 1 and page.block.value() == 1  # the model's blocks, the last one chosen
    page.block.setValue(0)
    page.facet.setCurrentIndex(page.facet.findText("query"))
    page.other.setCurrentIndex(1)
    page.other.activated.emit(1)
    assert (page.model.state.block, page.model.state.facet, page.model.state.other) == (0, "query", paths[1])
    qtbot.waitUntil(lambda: page.model.features is not None, timeout=30000)
    assert len(page.dots[1].data) == page.model.state.top == 10  # the mutual matches, on both images

    view = page.views[0]  # a click at the centre of A's patch (2, 6) of the crop it shows
    scene = view.view.mapViewToScene(QPointF(6.5 * 8, 2.5 * 8))
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=view.mapFromScene(scene))
    qtbot.waitUntil(lambda: page.model.match is not None, timeout=30000)

    a, b = matching.facet_features(loaded, [read_image(p) for p in paths], 0, "query")
    fa, fb = a.features[2, 6], b.features.reshape(64, -1)
    expected = (fb @ fa / (np.linalg.norm(fb, axis=1) * np.linalg.norm(fa))).reshape(8, 8)
    np.testing.assert_allclose(page.views[1].values, expected, atol=1e-5)  # the map drawn over B
    r, c = np.unravel_index(expected.argmax(), expected.shape)
    assert page.views[1].marker.isVisible() and page.views[1].marker.rect().topLeft() == QPointF(c * 8, r * 8)
    assert len(page.dots[0].data) == 11 and f"{expected.max():.3f}" in page.line.text()  # matches + the point
    assert page.titles[1].text().startswith("B: im1.png — best match at x ") and \
        page.titles[1].text().endswith(f"similarity {expected.max():.3f}")

    page.top.setValue(3)  # fewer matches drawn, nothing computed again
    assert len(page.dots[1].data) == 4 and page.model.match is not None

    overlay = page.views[1].overlay  # the map's opacity over B: a bound slider, as the Attention tab's
    assert overlay.opacity() == 0.6 and page.opacity.value() == page.model.state.opacity == 60
    page.opacity.setValue(25)
    assert page.model.state.opacity == 25 and overlay.opacity() == 0.25 and page.model.match is not None
    page.model.state.update(opacity=0)  # B's photo alone; the slider follows the state
    assert page.opacity.value() == 0 and overlay.opacity() == 0.0
    np.testing.assert_allclose(page.views[1].values, expected, atol=1e-5)  # the same map, only fainter
