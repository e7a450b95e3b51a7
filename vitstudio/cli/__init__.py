"""The `vitstudio` command line (`vitstudio ...`, `python -m vitstudio ...`): one module per command group, each
registering its own parser (see app.py); `common` holds what they share."""

from .app import build_parser, main

__all__ = ["build_parser", "main"]
