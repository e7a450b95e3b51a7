"""Above the Folder tab's results: the banner when most of the folder is unlike what the model was trained on, and
the line that says when the class folders are not the model's classes (so correct / mistake views have nothing to
compare). The review, duplicates and sort ask it for their "unreliable" line."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from vitstudio.app.model_facts import UNRELIABLE

from ..common.ood_banner import OODBannerWidget


class FolderFitWidget(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.banner = OODBannerWidget()
        self.mismatch = QLabel()
        self.mismatch.setWordWrap(True)
        self.mismatch.setStyleSheet("QLabel { color: #8a4b00; }")
        self.mismatch.setVisible(False)
        self.fit = None  # the core's FolderFit of the results on screen
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.banner)
        layout.addWidget(self.mismatch)

    def show_fit(self, fit) -> None:
        self.fit = fit
        self.banner.show_share(fit.flagged, fit.total, fit.description)
        text = fit.mismatch()
        if fit.none_known:
            text += " Correct / mistake filters and colours need folders named after the model's classes."
        self.mismatch.setText(text or "")
        self.mismatch.setVisible(bool(text))

    def clear(self) -> None:
        self.fit = None
        self.banner.clear_share()
        self.mismatch.clear()
        self.mismatch.setVisible(False)

    def mismatch_text(self) -> str:
        return self.mismatch.text() if self.fit is not None else ""

    def unreliable_note(self) -> str:
        """A line for results built on the model's features (review, duplicates, sort), or '' when it fits."""
        return f" ⚠ {UNRELIABLE}" if self.banner.raised else ""
