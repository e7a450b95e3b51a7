"""Choose and load a model (searchable catalog, device, precision) and show its model card.

The device and precision live in `AppState.view`; the combos write into it and mirror it."""

from __future__ import annotations

from PySide6.QtCore import QStringListModel, Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QCompleter,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.app_state import AppState
from vitstudio.app.model_files import DEMO_TITLE, bundled_demo

from .bind import bind
from .classes_box import ClassesWidget
from .type_map import control_for


class ModelPanel(QWidget):
    def __init__(self, state: AppState, parent: QWidget | None = None, catalog: bool = True) -> None:
        """`catalog` False: the bundled demo only, until `fill_catalog()` (listing the catalog imports timm; the
        window is built before it has loaded)."""
        super().__init__(parent)
        self.state = state
        self.name = QComboBox(editable=True)
        self.name.setInsertPolicy(QComboBox.NoInsert)
        self.name.setMinimumContentsLength(40)
        self.name.lineEdit().setPlaceholderText("timm name, hf-hub:…, folder or file under models/")
        demo = bundled_demo()
        if demo is not None:
            self.name.addItem(f"★ {DEMO_TITLE}", str(demo))
        self.name.setCurrentIndex(-1)  # nothing chosen until the user (or the saved settings) picks a model
        self.names = QStringListModel(self.catalog_names(), self)  # the completer's list; the panel keeps it
        completer = QCompleter(self.names, self)
        completer.setFilterMode(Qt.MatchContains)
        completer.setCaseSensitivity(Qt.CaseInsensitive)
        self.name.setCompleter(completer)
        self.name.setToolTip("● weights available offline   ○ downloadable from the hub   · no weights")
        view = state.view
        self.device, self.precision = (control_for(view.fields()[name]) for name in ("device", "precision"))
        bind(self.device, view, "device")
        bind(self.precision, view, "precision")
        view.events.spec.connect(self._on_spec)
        self.precision.setToolTip("auto: bf16 autocast on GPUs that support it, fp32 elsewhere")
        self.load_button = QPushButton("Load")
        self.load_button.clicked.connect(self._on_load_clicked)
        self.name.lineEdit().returnPressed.connect(self._on_return)  # a name typed (listed or not)
        self.name.activated.connect(self._on_picked)  # an action: a model chosen from the list loads
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.progress.setMaximumWidth(180)
        row = QHBoxLayout()
        row.addWidget(QLabel("Model"))
        row.addWidget(self.name, 1)
        row.addWidget(QLabel("Device"))
        row.addWidget(self.device)
        row.addWidget(QLabel("Precision"))
        row.addWidget(self.precision)
        row.addWidget(self.load_button)
        row.addWidget(self.progress)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 0)
        layout.addLayout(row)
        self.classes = ClassesWidget(state)  # shown for CLIP-style models: classes typed as words
        layout.addWidget(self.classes)
        state.model_loading.connect(self._on_model_loading)
        state.model_loaded.connect(self._on_model_loaded)
        state.model_failed.connect(self._on_model_failed)
        if catalog:
            self.fill_catalog()

    def fill_catalog(self) -> None:
        """timm's architectures after the demo, each marked with where its weights are; what was typed stays."""
        from vitstudio.app.model_files import list_catalog

        typed = self.name.currentText()
        listed = set(self.catalog_names())  # the bundled demo, listed first by its title
        # nothing follows the box's own value signals (a pick is `activated`, a load is asked through the state)
        for entry in list_catalog():
            if entry.name in listed:
                continue
            mark = "●" if entry.local else ("○" if entry.tag else "·")
            self.name.addItem(f"{mark} {entry.name}", entry.name)
        self._keep_typed(typed)
        self.names.setStringList(self.catalog_names())

    def _keep_typed(self, typed: str) -> None:
        """What was in the box stays there: its entry when listed, else the text as typed."""
        self.name.setCurrentIndex(self.name.findText(typed) if typed else -1)
        if typed and self.name.currentIndex() < 0:
            self.name.setEditText(typed)

    def catalog_names(self) -> list[str]:
        return [self.name.itemData(i) for i in range(self.name.count())]

    def list_new_local_models(self) -> list[str]:
        """Models saved under models/ since the catalog was listed (a run trained in this session), each listed ●
        after the demo, newest first; their specs: a run trained now is listed at once, not after a restart."""
        from vitstudio.app.model_files import local_models, models_dir

        listed = set(self.catalog_names())
        new = [e.name for e in local_models(models_dir()) if e.name not in listed]
        first = 1 if self.name.count() and self.name.itemText(0).startswith("★ ") else 0
        typed = self.name.currentText()
        for spec in new:
            self.name.insertItem(first, f"● {spec}", spec)
        self._keep_typed(typed)
        self.names.setStringList(self.catalog_names())
        return new

    def catalog_marks(self) -> dict[str, str]:
        """spec → its mark (★ ● ○ ·), for the other lists of these models (model_marks)."""
        return {self.name.itemData(i): self.name.itemText(i)[:1] for i in range(self.name.count())}

    def spec(self) -> str:
        text = self.name.currentText().strip()
        index = self.name.findText(text)
        if index >= 0:  # a listed entry: its spec (the bundled demo is listed by its title)
            return self.name.itemData(index)
        return text[2:] if text[:2] in ("● ", "○ ", "· ", "★ ") else text

    def set_spec(self, spec: str) -> None:
        index = self.name.findData(spec)
        if index >= 0:
            self.name.setCurrentIndex(index)
        else:
            self.name.setEditText(spec)

    def _on_spec(self, spec: str) -> None:
        if spec != self.spec():
            self.set_spec(spec)

    def _on_load_clicked(self) -> None:
        if self.spec():
            self.state.request_model(self.spec())

    def _on_picked(self, index: int) -> None:
        """A model chosen from the list loads at once: the bar never names a model that is not the one loaded or
        loading."""
        self._ask(self.name.itemData(index))

    def _on_return(self) -> None:
        self._ask(self.spec())

    def _ask(self, spec: str | None) -> None:
        """Load `spec` unless it is the model loading or loaded (Return with the completer's list open arrives
        twice, and picking the model shown changes nothing); the Load button always loads again."""
        if spec and spec not in (self.state.loading, self.state.loaded_spec):
            self.state.request_model(spec)

    def set_download_progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, 1000 if total else 0)
        if total:
            self.progress.setValue(round(1000 * done / total))

    def _on_model_loading(self, spec: str) -> None:
        self.load_button.setEnabled(False)
        self.progress.setRange(0, 0)  # busy until a download reports sizes
        self.progress.setVisible(True)

    def _on_model_loaded(self, loaded) -> None:
        self.load_button.setEnabled(True)
        self.progress.setVisible(False)

    def _on_model_failed(self, notice) -> None:
        self.load_button.setEnabled(True)
        self.progress.setVisible(False)
        # the rejected name does not stay in the box: it shows the model still loaded (or nothing)
        kept = self.state.model.name if self.state.model is not None else ""
        self.state.view.update(spec=kept)
        self.set_spec(kept)


class ModelCardView(QWidget):
    """The model card as a two-column form. Its rows are kept from card to card and only their texts change: a
    model switch used to rebuild every label (a selectable QLabel costs ~1 ms to make), on the GUI thread, inside
    the load's delivery."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.form = QFormLayout(self)
        self.rows: list[tuple[QLabel, QLabel]] = []  # (name, value) of each line of the card shown
        self.show_card(None)

    def show_card(self, card) -> None:
        lines = card.lines() if card is not None else []
        if card is None or self.form.rowCount() != len(self.rows):  # "No model loaded." is a row of its own
            while self.form.rowCount():
                self.form.removeRow(0)
            self.rows = []
        if card is None:
            self.form.addRow(QLabel("No model loaded."))
            return
        while len(self.rows) > len(lines):
            self.form.removeRow(len(self.rows) - 1)
            self.rows.pop()
        while len(self.rows) < len(lines):
            value = QLabel()
            value.setWordWrap(True)
            value.setTextInteractionFlags(Qt.TextSelectableByMouse)
            self.rows.append((QLabel(), value))
            self.form.addRow(*self.rows[-1])
        for (name_label, value_label), (key, value) in zip(self.rows, lines):
            name_label.setText(f"{key}:")
            value_label.setText(value.replace("/", "/\u200b"))  # long paths may wrap after a slash
        # Rebuilt on a card already on screen, the form kept row heights from before the new labels were laid
        # out: a value wrapping to more lines than before lost its last line (35 px for 56). Measured again
        # once the event loop has shown them, every row fits its text.
        QTimer.singleShot(0, self.form, self.form.invalidate)
