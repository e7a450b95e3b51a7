"""Small steps the GUI tests share."""

from __future__ import annotations


def load_in_window(window, qtbot, spec: str, weights: str | None = None, timeout: int = 60000):
    """Load `spec` through the model bar's path (on the CPU, fp32) and return the model once it is loaded."""
    with qtbot.waitSignal(window.state.model_loaded, timeout=timeout):
        window.request_model(spec, "cpu", "fp32", weights)
    return window.state.model
