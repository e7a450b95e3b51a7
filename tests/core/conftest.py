"""Fixtures of the folder tests (test_folder.py, test_folder_review.py): the demo model and 300 digit scans, made once
per module that asks for them (a module's own `demo` or `digits` wins over these)."""

from __future__ import annotations

import pytest

from vitstudio.core.models.demo import bundled_demo, render_digits
from vitstudio.core.models.loading import load_model


@pytest.fixture(scope="module")
def demo():
    return load_model(str(bundled_demo()))


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """30 scans per digit: a labelled folder the demo model knows."""
    return render_digits(tmp_path_factory.mktemp("digits") / "data", per_class=30)
