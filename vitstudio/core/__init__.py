"""Qt-free core of ViT Studio: models, images, inference and analyses.

Nothing in this package may import PySide6, pyqtgraph or vitstudio.gui; a test enforces it.
"""
