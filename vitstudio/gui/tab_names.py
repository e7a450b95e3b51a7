"""The main window's tabs, in order: (the window's attribute for the panel, its title). Qt-free, so the command
line (`main.py --tab`) offers exactly these before Qt or torch load."""

TABS = (("predictions", "Predictions"), ("attention", "Attention"), ("embeddings", "Embeddings"),
        ("internals", "Model internals"), ("compare", "Compare"), ("folder", "Folder"), ("training", "Training"),
        ("play", "Play"), ("teach", "Teach"))
