"""The GUI seam matrix of the explorer views (issue 29): every registry entry a tab offers × what the tab does with
it (show it, measure its faithfulness, sanity-check it, show it as a mask, export its data) × the kinds of model a
user brings (a class token, a distilled token, registers without a class token, no class token at all, CLIP-style,
a run fine-tuned here), through the real window. Each cell works (a finite map, a measurement, a file) or is
greyed out with the registry's reason; nothing is offered that then fails, as Measure faithfulness did for the head
maps (item 6). Compare (against a class-token model) and Play (a two-frame video) are cells of the same rows: every
analysis each offers, for every kind. Tiny models (≤ 48 px, depth 2), one window per model kind."""

from __future__ import annotations

import json

import numpy as np
import pytest
import timm
import torch
from PySide6.QtCore import Qt
from timm.models import save_for_hf

from tests.core.play_video import moving_digits_video
from tests.core.reference_vit import sharpen
from tests.core.synthetic_data import make_dataset
from tests.gui.helpers import load_in_window
from tests.gui.helpers import settle as _settle
from vitstudio.core.analysis import registry
from vitstudio.core.analysis.applicability import why_not
from vitstudio.gui import actions, workers

SMALL = dict(embed_dim=32, depth=2, num_heads=2, num_classes=3, img_size=48)
TIMM_KINDS = {
    "class token": ("vit_base_patch16_224", {}),
    "distilled": ("deit_tiny_distilled_patch16_224", {}),
    "registers, no class token": ("vit_base_patch16_reg4_gap_256", {}),
    "no class token": ("vit_base_patch16_224", dict(class_token=False, global_pool="avg")),
}
KINDS = (*TIMM_KINDS, "CLIP-style", "fine-tuned run")


def _timm_folder(kind: str, folder):
    arch, extra = TIMM_KINDS[kind]
    torch.manual_seed(0)
    model = sharpen(timm.create_model(arch, pretrained=False, **SMALL, **extra), scale=0.6).eval()
    save_for_hf(model, str(folder), safe_serialization=True)
    return str(folder)


def _clip(folder):
    from tests.core.test_openclip import CLIP_CFG, _build

    return str(_build(CLIP_CFG, folder, safetensors=True))


def _fine_tuned(root):
    from tests.core.generators import drain
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config

    base = _timm_folder("class token", root / "base")
    data = make_dataset(root / "data", per_class=4)
    drain(fine_tune(make_config(str(data), base, str(root / "run"), "scratch", epochs=1, batch_size=4)))
    return str(root / "run")


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    root = tmp_path_factory.mktemp("kinds")
    built = {kind: _timm_folder(kind, root / kind.replace(" ", "-").replace(",", "")) for kind in TIMM_KINDS}
    return {**built, "CLIP-style": _clip(root / "clip"), "fine-tuned run": _fine_tuned(root / "ft")}


def _methods(panel) -> list[tuple[int, str]]:
    return [(i, panel.method.itemData(i)) for i in range(panel.method.count())]


def _learned_concepts(loaded, out) -> str:
    from tests.core.generators import drain
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.concepts.learn import learn_concepts
    from vitstudio.core.concepts.settings import ConceptSettings

    data = make_dataset(out.parent / "concept-images", per_class=2) if not (out.parent / "concept-images").exists() \
        else out.parent / "concept-images"
    return str(drain(learn_concepts(loaded, [str(data)], ConceptSettings(size=8, k=2, epochs=1), out)).path)


def _check_attention_cell(window, qtbot, tmp_path, kind: str, index: int, method: str) -> str:
    """One cell of the Attention tab; returns what it came to ("works", or the reason it is greyed out)."""
    panel, model = window.attention, window.state.model
    item = panel.method.model().item(index)
    reason = why_not(model.model, method)
    assert item.isEnabled() == (reason is None), (kind, method, reason)
    if reason is not None:  # greyed out, with the registry's reason as its tooltip
        assert panel.method.itemData(index, Qt.ToolTipRole) == reason
        return reason
    analysis = registry.get(method)
    if "text" in analysis.param_names:  # the text map explains a text the user types
        panel.view_state.update(text="a photo of a cat")
    if "concepts" in analysis.param_names:  # the concept map reads concepts learned on this model
        panel.view_state.update(concepts=_learned_concepts(model, tmp_path / f"{kind}-concepts".replace(" ", "_")))
    panel.method.setCurrentIndex(index)
    if "patch" in analysis.param_names:  # the token map: a click picks its patch
        panel.select_patch(1, 1)
    try:
        qtbot.waitUntil(lambda: panel.displayed is not None and not workers.running_jobs(), timeout=20000)
    except Exception:
        raise AssertionError((kind, method, panel.info.text(), window.log_view.toPlainText()[-800:])) from None
    assert np.isfinite(panel.displayed).any(), (kind, method)
    # measure faithfulness / sanity check: offered exactly for one map on the patch grid, else greyed with why
    widget = panel.faithfulness
    required = {p.name for p in analysis.params if p.required}
    measured = analysis.one_map and required <= {"text"}  # one map of a class or a text (a typed one here)
    for button, offered in ((widget.measure_button, measured), (widget.sanity_button, measured and not required)):
        assert button.isEnabled() == offered, (kind, method, button.text())
        assert offered or button.toolTip(), (kind, method, button.text())  # greyed out with the reason
    if widget.measure_button.isEnabled():
        widget.measure_button.click()
        qtbot.waitUntil(lambda: widget.shown is not None or not workers.running_jobs(), timeout=60000)
        assert widget.shown is not None, (kind, method, window.log_view.toPlainText()[-500:])
    # the map as a mass mask: a 0/1 map of the same grid
    if panel.mask.isEnabled():
        panel.mask.setValue(60)
        _settle(qtbot)
        shown = panel.displayed
        assert shown is not None and set(np.unique(shown[np.isfinite(shown)])) <= {0.0, 1.0}, (kind, method)
        panel.mask.setValue(0)
    out = tmp_path / f"{kind}-{method}.npy".replace(" ", "_").replace(",", "")
    assert actions.export_data(window, str(out)), (kind, method)
    assert np.load(out).shape == panel.displayed.shape
    assert json.loads(out.with_suffix(".npy.json").read_text())["params"]["method"] == method
    return "works"


@pytest.mark.parametrize("kind", KINDS)
def test_every_view_of_every_method_works_or_says_why_for_every_model_kind(window, qtbot, tmp_path, specs, photos,
                                                                          kind):
    """Each cell works (a finite map, a faithfulness measurement where offered, a 0/1 mask, an exported array with its
    method in the sidecar) or its method is greyed out with exactly the registry's reason (`why_not`: the text map
    without a text tower, the class methods of a headless CLIP); the concept map shows concepts learned on the kind's
    model (faithfulness greyed out: it does not explain a class); Compare against a class-token model shows two finite
    maps for every analysis it offers (or names on the pane why it does not apply); Play finishes a two-frame video
    through every map it offers and prediction alone (greyed out with the reason for a model without classes); no error
    reaches the status bar. [window] [parametrised ×6: model kinds] [fine-tune]
    """
    load_in_window(window, qtbot, specs[kind])
    window.add_paths([str(photos["chelsea"])])
    qtbot.waitUntil(lambda: window.state.selected is not None and window.state.selected.image is not None,
                    timeout=10000)
    window.show_tab("attention")
    _settle(qtbot)
    cells = {method: _check_attention_cell(window, qtbot, tmp_path, kind, i, method)
             for i, method in _methods(window.attention)}
    assert "works" in cells.values(), cells  # every kind has something to look at
    # the Embeddings tab: each of its methods shows a finite array (or is greyed out with the reason)
    window.show_tab("embeddings")
    emb = window.embeddings
    for index, method in [(i, emb.mode.itemData(i)) for i in range(emb.mode.count())]:
        reason = why_not(window.state.model.model, method)
        assert emb.mode.model().item(index).isEnabled() == (reason is None), (kind, method)
        if reason is None:
            emb.mode.setCurrentIndex(index)
            if "patch" in registry.get(method).param_names:
                emb.view_state.update(patch=(1, 1))
            qtbot.waitUntil(lambda: not workers.running_jobs() and emb.export_data() is not None, timeout=60000)
            assert np.isfinite(np.asarray(emb.export_data()[1], float)).any(), (kind, method)
    # the tab as it looks, as a PNG
    assert actions.export_view(window, str(tmp_path / f"{kind}.png".replace(" ", "_").replace(",", "")))
    _check_compare(window, qtbot, specs["class token"], kind)
    _check_play(window, qtbot, moving_digits_video(tmp_path / "two.avi", frames=2, size=48), kind)
    assert not window.error_indicator.notices, [n.message for n in window.error_indicator.notices]


def _check_compare(window, qtbot, other_spec: str, kind: str) -> None:
    """Compare against a class-token model: every analysis it offers shows two finite maps (or each title says why
    it does not apply to that model); what it greys out carries a reason."""
    window.show_tab("compare")
    cmp = window.compare
    cmp.other_name.setEditText(other_spec)
    cmp.load_button.click()
    qtbot.waitUntil(lambda: cmp.other is not None and not workers.running_jobs(), timeout=30000)
    models = (window.state.model, cmp.other)
    shown = 0
    for index in range(cmp.view_kind.count()):
        method = cmp.view_kind.itemData(index)
        reasons = [why_not(m.model, method) for m in models]
        if not cmp.view_kind.model().item(index).isEnabled():
            assert any(reasons) and cmp.view_kind.itemData(index, Qt.ToolTipRole), (kind, method)
            continue
        cmp.view_kind.setCurrentIndex(index)
        refused = any(reasons)
        qtbot.waitUntil(lambda refused=refused: not workers.running_jobs() and (cmp.results is not None or refused),
                        timeout=30000)
        if refused:  # named on the pane of the model it does not apply to
            assert all(r is None or "does not apply" in t.text() for r, t in zip(reasons, cmp.titles)), (kind, method)
            continue
        assert all(np.isfinite(r[1]).any() for r in cmp.results), (kind, method)
        assert cmp.export_data() is not None
        shown += 1
    assert shown, kind


def _check_play(window, qtbot, video, kind: str) -> None:
    """Play a two-frame video through every map Play offers for this model (and prediction only): each session
    finishes with its frames on screen; a map that does not apply is greyed out with the reason, and so is the
    prediction alone for a model without classes (it plays its maps, captioned "no prediction")."""
    window.show_tab("play")
    panel, model = window.play, window.state.model
    for index in range(panel.method.count()):
        method = panel.method.itemData(index)
        reason = why_not(model.model, method) if method else None if model.labels else "no classes"
        assert panel.method.model().item(index).isEnabled() == (reason is None), (kind, method)
        if reason is not None:
            assert panel.method.itemData(index, Qt.ToolTipRole), (kind, method)
            continue
        panel.method.setCurrentIndex(index)
        panel.play(str(video))
        qtbot.waitUntil(lambda: not panel.stop_button.isEnabled(), timeout=60000)
        assert "Finished: 2 of 2" in panel.stats.text(), (kind, method, panel.screen.text(),
                                                          [n.message for n in window.error_indicator.notices])
        assert panel.screen.pixmap() is not None and not panel.screen.pixmap().isNull(), (kind, method)


SWITCH_TABS = ("predictions", "attention", "embeddings", "internals")


def _shape_of(window, tab: str):
    data = getattr(window, tab).export_data()
    return None if data is None else np.asarray(data[1], float).shape


def _matched(window, qtbot):
    """Compare → Match with the strip's second image as B and a point clicked on A: its map over B on screen."""
    window.show_tab("compare")
    page = window.compare.match
    window.compare.pages.setCurrentWidget(page)
    page.model.set_b(window.state.images[1].path)
    qtbot.waitUntil(lambda: page.model.features is not None, timeout=60000)
    page.model.click_crop(12.0, 20.0)
    qtbot.waitUntil(lambda: page.views[1].values is not None and not workers.running_jobs(), timeout=60000)
    assert page.views[1].values.shape == (4, 4)
    return page


@pytest.mark.parametrize("switch", ["model", "image"])
def test_after_a_switch_no_view_shows_what_it_showed_before(window, qtbot, photos, switch):
    """The switches row of the matrix: a model switch (4×4 patches and 5 classes → 6×6 and 3) or an image switch,
    with every explorer tab shown once before it. Right after the switch, each tab holds nothing or the new
    request's result, never the previous one's; once settled, each shows the new one.

    The switches row: a model switch (4×4 patches, 5 classes → 6×6, 3) or an image switch after every explorer tab was
    shown; each tab the moment it is shown holds nothing or the new request's result (the Attention tab kept the
    previous model's map, exportable under the new model's name, until its job finished: fixed with
    `ExplorerPanel.redraw`), and once settled the new one (the image switch's rollout equal to the core's); Compare →
    Match (B the strip's second image, a point clicked on A) holds no map of the 4×4 model after the model switch and
    matches the point again with the 6×6 one, and after the image switch drops the point of the previous A. [window]
    [parametrised ×2: switches]
    """
    from vitstudio.core.analysis import attention

    load_in_window(window, qtbot, "custom:img=32,patch=8,width=32,depth=2,heads=2,classes=5")
    window.add_paths([str(photos["chelsea"]), str(photos["rocket"])])
    qtbot.waitUntil(lambda: len(window.state.images) == 2 and window.state.selected is not None, timeout=10000)
    window.state.select(window.state.images[0])
    for tab in SWITCH_TABS:
        window.show_tab(tab)
        qtbot.waitUntil(lambda tab=tab: _shape_of(window, tab) is not None and not workers.running_jobs(),
                        timeout=60000)
    before = {tab: getattr(window, tab).export_data() for tab in SWITCH_TABS}
    match = _matched(window, qtbot)
    if switch == "model":
        load_in_window(window, qtbot, "custom:img=48,patch=8,width=32,depth=2,heads=2,classes=3")
        new = {"predictions": (3,), "attention": (6, 6), "embeddings": (6, 6), "internals": (6, 6)}
        for tab in SWITCH_TABS:  # each tab the moment it is shown: nothing of the 4×4 model (an export is of it)
            window.show_tab(tab)
            shape = _shape_of(window, tab)
            assert shape is None or shape[:2] == new[tab][:2], (tab, shape)
        window.show_tab("compare")  # Compare → Match: the 6×6 map or none, never the 4×4 one
        assert match.views[1].values is None or match.views[1].values.shape == (6, 6)
    else:
        window.state.select(window.state.images[1])
        assert match.model.state.point is None and match.views[1].values is None  # a point of the previous A
    window.show_tab("compare")
    qtbot.waitUntil(lambda: match.model.features is not None and not workers.running_jobs(), timeout=60000)
    assert match.model.features.placed[0].grid == ((6, 6) if switch == "model" else (4, 4))
    if switch == "model":  # the point is A's: matched again with the new model
        qtbot.waitUntil(lambda: match.views[1].values is not None, timeout=60000)
        assert match.views[1].values.shape == (6, 6)
    for tab in SWITCH_TABS:
        window.show_tab(tab)
        qtbot.waitUntil(lambda tab=tab: _shape_of(window, tab) is not None and not workers.running_jobs(),
                        timeout=60000)
        now = getattr(window, tab).export_data()
        if switch == "model":
            assert _shape_of(window, tab)[:2] == new[tab][:2], (tab, _shape_of(window, tab))
        elif tab in ("predictions", "attention"):  # the other image: other numbers
            assert not np.array_equal(np.asarray(now[1]), np.asarray(before[tab][1])), tab
    if switch == "image":  # the attention map on screen is the new image's, as the core computes it
        model = window.state.model
        window.show_tab("attention")
        window.attention.method.setCurrentIndex(window.attention.method.findData("rollout"))
        qtbot.waitUntil(lambda: not workers.running_jobs() and window.attention.displayed is not None,
                        timeout=60000)
        x = model.to_tensor(model.crop(window.state.images[1].image))[None]
        np.testing.assert_allclose(window.attention.displayed, attention.rollout(model, x)[0], rtol=1e-5, atol=1e-7)
