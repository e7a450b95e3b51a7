"""The app's model: the state and behaviour of every part of ViT Studio, with no Qt (as napari's `components/` beside
its `_qt/`). A script or a test drives it without a QApplication; the GUI is a thin view of it, and asks nothing of
a widget that a field here holds. It imports the core, never the GUI or the command line."""
