"""Loss and accuracy per epoch (train and validation) and the learning rate per step of one run. The key to the
colours is in each title, not in a legend box: a box inside the plot covered the curves it explained."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt

from vitstudio.core.fields import EPOCH_CURVES

TRAIN, VAL = "#1f77b4", "#ff7f0e"
def _keyed(title: str) -> str:
    return (f"{title} &nbsp;<span style='color:{TRAIN}'>━ train</span> "
            f"<span style='color:{VAL}'>━ val</span>")


class TrainingCurvesView(pg.GraphicsLayoutWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        loss = self.addPlot(title=_keyed("Loss"))
        acc = self.addPlot(title=_keyed("Accuracy"))
        self.nextRow()
        lr = self.addPlot(title="Learning rate (per step)", colspan=2)
        self.lr_plot = lr
        self.lr_note = pg.TextItem("", color="#888", anchor=(0.5, 0.5))  # in place of a curve (`draw_lr`)
        self.lr_note.setPos(0.5, 0.5)
        self.lr_note.setVisible(False)
        lr.addItem(self.lr_note, ignoreBounds=True)
        self.plots = {"loss": loss, "acc": acc}
        self.lines = {  # what each curve holds is `line.getData()` (tests read it)
            "train_loss": loss.plot(pen=pg.mkPen(TRAIN, width=2), name="train"),
            "val_loss": loss.plot(pen=pg.mkPen(VAL, width=2), name="val"),
            "train_acc": acc.plot(pen=pg.mkPen(TRAIN, width=2), name="train"),
            "val_acc": acc.plot(pen=pg.mkPen(VAL, width=2), name="val"),
            "lr": lr.plot(pen=pg.mkPen("#2ca02c", width=1)),
            # a head started from the class names: its validation before any step (zero-shot), at epoch 0
            "start_loss": loss.plot(pen=None, symbol="d", symbolSize=11, symbolBrush=VAL),
            "start_acc": acc.plot(pen=None, symbol="d", symbolSize=11, symbolBrush=VAL),
        }
        self.start_level = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(VAL, width=1, style=Qt.DashLine),
                                           label="zero-shot start {value:.0%}",
                                           labelOpts={"position": 0.85, "color": VAL, "anchors": [(1, 1), (1, 1)]})
        self.start_level.setVisible(False)
        acc.addItem(self.start_level, ignoreBounds=True)

    def draw_epochs(self, curves: dict[str, list]) -> None:
        for key in EPOCH_CURVES:
            self.lines[key].setData(curves["epoch"], curves[key], symbol="o", symbolSize=5)
        self._fit_epochs()

    def _fit_epochs(self) -> None:
        """x spans the epochs drawn (epoch 0 too where the zero-shot start is), never less than one epoch:
        pyqtgraph ranges a lone point with the width of the range before it (a previous run's 50 epochs)."""
        xs = [x for key in ("train_loss", "start_loss") for x in self._xs(key)]
        if not xs:
            return
        low, high = min(xs), max(xs)
        if high - low < 1:
            low, high = (low + high) / 2 - 0.5, (low + high) / 2 + 0.5
        for plot in self.plots.values():
            plot.setXRange(low, high, padding=0.05)

    def _xs(self, key: str) -> list[float]:
        xs = self.lines[key].getData()[0]
        return [] if xs is None else list(xs)

    def draw_lr(self, lr_data: list[tuple[float, float]], note: str | None = None) -> None:
        """The learning rate per step, or `note` in words where the run has no schedule to draw. With neither,
        the axes start over (empty, they kept the previous run's range: an old run's axes with no curve)."""
        shown = lr_data if note is None else []
        self.lines["lr"].setData(*(zip(*shown) if shown else ([], [])))
        if shown and not self.lr_note.isVisible():
            return  # one more step of a curve already shown (called per step while a run trains)
        self.lr_note.setText(note or "")
        self.lr_note.setVisible(note is not None)
        for side in ("left", "bottom"):
            self.lr_plot.showAxis(side, note is None)
        if not shown:
            self.lr_plot.setRange(xRange=(0, 1), yRange=(0, 1), padding=0)  # the note sits at the middle
        self.lr_plot.enableAutoRange()  # the next curve sets the range again

    def draw_start(self, start) -> None:
        """The validation before any step of a head started from text (a HeadStart), or nothing (None)."""
        shown = start is not None and start.val_acc is not None
        x = [0] if shown else []
        self.lines["start_loss"].setData(x, [start.val_loss] if shown else [])
        self.lines["start_acc"].setData(x, [start.val_acc] if shown else [])
        self.start_level.setVisible(shown)
        if shown:
            self.start_level.setValue(start.val_acc)
        self._fit_epochs()

    def clear_curves(self) -> None:
        for line in self.lines.values():
            line.setData([], [])
        self.start_level.setVisible(False)
        self.draw_lr([])
