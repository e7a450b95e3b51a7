"""The banner that says the model does not fit the images: shown on the Predictions and Folder tabs when most of
the images there are out of distribution for the model (core/models/ood.py), hidden otherwise. Its sentence is the
core's (core/models/fit_words.py), which the folder commands print too."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

from vitstudio.app.model_facts import most_flagged, unlike_sentence

STYLE = "QLabel { background: #fff3cd; color: #5c4400; border: 1px solid #e0b84c; border-radius: 3px; padding: 6px; }"


def banner_text(flagged: int, total: int, description: str) -> str:
    """The core's sentence (the folder commands print it too) and what to do about it in the window."""
    return (f"{unlike_sentence(flagged, total, description)} Load a model trained on images like these, or "
            f"fine-tune one on them in the Training tab.")


class OODBannerWidget(QLabel):
    """Hidden unless most images are flagged; `show_share` is called whenever the images or the model change."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setStyleSheet(STYLE)
        self.setVisible(False)
        self.flagged = 0
        self.total = 0

    def show_share(self, flagged: int, total: int, description: str = "") -> None:
        """`flagged` of `total` images (those with a calibrated score) are unlike the model's training data."""
        self.flagged, self.total = flagged, total
        if most_flagged(flagged, total):
            self.setText(banner_text(flagged, total, description))
            self.setVisible(True)
        else:
            self.clear_share()

    def clear_share(self) -> None:
        self.flagged = self.total = 0
        self.setText("")
        self.setVisible(False)

    @property
    def raised(self) -> bool:
        """Whether the banner is up (whether or not its tab is on screen)."""
        return most_flagged(self.flagged, self.total)
