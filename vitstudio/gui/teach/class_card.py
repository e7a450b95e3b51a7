"""One class of a Teach project as a card: its name and sample count, the newest samples as thumbnails, the live
preview's probability for it as a bar, its validation accuracy, and its actions (add files or a folder, hold to
record from the preview's source; rename or delete the class from its ⋯ button or its context menu, remove a sample
from its thumbnail's context menu)."""

from __future__ import annotations

from PIL import Image
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QMenu, QProgressBar, QPushButton, QToolButton, QVBoxLayout

from vitstudio.app.teach_state import THUMBNAILS

from ..imaging import pil_to_pixmap

THUMB = 40


class ClassCardWidget(QFrame):
    add_files = Signal(str)
    add_folder = Signal(str)
    record_pressed = Signal(str)
    record_released = Signal(str)
    add_frame = Signal(str)
    rename = Signal(str)
    delete = Signal(str)
    remove_sample = Signal(str)  # the sample's path

    def __init__(self, name: str, parent=None) -> None:
        super().__init__(parent)
        self.name = name
        self.setFrameShape(QFrame.StyledPanel)
        self.title = QLabel(f"<b>{name}</b>")
        self.count = QLabel("0 samples")
        self.accuracy = QLabel("")
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setFormat(f"{name}: %p%")
        self.bar.setMinimumWidth(120)  # beside the thumbnails, wide enough to read
        self.thumbs = [QLabel() for _ in range(THUMBNAILS)]  # made once, refilled: no widget churn per change
        self.shown: tuple = ()  # the thumbnails' sample paths, newest first
        thumbs = QHBoxLayout()
        thumbs.setSpacing(2)
        for i, label in enumerate(self.thumbs):
            label.setFixedSize(THUMB, THUMB)
            label.setAlignment(Qt.AlignCenter)
            label.setContextMenuPolicy(Qt.ActionsContextMenu)
            remove = QAction("Remove this sample", label)
            remove.triggered.connect(lambda _=False, i=i: self._remove(i))
            label.addAction(remove)
            thumbs.addWidget(label)
        self.menu = QMenu(self)  # the class's own actions: the ⋯ button and the card's context menu
        self.menu.addAction("Rename class…", lambda: self.rename.emit(self.name))
        self.menu.addAction("Delete class…", lambda: self.delete.emit(self.name))
        self.more = QToolButton(text="⋯", objectName="class_menu", popupMode=QToolButton.InstantPopup)
        self.more.setMenu(self.menu)
        self.more.setToolTip(f"Rename or delete {name}")
        self.setContextMenuPolicy(Qt.ActionsContextMenu)
        self.addActions(self.menu.actions())
        files, folder = QPushButton("Files…"), QPushButton("Folder…")
        files.setToolTip(f"Copy image files into {name}")
        folder.setToolTip(f"Copy every image of a folder into {name}")
        self.record = QPushButton("Hold to record")
        self.record.setToolTip("Frames of the preview's source join this class while the button is held")
        frame = QPushButton("Add frame", objectName="add_frame")
        frame.setToolTip("The frame on screen joins this class (correct the preview: it belongs here)")
        frame.clicked.connect(lambda: self.add_frame.emit(self.name))
        files.clicked.connect(lambda: self.add_files.emit(self.name))
        folder.clicked.connect(lambda: self.add_folder.emit(self.name))
        self.record.pressed.connect(lambda: self.record_pressed.emit(self.name))
        self.record.released.connect(lambda: self.record_released.emit(self.name))
        head = QHBoxLayout()  # three short rows: the card fits the tab's ~850 px beside the model card
        for widget in (self.title, self.more, self.count, self.accuracy):  # ⋯ by the name: in sight when the
            head.addWidget(widget)                                           # tab is narrow and the cards scroll
        head.addStretch(1)
        row = QHBoxLayout()
        row.addLayout(thumbs)
        row.addWidget(self.bar, 1)
        actions = QHBoxLayout()
        for widget in (files, folder, frame, self.record):
            actions.addWidget(widget)
        actions.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        for part in (head, row, actions):
            layout.addLayout(part)

    @staticmethod
    def minimum_width() -> int:
        """A card's minimum width (its row of actions), whatever its name: the Teach tab keeps its column as wide."""
        probe = ClassCardWidget("")
        try:
            return probe.minimumSizeHint().width()
        finally:
            probe.deleteLater()

    def show_card(self, card) -> None:
        self.count.setText(f"{card.count} sample{'s' if card.count != 1 else ''}")
        self.shown = card.thumbnails
        for i, label in enumerate(self.thumbs):
            label.clear()
            label.setToolTip(f"{card.thumbnails[i].name}: right-click to remove it" if i < len(card.thumbnails)
                             else "")
            label.setContextMenuPolicy(Qt.ActionsContextMenu if i < len(card.thumbnails) else Qt.NoContextMenu)
            if i >= len(card.thumbnails):
                continue
            try:
                with Image.open(card.thumbnails[i]) as image:
                    image.thumbnail((THUMB, THUMB))
                    label.setPixmap(pil_to_pixmap(image))
            except OSError:
                label.setText("?")

    def _remove(self, i: int) -> None:
        if i < len(self.shown):
            self.remove_sample.emit(str(self.shown[i]))

    def show_accuracy(self, accuracy: float | None, held_out: int) -> None:
        self.accuracy.setText("" if accuracy is None else f"validation {accuracy:.0%} of {held_out}")

    def show_probability(self, p: float | None) -> None:
        self.bar.setValue(0 if p is None else int(round(1000 * p)))
