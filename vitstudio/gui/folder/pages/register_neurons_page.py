"""The Register neurons page: "Find register neurons" runs Jiang et al.'s search over the folder (the same figures as
`vitstudio registers FOLDER --model M`), lists the neurons best first, draws the one picked on the folder's selected
image, and saves the register file `--registers` takes; drawn from its model
(`vitstudio.app.pages.register_neurons.RegisterNeuronsModel`)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.pages.register_neurons import RegisterNeuronsModel

from ...common.bind import bind
from ...common.flow_layout import wrapping_row
from ...common.job_progress import show_progress
from ...common.map_view import MapView
from ...common.small_plot import SmallPlotWidget
from ...common.type_map import control_for
from ...file_dialogs import save_file

COLUMNS = ("block", "neuron", "at outliers", "elsewhere")


class RegisterNeuronsPage(QWidget):
    page_id = "register-neurons"

    def __init__(self, model: RegisterNeuronsModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        fields = model.state.fields()
        self.detect_layer, self.top = control_for(fields["detect_layer"]), control_for(fields["top"])
        self._bindings = [bind(self.detect_layer, model.state, "detect_layer"), bind(self.top, model.state, "top")]
        self.detect_layer.setToolTip(fields["detect_layer"].help)
        self.top.setToolTip(fields["top"].help)
        self.run_button = QPushButton("Find register neurons")
        self.run_button.setToolTip("Tokens of the detect block above the folder's norm threshold (auto) are the "
                                   "outliers; every MLP neuron up to that block is scored by its mean |activation| "
                                   "there")
        self.cancel_button = QPushButton("Cancel")
        self.save_button = QPushButton("Save…")
        self.save_button.setToolTip("A file for `vitstudio predict/explain --registers FILE`: the model with a "
                                    "test-time register these neurons write to")
        self.progress = QProgressBar()
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setMinimumHeight(90)
        self.table.setMaximumHeight(150)  # five rows in sight: the map below keeps the rest of a short screen
        self.map = MapView()
        self.map.setMinimumSize(150, 150)
        self.norms = SmallPlotWidget()  # Jiang et al.'s figure: the largest patch norm per block, without and with
        self.norms.setLabel("bottom", "block")
        self.norms.setLabel("left", "max patch norm")
        self.norms.addLegend(offset=(-10, 30))  # right: the curves rise on the left
        self.views = QTabWidget()
        self.views.addTab(self.map, "Where it fires")
        self.views.addTab(self.norms, "Norms per block")
        self.views.setDocumentMode(True)
        self.note = QLabel()
        self.note.setWordWrap(True)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(wrapping_row([QLabel("Detect at block"), self.detect_layer, QLabel("Keep"), self.top]))
        box.addWidget(wrapping_row([self.run_button, self.cancel_button, self.save_button]))
        box.addWidget(self.progress)
        box.addWidget(self.table)
        box.addWidget(self.views, 1)
        box.addWidget(self.note)
        self.run_button.clicked.connect(model.start)
        self.cancel_button.clicked.connect(model.cancel)
        self.save_button.clicked.connect(self._save)
        self.table.currentCellChanged.connect(self._on_row)
        model.progress.connect(self._on_progress)
        model.changed.connect(self.draw)
        self.draw()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's
        """Small: the table's columns and the map's plot would ask for 600 × 730 px, and the side sized to the widest
        page's hint took the Folder tab's room from its map."""
        return self.minimumSizeHint().expandedTo(QSize(300, 360))

    def heightForWidth(self, _width: int) -> int:  # noqa: N802 - Qt's
        """None (the wrapped note's would be the page's preferred height): the side's scroll area then gives the page
        the room there is, down to its minimum, the map taking what the rows leave (it was below a short screen's
        edge)."""
        return -1

    def _on_progress(self, p) -> None:
        show_progress(self.progress, self.note, p)

    def _on_row(self, row: int, *_rest) -> None:
        if row >= 0:
            self.model.pick(row)

    def _save(self) -> None:
        path = save_file(self, "Save the register file", "registers.json", "Register files (*.json)")
        if path:
            self.note.setText(f"Saved {self.model.save(path)}: give it to `vitstudio predict` or `explain` as "
                              f"--registers.")

    def draw(self) -> None:
        running = self.model.running()
        result = self.model.result
        self.run_button.setEnabled(self.model.ready() and not running)
        self.cancel_button.setEnabled(running)
        self.progress.setVisible(running)
        self.save_button.setEnabled(result is not None and bool(result.neurons))
        self._fill(result)
        self._draw_map()
        self._draw_norms()
        if running:
            self.progress.setRange(0, 0)
            self.note.setText("Reading the folder's token norms, then every neuron at the outliers…")
        elif result is None:
            self.note.setText(self.model.failure or ("Open a folder to look for the neurons that make the model's "
                                                     "high-norm tokens." if not self.model.ready() else
                                                     "Find the MLP neurons behind the model's high-norm tokens."))
        elif not result.neurons:
            self.note.setText(f"No token of any of the {result.images} images is above {result.threshold:.4g} "
                              f"({result.threshold_rule}): no register neurons.")
        else:
            self.note.setText(f"{result.images_with_outliers} of {result.images} images have tokens above "
                              f"{result.threshold:.4g} at block {result.detect_layer}. "
                              + ("The map: where the picked neuron fires on the selected image."
                                 if self.model.maps is not None else "Select an image to see where each neuron fires."))
        self.note.setToolTip(f"Threshold: {result.threshold_rule}" if result is not None else "")

    def _fill(self, result) -> None:
        neurons = result.neurons if result is not None else ()
        if self.table.rowCount() == len(neurons) and all(
                self.table.item(i, 1).text() == str(n.neuron) for i, n in enumerate(neurons)):
            return
        picked = self.model.picked
        self.table.setCurrentCell(-1, -1)  # no current row while refilling: the refill picks nothing (_on_row)
        self.table.setRowCount(len(neurons))
        for i, n in enumerate(neurons):
            for j, value in enumerate((str(n.layer), str(n.neuron), f"{n.score:.4g}", f"{n.elsewhere:.4g}")):
                self.table.setItem(i, j, QTableWidgetItem(value))
        if neurons:
            self.table.selectRow(picked)  # the model's pick again: picking it once more changes nothing
        self.table.resizeColumnsToContents()

    def _draw_norms(self) -> None:
        """The folder's mean maximum patch norm per block (the reference notebook's figure) on the plain model, and
        with the test-time register beside it its patches' and the register's own."""
        self.norms.clear()
        both = self.model.artifacts
        if both is None:
            return
        plain, moved = both
        blocks = np.arange(plain.max_patch.shape[1])
        self.norms.plot(blocks, plain.max_patch.mean(0), pen=pg.mkPen("#1f77b4", width=2), symbol="o", symbolSize=6,
                        symbolBrush="#1f77b4", name="patches")
        if moved is not None:
            self.norms.plot(blocks, moved.max_patch.mean(0), pen=pg.mkPen("#ff7f0e", width=2), symbol="s",
                            symbolSize=6, symbolBrush="#ff7f0e", name="patches, with the register")
            register = moved.prefix_names.index("test-time register")
            self.norms.plot(blocks, moved.prefix_max[:, register], pen=pg.mkPen("#2ca02c", width=2,
                                                                                  style=pg.QtCore.Qt.DashLine),
                            name="the register (largest)")
        self.norms.getAxis("bottom").setTicks([[(int(b), str(b)) for b in blocks]])

    def _draw_map(self) -> None:
        maps = self.model.maps
        if maps is None:
            self.map.set_image(None)
            self.map.set_map(None)
            return
        crop, values = maps
        self.map.set_image(crop)
        self.map.set_map(values[min(self.model.picked, len(values) - 1)])


PAGE = RegisterNeuronsPage
