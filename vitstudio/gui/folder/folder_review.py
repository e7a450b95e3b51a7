"""The Folder tab's review side: the duplicate groups (leaks across train/val in red), and the icon grids and
thumbnails decoded in workers that the pages share (pages/label_review_page.py, pages/similar_images_page.py)."""

from __future__ import annotations

import os

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QIcon, QImage, QPainter, QPixmap
from PySide6.QtWidgets import QListView, QListWidget, QListWidgetItem

from vitstudio.app.thumbnails import thumbnail_job

from .. import workers
from ..common.image_strip import letterboxed

ICON = 96  # thumbnails decode at most this side (thumbnail_cache.thumbnails)
CELL = QSize(ICON + 36, ICON + 44)  # icon plus two lines of caption
ITEM = CELL - QSize(6, 6)  # a margin inside each cell
QUERY_ICON = 128  # the Similar images page's query, bigger than the grid's
DUPLICATES_HINT = ("Review labels and duplicates (the toolbar) lists here the groups of identical copies and "
                   "near-duplicates; picking one shows only its images in the table.")


class IconGridWidget(QListWidget):
    """Every item is given the cell's size as it is inserted. Qt sizes an icon-mode item from its content when
    laid out; here the thumbnails arrive later from a worker, so an item laid out first as bare text (e.g. while
    its tab was hidden) kept a text-sized box, drawn cut off or over its neighbours until the next action."""

    def rowsInserted(self, parent, start: int, end: int) -> None:  # noqa: N802 (Qt's name)
        for row in range(start, end + 1):
            self.item(row).setSizeHint(ITEM)
        super().rowsInserted(parent, start, end)


def icon_list() -> QListWidget:
    """A grid of equal cells, each item the cell's size before its icon arrives, so icons decoded later never
    make items grow over their neighbours, and a click lands on the item drawn under the pointer."""
    w = IconGridWidget()
    w.setViewMode(QListView.IconMode)
    w.setFlow(QListView.LeftToRight)
    w.setWrapping(True)
    w.setIconSize(QSize(ICON, ICON))
    w.setGridSize(CELL)
    w.setUniformItemSizes(True)
    w.setMovement(QListView.Static)  # icons are not draggable: a drag must not pile them up
    w.setResizeMode(QListView.Adjust)
    w.setWordWrap(True)
    w.setTextElideMode(Qt.ElideMiddle)
    w.setSpacing(4)
    return w


def array_pixmap(array) -> QPixmap:
    h, w, _ = array.shape
    return QPixmap.fromImage(QImage(array.tobytes(), w, h, 3 * w, QImage.Format_RGB888))


def item_path(item: QListWidgetItem) -> str:
    data = item.data(Qt.UserRole)
    return data[0] if isinstance(data, (list, tuple)) else data


def load_icons(job: workers.KeyedSlot, widget: QListWidget, paths: list[str]) -> None:
    """Thumbnails of `paths` decoded in a worker, set as the icons of the widget's items with those paths."""
    def on_thumb(found) -> None:
        path, array = found
        if array is None:
            return
        icon = QIcon(letterboxed(array_pixmap(array), ICON))  # small images (32-px digits) scaled up too
        for i in range(widget.count()):
            if item_path(widget.item(i)) == path:
                widget.item(i).setIcon(icon)

    job.start((tuple(paths), ICON), "Thumbnails", thumbnail_job, list(paths), ICON, on_yield=on_thumb)


def group_evidence(group) -> str:
    """One line per member: its path and the evidence against the group's first image."""
    if not group.members:
        return "\n".join(group.paths)
    lines = [group.members[0].path]
    for m in group.members[1:]:
        cos = "" if m.cosine is None else f", cosine {m.cosine:.5f}"
        lines.append(f"{m.path}: hash {m.hash_distance}{' (mirrored)' if m.mirrored else ''}, "
                     f"pixels {m.pixels:.4f}{cos}")
    return "\n".join(lines)


class DuplicatesTab(QListWidget):
    """Duplicate groups of an audit; picking one emits its paths (the first entry, None: all images). While it
    holds no group, what to do (or that none was found) is drawn in its empty space: it looked broken, a lone
    "(all images)" or nothing at all."""

    group_picked = Signal(object)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.hint = DUPLICATES_HINT
        self.currentRowChanged.connect(self._on_row)

    def clear(self) -> None:
        super().clear()
        self.hint = DUPLICATES_HINT

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().paintEvent(event)
        if self.count() <= 1:  # nothing, or "(all images)" alone
            painter = QPainter(self.viewport())
            painter.setPen(self.palette().placeholderText().color())
            top = self.visualItemRect(self.item(0)).bottom() + 8 if self.count() else 8
            area = self.viewport().rect().adjusted(8, top, -8, -8)
            painter.drawText(area, Qt.AlignTop | Qt.AlignLeft | Qt.TextWordWrap, self.hint)
            painter.end()

    def show_groups(self, groups, made_up_split: bool = False) -> None:
        """Each group, red where it crosses train/val ("WOULD LEAK" where the split is one the audit made up: the
        folder has no val/)."""
        self.clear()
        self.hint = "No identical copies or near-duplicates in this folder."
        self.addItem("(all images)")
        for group in groups:
            leak = ("WOULD LEAK · " if made_up_split else "LEAK · ") if group.leak else ""
            sim = "" if group.similarity is None or group.exact else f", cosine ≥ {group.similarity:.4f}"
            kinds = "identical bytes" if group.exact else " + ".join(group.kinds)
            names = ", ".join(os.path.basename(p) for p in group.paths[:4]) + ("…" if len(group.paths) > 4 else "")
            item = QListWidgetItem(f"{leak}{len(group.paths)} images ({kinds}{sim}): {names}")
            item.setData(Qt.UserRole, group.paths)
            item.setToolTip(group_evidence(group))
            if group.leak:
                item.setForeground(Qt.red)
            self.addItem(item)

    def _on_row(self, index: int) -> None:
        item = self.item(index) if index > 0 else None
        self.group_picked.emit(tuple(item.data(Qt.UserRole)) if item is not None else None)
