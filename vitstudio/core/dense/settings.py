"""The dense tasks' vocabulary and defaults, torch-free: what the command line's options and the app's fields offer
(`vitstudio --help` imports no torch)."""

from __future__ import annotations

DEFAULT_K = 30  # neighbours per patch: open-hummingbird-eval's, hbird/hbird_eval.py:102 (eval.py:407)
DEFAULT_TEMPERATURE = 0.02  # its softmax temperature (beta), hbird/hbird_eval.py:576
DEFAULT_CAP = 200_000  # patch rows: 200k × 768 float32 = 0.6 GB, about 1,000 ViT-B/16 images painted whole
CAP_METHODS = ("random", "farthest")
FACETS = ("token", "key", "query")  # Amir et al.'s facets of a block: its output tokens, its attention's keys, queries
