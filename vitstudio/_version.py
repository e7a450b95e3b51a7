"""The version, in a module of its own: the package's face (vitstudio/__init__.py) imports the window lazily, and
what the window imports must not reach back up to it."""

__version__ = "0.1.0"
