"""Loss and accuracy per epoch (train and validation) and the learning rate per step of one run. The key to the
colours is in each title, not in a legend box: a box inside the plot covered the curves it explained."""

from __future__ import annotations

import pyqtgraph as pg

EPOCH_KEYS = ("train_loss", "val_loss", "train_acc", "val_acc")
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
        self.lines = {  # what each curve holds is `line.getData()` (tests read it)
            "train_loss": loss.plot(pen=pg.mkPen(TRAIN, width=2), name="train"),
            "val_loss": loss.plot(pen=pg.mkPen(VAL, width=2), name="val"),
            "train_acc": acc.plot(pen=pg.mkPen(TRAIN, width=2), name="train"),
            "val_acc": acc.plot(pen=pg.mkPen(VAL, width=2), name="val"),
            "lr": lr.plot(pen=pg.mkPen("#2ca02c", width=1)),
        }

    def draw_epochs(self, curves: dict[str, list]) -> None:
        for key in EPOCH_KEYS:
            self.lines[key].setData(curves["epoch"], curves[key], symbol="o", symbolSize=5)

    def draw_lr(self, lr_data: list[tuple[float, float]]) -> None:
        self.lines["lr"].setData(*(zip(*lr_data) if lr_data else ([], [])))

    def clear_curves(self) -> None:
        for line in self.lines.values():
            line.setData([], [])
