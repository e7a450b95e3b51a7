"""ViT Studio: predict, explain and fine-tune Vision Transformers."""

from ._version import __version__

__all__ = ["__version__", "show"]


def show(app=None, images=(), model=None, block=None):
    """Open the window on `app` (a `vitstudio.app.app.App`, or a new one) with `images` and `model`, from a script or
    a notebook (`%gui qt`); see `vitstudio.gui.show.show`. Qt is imported only here."""
    from vitstudio.gui.show import show as show_window

    return show_window(app, images, model, block)
