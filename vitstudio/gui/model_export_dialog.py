"""Where a model export goes: first the format, then the dialog that fits it — a file name for ONNX, a folder for
upstream's seed format (it writes model.pth + class_indices.json into the folder chosen; a save dialog there made
a *folder* named like a file)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QInputDialog, QMessageBox

from vitstudio.gui import file_dialogs

MODEL_FORMATS = {"ONNX (*.onnx)": "onnx", "Upstream vit_model.py folder (model.pth + class_indices.json)": "seed"}
SEED_FILES = ("model.pth", "class_indices.json")


def choose_model_export(parent, name: str = "model") -> tuple[str | None, str | None]:
    """(format, path) the user chose, or (None, None) when they cancelled at any step."""
    label, ok = QInputDialog.getItem(parent, "Export model", "Format:", list(MODEL_FORMATS), 0, False)
    if not ok:
        return None, None
    fmt = MODEL_FORMATS[label]
    if fmt == "seed":
        folder = file_dialogs.choose_folder(parent, "Export model: the folder for model.pth + class_indices.json",
                                            create=True, start=file_dialogs.export_folder())
        if not folder:
            return None, None
        taken = [f for f in SEED_FILES if (Path(folder) / f).exists()]
        if taken and QMessageBox.question(
                parent, "Export model", f"{folder} already holds {' and '.join(taken)}. Replace them?",
                QMessageBox.Yes | QMessageBox.Cancel) != QMessageBox.Yes:
            return None, None
        file_dialogs.remember_export(folder)
        return fmt, folder
    path = file_dialogs.save_file(parent, "Export model", str(Path(file_dialogs.export_folder(), f"{name}.onnx")),
                                  "ONNX (*.onnx)")
    file_dialogs.remember_export(path)
    return (fmt, path) if path else (None, None)
