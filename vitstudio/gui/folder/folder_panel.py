"""Folder view: a whole folder through the current model. A results table (sort, filter, export CSV, sort into
folders), the folder's embedding map (box selection filters the table), similar images of the selected one
(double-click opens it in the attention explorer) and the label review of a labelled folder. All work runs in
workers over the core's folder modules (embeddings cached per model), through `workers.ViewJobs` keyed by the model
and the paths opened: another model or folder discards every pending job and clears what the previous one showed."""

from __future__ import annotations

import html

from PySide6.QtCore import QItemSelectionModel, QSize, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QProgressBar,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.folder_files import results_plan
from vitstudio.core.files import counted
from vitstudio.gui import file_dialogs

from .folder_filters import bind_filters
from .folder_fit import FolderFitWidget
from .folder_gallery import TableOrGalleryWidget
from .folder_row_selection import RowSelectionBinding
from .folder_side import FolderSideWidget
from .folder_sorting import ask_sort
from .folder_table import ResultsModel
from .folder_tags import FolderTagMenus
from .folder_toolbar import FolderToolbarWidget

TOOLBAR_WIDGETS = ("open_button", "cancel_button", "sort_button", "undo_button", "export_button", "review_button",
                   "threshold", "predicted", "min_conf", "correctness", "follow_map", "reset_button")  # filters last

class FolderPanel(QWidget):
    open_in_explorer = Signal(str)  # a path to show in the attention explorer
    opened_here = Signal(list)  # paths the user opened in this tab (its button, a drop): File → Open recent keeps them

    def __init__(self, app, parent: QWidget | None = None) -> None:
        """`app`: the App (vitstudio/app/app.py) whose Folder model, tags, labels and pages this draws."""
        super().__init__(parent)
        self.app = app
        self.state = app.state
        self.folder_model = app.folder  # the folder, its results, filters, map, review
        self.view_state, self.jobs = self.folder_model.state, self.folder_model.jobs
        self.folder_tags = app.tags  # tags and saved views of the folder (the app's records)
        self._build()
        # sorts, moves, exclusions and their undo (the app's stack)
        self.files = self.folder_model.files  # sorts and moves of files, on the app's undo stack
        self.toolbar.undo_button.clicked.connect(app.undo.undo)
        app.undo.changed.connect(self._refresh_undo_button)
        self.files.changed.connect(self._refresh_undo_button)
        self._refresh_undo_button()
        self._follow_model()
        self._build_export()

    # what the model holds, read where the panel's pages and tests look for it
    results = property(lambda self: self.folder_model.results)
    embedded = property(lambda self: self.folder_model.embedded)
    coords = property(lambda self: self.folder_model.coords)
    folder = property(lambda self: self.folder_model.folder)
    source = property(lambda self: self.folder_model.source)
    report = property(lambda self: self.folder_model.report)
    map_rows = property(lambda self: self.folder_model.map_rows)
    group_rows = property(lambda self: self.folder_model.group_rows)

    def _follow_model(self) -> None:
        fm = self.folder_model
        fm.said.connect(self._say)
        fm.busy.connect(self._busy)
        fm.progress.connect(self._on_progress)
        fm.results_changed.connect(self._show_results)
        fm.rows_changed.connect(self._show_rows)
        fm.fit_ready.connect(self.fit.show_fit)
        fm.fit_ready.connect(self.gallery.gallery_model.show_fit)  # flags on the cells too
        fm.review_ready.connect(self.gallery.gallery_model.show_review)
        fm.scores_ready.connect(self.table_model.set_scores)
        fm.review_ready.connect(self._on_review)
        fm.relocated.connect(self._on_relocated)
        fm.row_selected.connect(self._on_selected)

    def _build_export(self) -> None:
        """The toolbar's Export… menu: the selection copied or moved (the undo stack's sort), as CSVs, COCO masks, or
        the Training tab's dataset; an export job's progress and Cancel are the tab's."""
        from .folder_export import FolderExportMenu

        self.folder_export = self.app.export
        self.export_menu = FolderExportMenu(self.toolbar.export_button, self.folder_export, self._selected_rows,
                                            self.files, self.app.pages["paint"], self)
        export = self.folder_export
        export.said.connect(self.state.message.emit)
        export.busy.connect(self._busy)
        export.progress.connect(self._on_progress)
        self.folder_model.rows_changed.connect(self.export_menu.refresh)
        self.folder_model.results_changed.connect(self.export_menu.refresh)
        self.app.selection.state.events.rows.connect(self.export_menu.refresh)

    # -- construction --------------------------------------------------------------------------------
    def _build(self) -> None:
        self._build_controls()
        self._build_table()
        self._build_side()
        split = QSplitter(Qt.Horizontal)
        split.addWidget(self.browse)
        split.addWidget(self.side)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        split.setSizes([410, 590])  # the table's first four columns (confidence) in sight; the pages take the rest
        layout = QVBoxLayout(self)
        layout.addWidget(self.toolbar)
        layout.addWidget(self.info)
        layout.addWidget(self.fit)  # "don't look like what this model was trained on", folders not its classes
        layout.addWidget(self.progress)
        layout.addWidget(split, 1)
        self._connect()
        self._enable()

    def _build_controls(self) -> None:
        """The toolbar (its widgets are reached as `toolbar.<name>`), the info line and the progress bar."""
        self.toolbar = FolderToolbarWidget()
        self.info = QLabel("Open a folder to see every image through the current model.")
        self.info.setWordWrap(True)
        self.progress = QProgressBar(visible=False)
        self.fit = FolderFitWidget()

    def _build_table(self) -> None:
        self.table_model = ResultsModel(self)
        self.table = QTableView()
        self.table.setModel(self.table_model)
        self.table.horizontalHeader().setSortIndicator(1, Qt.AscendingOrder)  # by file name, as its arrow says
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.verticalHeader().setDefaultSectionSize(52)
        self.table.setIconSize(QSize(48, 48))
        self.table.horizontalHeader().setStretchLastSection(True)
        for column, width in enumerate((52, 112, 64, 76, 56, 56, 80, 128, 72, 96)):  # at 1280×720 confidence stays
            # in sight; the scores' headers whole, "representativeness" too
            self.table.setColumnWidth(column, width)
        self.browse = TableOrGalleryWidget(self.table, self.table_model)  # the same rows as a grid of thumbnails
        self.gallery = self.browse.gallery

    def _build_side(self) -> None:
        """The registered pages (folder_side.py)."""
        self.side = FolderSideWidget(self)

    def _connect(self) -> None:
        self.toolbar.open_button.clicked.connect(self._choose_folder)
        self.toolbar.cancel_button.clicked.connect(self._cancel)
        self.toolbar.sort_button.clicked.connect(self._sort_dialog)
        self.toolbar.review_button.clicked.connect(self.start_review)
        bind_filters(self.toolbar, self.browse, self.view_state)
        self.toolbar.reset_button.clicked.connect(self.reset_filters)
        self.tag_menus = FolderTagMenus(self.toolbar, self.folder_tags, self._tag_selection, self.state.message.emit,
                                        self)
        self.folder_tags.changed.connect(self._on_tags)
        self.table.selectionModel().currentRowChanged.connect(self._on_row)
        # the table's and the gallery's selected rows are the App's (app.selection.rows), both ways
        self.row_selection = RowSelectionBinding(self.app.selection, self.table, self.table_model, self.gallery, self)
        self.app.labels.changed.connect(self._show_labels)  # the table marks the rows labelled in the app
        self._show_labels()
        self.gallery.row_picked.connect(self._pick)  # one selection: the Folder model's, the table and grid follow
        self.table.doubleClicked.connect(self._explain_row)  # as the similar images and the review's
        self.gallery.doubleClicked.connect(self._explain_row)  # its rows are the table's, in the table's order
        self.info.linkActivated.connect(lambda _link: self.open_paths(list(self.view_state.paths)))  # open again

    def _enable(self) -> None:
        has = self.results is not None and len(self.results) > 0  # an empty folder leaves nothing to act on
        predicts = has and self.results.has_predictions
        bar = self.toolbar
        for w in (getattr(bar, name) for name in TOOLBAR_WIDGETS[-5:]):
            w.setEnabled(has)
        bar.sort_button.setEnabled(predicts)
        bar.sort_button.setToolTip("" if predicts or not has else "This model has no classes to sort into.")
        bar.review_button.setEnabled(has and self.folder is not None)  # a review needs class folders
        bar.review_button.setToolTip("" if self.folder else "Open a folder of class folders to review its labels")

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
        """A folder, or any drop of files and folders: every image through the model (`FolderModel.open_paths`)."""
        another = tuple(paths) != self.view_state.paths
        self.folder_model.open_paths(paths)
        if another and self.folder_model.waiting_paths is None:  # filters belong to a folder: say whose they are
            self.toolbar.show_filters_of(self.source)

    def _cancel(self) -> None:
        if self.folder_export.running():  # Cancel stops what the progress bar shows: an export, else the scan
            self.folder_export.cancel()
        else:
            self.folder_model.cancel()

    def _say(self, line: str, reopen: bool) -> None:
        if reopen:  # one click opens it again (linkActivated: `_connect`)
            line = (f'A new model: <a href="reopen">open {html.escape(self.source)} again</a> to see it through '
                    'this one.')
        self.info.setText(line)

    def _busy(self, busy: bool) -> None:
        self.progress.setVisible(busy)
        self.toolbar.cancel_button.setEnabled(busy)

    def _on_progress(self, p) -> None:
        self.progress.setRange(0, max(1, p.total))
        self.progress.setValue(p.done)
        self.progress.setFormat(f"{p.message}: %v / %m")

    def _show_results(self, results) -> None:
        """New results (another folder, model or scan) or None: nothing of the earlier ones stays on screen."""
        self.table_model.set_results(results, self.folder_model.scores)
        if results is None:
            self.fit.clear()
            self.toolbar.show_count(None)
        self._enable()

    def _on_relocated(self, results) -> None:
        """Files a move (or its undo) relocated: the same rows under their new paths, the review and scores kept."""
        self.table_model.set_results(results, self.folder_model.scores)

    def _show_rows(self, rows) -> None:
        self.table_model.set_allowed(rows)
        self.toolbar.show_count(len(rows), len(self.results))

    # -- filters, map, similar -----------------------------------------------------------------------
    def apply_filters(self) -> None:
        self.folder_model.apply_filters()

    def reset_filters(self) -> None:
        self.folder_model.reset_filters()

    def visible_rows(self) -> list[int]:
        return self.table_model.rows.tolist()

    def _on_tags(self) -> None:
        """Tags put on or taken off: the gallery's captions (the Map page follows them itself)."""
        self.gallery.gallery_model.show_tags(self.folder_tags.tags)

    def select_row(self, row: int) -> None:
        view_row = self.table_model.view_row(row)
        if view_row is None:
            return
        index = self.table_model.index(view_row, 0)
        self.table.selectionModel().setCurrentIndex(
            index, QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows)

    def _on_row(self, current, _previous) -> None:
        if current.isValid():
            self._pick(self.table_model.source_row(current.row()))

    def _pick(self, row: int) -> None:
        """A row made current in the table or the gallery: the Folder model's selection (`_on_selected` follows)."""
        if self.embedded is not None and row != self.folder_model.selected:
            self.folder_model.select(row)

    def _on_selected(self, row: int | None) -> None:
        """The folder's current image, wherever it was chosen: the table and the gallery show it."""
        if row is None or self.results is None:
            return
        current = self.table.currentIndex()
        # keeps a table's multi-selection
        if not current.isValid() or self.table_model.source_row(current.row()) != row:
            self.select_row(row)
        self.gallery.show_row(row)

    def _explain_row(self, index) -> None:
        self.open_in_explorer.emit(self.results.paths[self.table_model.source_row(index.row())])

    # -- review ------------------------------------------------------------------------------------
    def start_review(self) -> None:
        self.folder_model.start_review(self.toolbar.review_threshold(), self.app.labels.labels)

    def _on_review(self, report) -> None:
        doubtful = sum(1 for issue in report.label_issues if issue.doubtful)
        self.info.setText(f"{counted(doubtful, 'image')} the model doubts, most doubtful first; "
                          f"{counted(len(report.groups), 'duplicate group')}, {len(report.leaks)} "
                          f"{'would be ' if report.made_up_split else ''}across train/val ({report.split}). "
                          f"Double-click an image to explain it.{self.fit.unreliable_note()}")
        self._enable()

    # -- file actions: the questions are the panel's (they read its table), `self.files` carries them out -------
    def _refresh_undo_button(self) -> None:
        """Undo offered while there is something to undo and no file job runs (it waits for the job)."""
        can = self.app.undo.can_undo() and not self.files.running()
        self.toolbar.undo_button.setEnabled(can)
        self.toolbar.undo_button.setToolTip(f"Undo {self.app.undo.undo_text()} (Ctrl+Z; edited copies are kept)"
                                    if can else "Nothing to undo yet")

    def sort_plan(self, out: str, min_confidence: float, move: bool, selected_only: bool):
        rows = self._selected_rows() if selected_only else self.visible_rows()
        return results_plan(self.results, rows, out, min_confidence, move)

    def _tag_selection(self) -> list[int]:
        """What a tag goes on: the table's (and gallery's) selected rows, else what is selected on the map."""
        on_map = self.folder_model.selected_on_map()
        return self._selected_rows() or ([] if on_map is None else on_map.tolist())

    def _show_labels(self) -> None:
        self.table_model.show_labels(self.app.labels.labels)

    def _selected_rows(self) -> list[int]:
        """The rows selected in the table or the gallery (the App's selection): what "selected only" acts on."""
        return self.app.selection.rows

    def _sort_dialog(self) -> None:
        selected, min_conf = bool(self._selected_rows()), self.view_state.min_conf
        plan = ask_sort(self, [self.folder] if self.folder else [],
                        lambda out: self.sort_plan(out, min_conf, False, selected), min_conf,
                        self.fit.unreliable_note(), self.state.report)
        if plan is not None:
            self.files.run_sort(plan)

