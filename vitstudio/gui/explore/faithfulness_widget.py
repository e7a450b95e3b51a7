"""Can the map on screen be trusted? Its deletion and insertion curves next to a random ranking's (Petsiuk et al.
2018; the protocol is in core/analysis/faithfulness.py) and the model-randomisation sanity check's Spearman curve
(Adebayo et al. 2018), for the Attention panel's current model, image and method.

Both cost many forwards (2·(S+1) per ranking, seven rankings; one map per randomised block), so they run on request,
in a worker, keyed by the view state: another model, image or method discards a pending measurement and hides a
finished one (it comes back when that method is shown again)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSpinBox, QVBoxLayout, QWidget

from vitstudio.app.analyses import DEFAULT_SHARE, mass_mask
from vitstudio.app.explore_jobs import faithfulness_job, insensitive, sanity_job, unmeasurable
from vitstudio.core.fields import FieldSpec

from .. import workers
from ..common.type_map import control_for

CURVES, SANITY = "faithfulness", "sanity"
# the view fields a measurement answers (text: the text map's)
MEASURED_FOR = frozenset({"model", "image", "method", "text"})
MEASURE_TIP = ("Deletion: the top-1 class's probability as the map's highest patches are zeroed (lower area = more "
               "faithful). Insertion: restoring them into a blurred copy (higher = more faithful). Dashed: a random "
               "ranking (mean of 5).")
DELETION, INSERTION = "#d62728", "#1f77b4"
# the key to the curves in the title: a legend box inside a plot this small covers the curves it explains
CURVES_KEY = (f"<span style='color:{DELETION}'>━ deletion</span> <span style='color:{INSERTION}'>━ insertion</span> "
              f"<span style='color:#888'>╌ random</span>")
SANITY_TIP = ("Re-draw the classifier, then each block from the top, and compare the map with the trained model's "
              "(Spearman ρ): a map that explains the model must change.")


class FaithfulnessWidget(QWidget):
    def __init__(self, view_state, context, report_error, parent: QWidget | None = None) -> None:
        """`context()` answers (model, image entry) or None; `report_error(exc)` shows a job's error."""
        super().__init__(parent)
        self.view_state, self._context, self._report_error = view_state, context, report_error
        # the text map's curves follow the similarity to its text: another text is another measurement
        self.jobs = workers.ViewJobs(view_state, {CURVES: ("method", "text"), SANITY: ("method",)},
                                     long=(CURVES, SANITY))
        self.measure_button = QPushButton("Measure faithfulness")
        self.measure_button.setToolTip(MEASURE_TIP)
        self.sanity_button = QPushButton("Sanity check")
        self.sanity_button.setToolTip(SANITY_TIP)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        # room for both verdicts from the start: the splitter sizes the widget by its minimum, so a summary that
        # grows later would push the plots' x labels out of the panel
        self.summary.setMinimumHeight(3 * self.summary.fontMetrics().lineSpacing())
        self.curves = _plot("fraction of patches deleted / inserted", "target probability")
        self.curves.setTitle(CURVES_KEY, size="8pt")
        self.spearman = _plot("blocks re-drawn from the top", "Spearman ρ")
        self.shown = self.shown_sanity = None  # what the plots draw (tests read them)
        buttons = QHBoxLayout()
        buttons.addWidget(self.measure_button)
        buttons.addWidget(self.sanity_button)
        plots = QHBoxLayout()
        plots.addWidget(self.curves, 3)
        plots.addWidget(self.spearman, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(buttons)
        layout.addWidget(self.summary)
        layout.addLayout(plots)
        self.measure_button.clicked.connect(self.measure)
        self.sanity_button.clicked.connect(self.check_sanity)
        view_state.connect(self._on_view_state)
        self.refresh()

    def measure(self) -> None:
        self._start(CURVES, "Faithfulness", faithfulness_job, self.view_state.text)

    def check_sanity(self) -> None:
        self._start(SANITY, "Sanity check", sanity_job)

    def _start(self, slot: str, name: str, job, *extra) -> None:
        ctx = self._context()
        if ctx is None:
            self.summary.setText("Load a model and select an image first.")
            return
        model, entry = ctx
        self.summary.setText(f"{name} of {self.view_state.method}…")
        self.jobs.start(slot, name, job, model, entry.image, self.view_state.method, *extra,
                        on_result=self._on_result, on_error=self._report_error)

    def _on_view_state(self, name: str, _value) -> None:
        if name in MEASURED_FOR:
            self.refresh()

    def _on_result(self, _value) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Draw what answers the current model, image and method (nothing otherwise)."""
        self.shown, self.shown_sanity = self.jobs.current(CURVES), self.jobs.current(SANITY)
        method = self.view_state.method
        why = unmeasurable(method, self.view_state.text)
        why_no_sanity = unmeasurable(method, self.view_state.text, sanity=True)
        self.measure_button.setEnabled(why is None)
        self.measure_button.setToolTip(why or MEASURE_TIP)
        self.sanity_button.setEnabled(why_no_sanity is None)
        self.sanity_button.setToolTip(why_no_sanity or SANITY_TIP)
        self.curves.clear()
        self.spearman.clear()
        lines = []
        if self.shown is not None:
            lines.append(self._draw_curves(self.shown, method))
        if self.shown_sanity is not None:
            lines.append(self._draw_sanity(self.shown_sanity, method))
        if lines or not (self.jobs.running(CURVES) or self.jobs.running(SANITY)):
            self.summary.setText("\n".join(lines) or why or why_no_sanity or "")

    def _draw_curves(self, result, method: str) -> str:
        if method not in result.methods:
            return f"Not measured: {result.errors.get(method, 'no map')}"
        mine, rand = result.methods[method], result.random
        steps = len(mine.deletion) - 1
        xs = [i / steps for i in range(steps + 1)]
        for curve, colour, style, name in ((mine.deletion, DELETION, None, "deletion"),
                                           (rand.deletion, DELETION, "dash", "random"),
                                           (mine.insertion, INSERTION, None, "insertion"),
                                           (rand.insertion, INSERTION, "dash", "random")):
            pen = pg.mkPen(colour, width=2, style=pg.QtCore.Qt.DashLine if style else pg.QtCore.Qt.SolidLine)
            self.curves.plot(xs, list(curve), pen=pen, name=name)
        what = f"Class {result.target}" if result.score == "probability" else result.score.capitalize()
        self.curves.setLabel("left", "target probability" if result.score == "probability" else "similarity")
        return (f"{what}: deletion {mine.deletion_auc:.3f} (random {rand.deletion_auc:.3f}, lower is "
                f"better), insertion {mine.insertion_auc:.3f} (random {rand.insertion_auc:.3f}, higher is better).")

    def _draw_sanity(self, check, method: str) -> str:
        if method not in check.correlation:
            return f"No sanity check: {check.errors.get(method, 'no map')}"
        curve = check.mean_curve(method)
        self.spearman.plot(list(range(1, len(curve) + 1)), list(curve), pen=pg.mkPen("#2ca02c", width=2),
                           symbol="o", symbolSize=5)
        self.spearman.getAxis("bottom").setTicks([[(i + 1, s.replace("block ", "b")) for i, s in
                                                   enumerate(check.steps)]])
        # half a step either side: pyqtgraph drops the label of a tick on the plot's edge (no room for it)
        self.spearman.setXRange(0.5, len(curve) + 0.5, padding=0)
        if method in check.insensitive:
            return (f"⚠ Sanity check: the map barely changes when every weight is re-drawn (ρ {curve[-1]:.2f} ≥ "
                    f"{insensitive()}): it says little about what this model learned.")
        return f"Sanity check passed: the map changes as the weights are re-drawn (ρ {curve[-1]:.2f} at the end)."


PLOT_HEIGHT = 140  # the curves, their key and both axes' labels; the Attention tab fits 1280×720 in its minimum


def _plot(x_label: str, y_label: str) -> pg.PlotWidget:
    plot = pg.PlotWidget()
    plot.setMinimumHeight(PLOT_HEIGHT)
    plot.setLabel("bottom", x_label)
    plot.setLabel("left", y_label)
    for side in ("left", "bottom"):  # a probability axis in SI prefixes read "target probability (x0." at 200-600
        plot.getAxis(side).enableAutoSIPrefix(False)
    plot.showGrid(x=True, y=True, alpha=0.2)
    return plot


# -- the map as a mask (DINO's visualize_attention): the panel shows and exports it instead of the map ------------
def mask_spin_box(spec: FieldSpec) -> QSpinBox:
    """The control of the Attention tab's `mask` field (a share of the map's mass, %)."""
    box = control_for(spec)  # its range: the field's, declared by bind()
    box.setSingleStep(5)
    box.setSuffix(" % of the mass")
    box.setSpecialValueText("off")
    box.setToolTip(f"Show the map as a mask: its highest patches until they hold this share of its mass (DINO's "
                   f"attention masks use {DEFAULT_SHARE:.0%}); exported as the mask. Off shows the map.")
    return box


def masked(values: np.ndarray, percent: int, text: str) -> tuple[np.ndarray, str]:
    """(mask as 0/1 floats, description) of a map (or of each head's map) keeping `percent` % of its mass."""
    mask, kept = mass_mask(values, percent / 100)
    # the setting and what the fewest whole patches reaching it hold, both said: "keeping 16 %" alone under a setting
    # of 15 % reads as a mismatch
    return mask.astype(np.float32), (f"{text} — mask: the fewest patches holding {percent}% of the mass (they "
                                     f"hold {float(np.mean(kept)):.0%})")
