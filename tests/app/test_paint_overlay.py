"""The Paint page's segmentation over the Attention tab's image, without Qt (issue 52): the strip's selected image is
segmented as the Paint page segments it when it is the page's own image, follows every stroke, and is dropped with
a paint that no longer segments (a class nothing paints)."""

from __future__ import annotations

import numpy as np

from tests.app.test_paint_page import _paint_digit, demo, paint_page_on_digits  # noqa: F401 (demo: a module fixture)
from vitstudio.app.app_state import make_entry
from vitstudio.app.paint_overlay import PaintOverlay
from vitstudio.core.data.images import read_image


def test_the_strip_image_is_segmented_as_the_paint_page_segments_it(demo, tmp_path):  # noqa: F811
    """Toggled on before any paint it says what to paint; after two digits are painted the strip's selected digit is
    segmented exactly as the Paint page segments it when it is the page's own image (the same labels), cut to the crop
    the model sees (the demo's whole 32 px digit), its line giving each class's share; a stroke on that image segments
    it again (a larger bank, the page's new labels); a class nothing paints drops the overlay and says so.
    """
    app, folder, page, paths = paint_page_on_digits(demo, tmp_path)
    overlay = PaintOverlay(page)
    app.add_images([make_entry(paths[7], read_image(paths[7]))])
    app.select(app.images[0])
    overlay.state.update(shown=True)
    assert overlay.result is None and overlay.line().startswith("Paint segmentation: Paint some")
    for path in paths[:2]:
        _paint_digit(page, folder, path)
    segmented, crop = overlay.result  # asked again after each stroke (the last one's)

    folder.select(paths.index(paths[7]))  # the same image on the Paint page
    assert segmented.image == paths[7] and (segmented.labels == page.shown.labels).all()
    assert demo.crop_box(segmented.labels.shape) == (0, 0, 32, 32) and demo.input_hw == (32, 32)
    assert (crop == segmented.labels).all() and set(np.unique(crop)) == {0, 1}  # the whole digit is the crop
    assert f"object {segmented.shares['object']:.0%}" in overlay.line()

    _paint_digit(page, folder, paths[7])  # a stroke on that image: the overlay is its new segmentation
    assert overlay.result[0].bank > segmented.bank and (overlay.result[0].labels == page.shown.labels).all()
    page.paint.state.update(classes=("background", "object", "shadow"))  # a class nothing paints: no overlay
    assert overlay.result is None and "Paint some shadow" in overlay.line()
