"""Folder view: a whole folder through the current model. A results table (sort, filter, export CSV, sort into
folders), the folder's embedding map (box selection filters the table), similar images of the selected one
(double-click opens it in the attention explorer) and the label review of a labelled folder. All work runs in
workers over the core's folder modules (embeddings cached per model), through `workers.ViewJobs` keyed by the model
and the paths opened: another model or folder discards every pending job and clears what the previous one showed."""

from __future__ import annotations

import html
import os
from dataclasses import replace

import numpy as np
from PySide6.QtCore import QItemSelectionModel, QSize, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QListWidgetItem,
    QProgressBar,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.folder_states import FILTER_DEFAULTS, FolderState, offered_classes
from vitstudio.core.files import counted
from vitstudio.core.folder.embedcache import model_fingerprint
from vitstudio.core.folder.results import FolderResults
from vitstudio.gui import file_dialogs

from .. import workers
from .file_operations import FileOperations
from .folder_filters import bind_filters
from .folder_fit import FolderFitWidget
from .folder_jobs import KEYS, fit_job, map_job, review_job, scan_job, similar_job
from .folder_map import colour_groups, describe_image
from .folder_review import item_path, load_icons
from .folder_side import FolderSideWidget
from .folder_sorting import ask_export_csv, ask_move, ask_sort, results_plan
from .folder_table import ResultsModel
from .folder_toolbar import FolderToolbarWidget

NO_CLASSES = (" This model has no classes (features only): no predictions, confidence or sorting; the map, similar "
              "images, duplicates and label review use its features. Give it classes (the Classes box of a "
              "CLIP-style model) or fine-tune a head.")
TOOLBAR_WIDGETS = ("open_button", "cancel_button", "sort_button", "undo_button", "csv_button", "review_button",
                   "threshold", "predicted", "min_conf", "correctness", "follow_map", "reset_button")  # filters last
EMPTY_FOLDER = ("No images in {source}: open a folder holding .jpg, .png, .bmp, .webp or .tif images (subfolders "
                "are searched too), e.g. one folder per class.")

class FolderPanel(QWidget):
    open_in_explorer = Signal(str)  # a path to show in the attention explorer
    opened_here = Signal(list)  # paths the user opened in this tab (its button, a drop): File → Open recent keeps them
    retrain = Signal(str, list)  # dataset folder, files to leave out: start a run with the review's fixes

    def __init__(self, state, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.folder: str | None = None  # the folder opened (label review and retraining need one)
        self.source = ""  # what the table shows, in words
        self.embedded = None
        self.results: FolderResults | None = None
        self.coords: np.ndarray | None = None
        self.map_rows: np.ndarray | None = None  # the map's box selection, when the table follows it
        self.group_rows: np.ndarray | None = None  # a duplicate group picked in the Duplicates tab
        self.report = None  # the label review's AuditReport
        self.waiting_paths: list[str] | None = None  # opened before any model was loaded
        self.view_state = FolderState()
        self.jobs = workers.ViewJobs(self.view_state, KEYS, long=("scan", "map", "review", "fit"))
        self._thumbs = workers.KeyedSlot(workers.LONG)
        self._build()
        self.files = FileOperations(self.review_tab, self.undo_button, self.dataset_shown, self)  # sorts, moves,
        self.files.said.connect(state.message.emit)  # exclusions and their undo stack
        self.files.relocated.connect(self.follow_moves)
        self.files.failed.connect(self._on_failed)
        self.undo_button.clicked.connect(self.files.undo_last)
        self.view_state.connect(self._on_view_state)
        state.model_loaded.connect(self._on_model)

    # -- construction --------------------------------------------------------------------------------
    def _build(self) -> None:
        self._build_controls()
        self._build_table()
        self._build_side()
        split = QSplitter(Qt.Horizontal)
        split.addWidget(self.table)
        split.addWidget(self.side)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        split.setSizes([520, 480])  # the table's six columns visible at once
        layout = QVBoxLayout(self)
        layout.addWidget(self.toolbar)
        layout.addWidget(self.info)
        layout.addWidget(self.fit)  # "don't look like what this model was trained on", folders not its classes
        layout.addWidget(self.progress)
        layout.addWidget(split, 1)
        self._connect()
        self._enable()

    def _build_controls(self) -> None:
        """The toolbar (its widgets are the panel's, for callers and tests), the info line and the progress bar."""
        self.toolbar = FolderToolbarWidget()
        for name in TOOLBAR_WIDGETS:
            setattr(self, name, getattr(self.toolbar, name))
        self.info = QLabel("Open a folder to see every image through the current model.")
        self.info.setWordWrap(True)
        self.progress = QProgressBar(visible=False)
        self.fit = FolderFitWidget()

    def _build_table(self) -> None:
        self.model = ResultsModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.horizontalHeader().setSortIndicator(1, Qt.AscendingOrder)  # by file name, as its arrow says
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.verticalHeader().setDefaultSectionSize(52)
        self.table.setIconSize(QSize(48, 48))
        self.table.horizontalHeader().setStretchLastSection(True)
        for column, width in enumerate((52, 112, 64, 76, 56, 56)):  # at 1280×720 confidence stays in sight
            self.table.setColumnWidth(column, width)

    def _build_side(self) -> None:
        """Map (colour choice, hover preview), similar images, label review, duplicates, labels, layers, concepts,
        then the registered pages (folder_side.py)."""
        self.side = FolderSideWidget(self)
        side = self.side
        self.map_tab, self.similar_tab, self.review_tab, self.duplicates = (side.map_tab, side.similar_tab,
                                                                            side.review_tab, side.duplicates)
        self.labels_tab, self.layers_tab, self.concepts_tab = side.labels_tab, side.layers_tab, side.concepts_tab
        self.map, self.colour_by = self.map_tab.map, self.map_tab.colour_by
        self.hover, self.hover_image = self.map_tab.hover, self.map_tab.hover_image
        self.similar, self.review = self.similar_tab.list, self.review_tab.list

    def _connect(self) -> None:
        self.open_button.clicked.connect(self._choose_folder)
        self.cancel_button.clicked.connect(self._cancel)
        self.sort_button.clicked.connect(self._sort_dialog)
        self.csv_button.clicked.connect(self._export_csv)
        self.review_button.clicked.connect(self.start_review)
        bind_filters(self.toolbar, self.colour_by, self.view_state)
        self.reset_button.clicked.connect(self.reset_filters)
        self.map.selection_changed.connect(self._on_map_selection)
        self.map.hovered.connect(lambda row: self.map_tab.show_pointed(self.results, row))
        self.table.selectionModel().currentRowChanged.connect(self._on_row)
        self.table.doubleClicked.connect(self._explain_row)  # as the similar images and the review's
        self.similar.itemDoubleClicked.connect(lambda item: self.open_in_explorer.emit(item_path(item)))
        self.info.linkActivated.connect(lambda _link: self.open_paths(list(self.view_state.paths)))  # open again
        self.review_tab.open_in_explorer.connect(self.open_in_explorer)
        self.review_tab.relabel_requested.connect(self._relabel)
        self.review_tab.retrain_requested.connect(lambda excluded: self.retrain.emit(self.folder, excluded))
        self.duplicates.group_picked.connect(self._on_group)

    def _enable(self) -> None:
        has = self.results is not None and len(self.results) > 0  # an empty folder leaves nothing to act on
        predicts = has and self.results.has_predictions
        for w in (self.csv_button, *(getattr(self, name) for name in TOOLBAR_WIDGETS[-5:])):
            w.setEnabled(has)
        self.sort_button.setEnabled(predicts)
        self.sort_button.setToolTip("" if predicts or not has else "This model has no classes to sort into.")
        self.review_button.setEnabled(has and self.folder is not None)  # a review needs class folders
        self.review_button.setToolTip("" if self.folder else "Open a folder of class folders to review its labels")
        self.review_tab.refresh_buttons(has and self.folder is not None)

    # -- scanning ------------------------------------------------------------------------------------
    def _choose_folder(self) -> None:
        folder = file_dialogs.choose_folder(self, "Folder of images (subfolders are searched too)")
        if folder:
            self.open_folder(folder)
            self.opened_here.emit([folder])

    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            self.open_paths(paths)
            self.opened_here.emit(paths)
            event.acceptProposedAction()

    def open_folder(self, folder: str) -> None:
        self.open_paths([folder])

    def open_paths(self, paths: list[str]) -> None:
        """A folder, or any drop of files and folders: every image through the model (labels: `folder_results`)."""
        model = self.state.model
        if model is None:  # kept: the first model loaded opens it (File → Open folder before any model)
            self.waiting_paths = list(paths)
            self.info.setText(f"Load a model (the bar above) and {', '.join(paths)} opens here.")
            return
        self.waiting_paths = None
        self.folder = paths[0] if len(paths) == 1 and os.path.isdir(paths[0]) else None
        roots = [p if os.path.isdir(p) else os.path.dirname(p) for p in paths]
        self.source = self.folder or f"{len(paths)} dropped items"
        if tuple(paths) != self.view_state.paths:  # filters belong to a folder: another one starts unfiltered
            self.toolbar.show_filters_of(self.source)
            self.view_state.update(**FILTER_DEFAULTS)
        self.info.setText(f"Embedding {self.source} with {model.display_name}…")
        self.view_state.update(model=model.uid, paths=tuple(paths))
        self.progress.setVisible(True)
        self.cancel_button.setEnabled(True)
        self.jobs.start("scan", "Folder embeddings", scan_job, model, list(paths), roots,
                        on_yield=self._on_progress, on_result=self._on_embedded, on_error=self._on_failed)

    def _cancel(self) -> None:
        self.jobs.discard("scan")
        self.progress.setVisible(False)
        self.cancel_button.setEnabled(False)
        self.info.setText("Cancelled; what was computed is cached and will not be computed again.")

    def _on_progress(self, p) -> None:
        self.progress.setRange(0, max(1, p.total))
        self.progress.setValue(p.done)
        self.progress.setFormat(f"{p.message}: %v / %m")

    def _on_failed(self, exc) -> None:
        self.progress.setVisible(False)
        self.cancel_button.setEnabled(False)
        self.info.setText(f"Failed: {workers.describe(exc)}")  # replaces "Embedding…" / "Reviewing labels…"
        self.state.report(exc)

    def _on_embedded(self, done: tuple) -> None:
        embedded, results = done
        self.progress.setVisible(False)
        self.cancel_button.setEnabled(False)
        self.embedded = embedded
        self.results = results
        self.model.set_results(self.results)
        self.side.show_results(results)
        classes = sorted(set(self.results.predicted_labels().tolist()) - {""})
        with self.view_state.batch():  # a class these results don't have goes back to all classes
            self.view_state.redeclare("predicted", **offered_classes(classes))
            if not results.has_predictions:  # the map colours by given label: the combo says so
                self.view_state.colour_by = "given label"
        self.map_rows = self.group_rows = None
        self.duplicates.clear()
        self.apply_filters()
        for path, reason in embedded.errors:
            self.state.message.emit("warning", f"{path}: {reason}")
        self.review_tab.clear()
        self.labels_tab.open_for(self.folder)
        self.files.restore_exclusions()
        self._enable()
        if not len(results):
            self.info.setText(EMPTY_FOLDER.format(source=self.source))
            return
        self.info.setText(f"{len(self.results)} images of {self.source} ({embedded.computed} computed now, "
                          f"{len(self.results) - embedded.computed} from the cache, {len(embedded.errors)} "
                          f"unreadable). Select a row for similar images." + ("" if results.has_predictions else
                                                                              NO_CLASSES))
        self.jobs.start("map", "Folder map", map_job, embedded, on_result=self._on_map, on_error=self._on_failed)
        if results.has_predictions:  # a headless model predicts nothing whose fit could be judged
            self.jobs.start("fit", "Model fit", fit_job, self.state.model, embedded, results,
                            on_result=self.fit.show_fit, on_error=self._on_failed)

    def _on_model(self, model) -> None:
        shown = self.embedded.tower if self.embedded is not None else ""
        embedding = self.embedded is None and self.cancel_button.isEnabled()  # a folder half through the old model
        self.view_state.update(model=model.uid)  # discards every pending job of the previous model
        if self.waiting_paths:
            self.open_paths(self.waiting_paths)
        elif self.view_state.paths and (embedding or shown and shown == model_fingerprint(model)):
            # a folder being embedded goes on through the new model (the switch dropped it); the same image tower (a
            # quick run of the model shown, a CLIP model given other classes): cached features, open again at once
            self.open_paths(list(self.view_state.paths))
        elif self.source:
            self.info.setText(f'A new model: <a href="reopen">open {html.escape(self.source)} again</a> to see it '
                              'through this one.')  # one click (linkActivated: `_connect`)

    def _on_view_state(self, name: str, _value) -> None:
        if name in ("model", "paths"):
            self._forget_results()
        elif name in FILTER_DEFAULTS:
            self.apply_filters()
        elif name == "colour_by":
            self._recolour()

    def _forget_results(self) -> None:
        """Nothing computed for the previous model or paths stays on screen (or in an export)."""
        self.results = self.embedded = self.coords = self.report = None
        self.map_rows = self.group_rows = None
        self.model.set_results(None)
        self.side.show_results(None)
        self.similar_tab.clear()
        self.review.clear()
        self.labels_tab.open_for(None)
        self.duplicates.clear()
        self.map_tab.clear()
        self.fit.clear()
        self.progress.setVisible(False)
        self.cancel_button.setEnabled(False)
        self.toolbar.show_count(None)
        self._enable()

    # -- filters, map, similar -----------------------------------------------------------------------
    def apply_filters(self) -> None:
        if self.results is None:
            return
        vs = self.view_state
        rows = self.results.select(vs.predicted, vs.min_conf, correct=vs.correct)
        box = None if not vs.follow_map else self.map_rows if self.map_rows is not None or self.coords is None \
            else self.map.inside_box()  # the box as drawn, before any drag too (a restart kept it checked)
        if box is not None:
            rows = np.intersect1d(rows, box)
        if self.group_rows is not None:
            rows = np.intersect1d(rows, self.group_rows)
        self.model.set_allowed(rows)
        self.toolbar.show_count(len(rows), len(self.results))

    def reset_filters(self) -> None:
        self.map_rows = self.group_rows = None
        if not self.view_state.update(**FILTER_DEFAULTS):
            self.apply_filters()  # nothing was set, but the map box is gone

    def visible_rows(self) -> list[int]:
        return self.model.rows.tolist()

    def _on_map(self, projected) -> None:
        coords, method = projected
        self.coords = coords
        results, by = self.results, self._colour_key()
        self.map.describe = lambda row: describe_image(results, row)
        self.map.set_points(coords, colour_groups(results, by), method, scale=by == "confidence")
        if self.view_state.follow_map:
            self.apply_filters()

    def _recolour(self) -> None:
        if self.results is not None and self.coords is not None:
            by = self._colour_key()
            self.map.set_groups(colour_groups(self.results, by), scale=by == "confidence")

    def _colour_key(self) -> str:
        """The map's colouring; by given label when the model predicts nothing (a headless model)."""
        by = self.view_state.colour_by
        return by if self.results is None or self.results.has_predictions else "given label"

    def _on_map_selection(self, rows) -> None:
        self.map_rows = rows
        if not self.view_state.follow_map:
            self.view_state.follow_map = True  # the box is a filter: it is what the user is doing
        else:
            self.apply_filters()

    def select_row(self, row: int) -> None:
        view_row = self.model.view_row(row)
        if view_row is None:
            return
        index = self.model.index(view_row, 0)
        self.table.selectionModel().setCurrentIndex(
            index, QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows)

    def _on_row(self, current, _previous) -> None:
        if self.embedded is None or not current.isValid():
            return
        row = self.model.source_row(current.row())
        self.similar_tab.show_query(self.results.paths[row], describe_image(self.results, row).split("\n", 1)[1])
        self.jobs.start("similar", "Similar images", similar_job, self.embedded, row, on_result=self._on_similar,
                        on_error=self._on_failed)

    def _explain_row(self, index) -> None:
        self.open_in_explorer.emit(self.results.paths[self.model.source_row(index.row())])

    def _on_similar(self, found) -> None:
        self.similar.clear()
        for path, sim in found:
            item = QListWidgetItem(f"{sim:.3f}\n{os.path.basename(path)}")
            item.setData(Qt.UserRole, path)
            item.setToolTip(f"{path}\ncosine similarity {sim:.4f}; double-click to explain it")
            self.similar.addItem(item)
        load_icons(self._thumbs, self.similar, [p for p, _ in found])

    # -- review ------------------------------------------------------------------------------------
    def start_review(self) -> None:
        model, folder, threshold = self.state.model, self.folder, self.toolbar.review_threshold()
        if model is None or folder is None:
            return
        self.info.setText("Reviewing labels and duplicates…")
        self.jobs.start("review", "Label review", review_job, folder, model, threshold, dict(self.labels_tab.labels),
                        on_yield=self._on_progress, on_result=self._on_review, on_error=self._on_failed)

    def _on_review(self, report) -> None:
        self.report = report
        doubtful = self.review_tab.show_issues(report.label_issues)
        self.files.hide_excluded_from_review()
        self.side.setCurrentIndex(2)
        self.info.setText(f"{counted(len(doubtful), 'image')} the model doubts, most doubtful first; "
                          f"{len(report.groups)} duplicate groups, {len(report.leaks)} across train/val "
                          f"({report.split}). Double-click an image to explain it.{self.fit.unreliable_note()}")
        self.duplicates.show_groups(report.groups)
        if report.leaks:
            self.state.message.emit("warning", f"{len(report.leaks)} duplicate groups straddle train/val "
                                    f"({report.split}): see the Duplicates tab, or `vitstudio audit --json`.")
        for note in report.notes:
            self.state.message.emit("info", note)
        self._enable()

    def _on_group(self, paths) -> None:
        """Picking a group shows just its images in the table (the first entry shows all again)."""
        paths = set(paths) if paths is not None else None
        self.group_rows = None if paths is None else np.asarray(
            [i for i, p in enumerate(self.results.paths) if p in paths], int)
        self.apply_filters()

    # -- file actions: the questions are the panel's (they read its table), `self.files` carries them out -------
    def dataset_shown(self) -> tuple[str | None, bool]:  # the folder, and whether its results are shown
        return self.folder, self.results is not None

    def sort_plan(self, out: str, min_confidence: float, move: bool, selected_only: bool):
        rows = self._selected_rows() if selected_only else self.visible_rows()
        return results_plan(self.results, rows, out, min_confidence, move)

    def _selected_rows(self) -> list[int]:
        return sorted({self.model.source_row(i.row()) for i in self.table.selectionModel().selectedRows()})

    def _sort_dialog(self) -> None:
        selected, min_conf = bool(self._selected_rows()), self.view_state.min_conf
        plan = ask_sort(self, [self.folder] if self.folder else [],
                        lambda out: self.sort_plan(out, min_conf, False, selected), min_conf,
                        self.fit.unreliable_note(), self.state.report)
        if plan is not None:
            self.files.run_sort(plan)

    def _relabel(self, path: str, suggested: str) -> None:
        if self.labels_tab.relabel_reviewed(path, suggested):  # its label was the Labels tab's: changed there
            return
        plan = ask_move(self, path, suggested)
        if plan is not None:
            self.files.move_reviewed(plan, path, suggested)

    def _export_csv(self) -> None:
        said = ask_export_csv(self, self.results, self.visible_rows())
        if said:
            self.state.message.emit("info", said)

    def follow_moves(self, moves: dict[str, str]) -> None:
        """The table and the similar-images search follow files a move (or its undo) relocated."""
        if self.results is not None:
            self.results = self.results.relocated(moves)
            self.embedded = replace(self.embedded, paths=self.results.paths)  # same rows, same order
            self.model.set_results(self.results)
            self.side.show_results(self.results)
            self.apply_filters()

