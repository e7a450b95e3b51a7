"""The tests describe themselves: every test has a docstring, and tests/INDEX.md, generated from them, is current."""

from __future__ import annotations

import difflib
import time

import pytest

from tests import index


def test_every_test_says_what_it_checks_and_the_index_is_current():
    """Every test function of tests/app, tests/core and tests/gui (and tests/ itself) has a docstring, read with `ast`
    (nothing imported); tests/INDEX.md equals what `python -m tests.index` writes from them now; the number of tests
    it lists is not below the floor it records (a test removed or merged lowers it on purpose). ~0.6 s of CPU.
    """
    start = time.process_time()  # CPU time: the wall clock of a loaded machine says little
    modules = index.read_all()
    assert len(modules) > 100 and index.count(modules) > 700  # the walk found the suite
    missing = index.undocumented(modules)
    assert not missing, (
        f"{len(missing)} tests without a docstring (say what property it checks, against what, and its cost tags):\n  "
        + "\n  ".join(missing)
    )
    text = index.INDEX.read_text(encoding="utf-8")
    found = index.recorded(text)
    assert found, f"{index.INDEX} records no count and floor: run `{index.REGENERATE}`"
    n, floor = index.count(modules), found[1]
    assert n >= floor, (
        f"{n} tests, below the floor {floor} recorded in tests/INDEX.md: a test removed or merged names where its "
        f"property is now checked, and the floor is lowered with `{index.REGENERATE} --floor {n}`"
    )
    expected = index.render(modules, max(floor, n))
    if text != expected:
        diff = difflib.unified_diff(text.splitlines(), expected.splitlines(), "INDEX.md", "now", n=0, lineterm="")
        pytest.fail(f"tests/INDEX.md is out of date: run `{index.REGENERATE}`\n" + "\n".join(list(diff)[:12]))
    assert time.process_time() - start < 1.5  # ~0.6 s: 144 modules parsed, none imported


def test_the_index_lists_each_test_once_with_its_tags_and_keeps_its_floor(tmp_path, monkeypatch):
    """On a made-up tests folder: a module's tests (module level and in a class) are listed in source order, each with
    its docstring's first paragraph and the cost tags of later paragraphs; a test without a docstring is named
    `path::name`; the generator raises the floor to a larger count, refuses a count below the floor, and writes the
    lower floor only when given `--floor`.
    """
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "test_a.py").write_text(
        '"""Module A.\n\nMore."""\n\n'
        'def test_one():\n    """First   line\n    wrapped.\n\n    Details. [subprocess]\n    """\n\n'
        "class TestB:\n    def test_two(self):\n        pass\n\n"
        "def helper():\n    pass\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(index, "TESTS", tmp_path)
    monkeypatch.setattr(index, "ROOT", tmp_path.parent)
    monkeypatch.setattr(index, "INDEX", tmp_path / "INDEX.md")
    modules = index.read_all()
    assert index.undocumented(modules) == [f"{tmp_path.name}/core/test_a.py::test_two"]
    text = index.render(modules, floor=2)
    assert f"## {tmp_path.name}/core/test_a.py\nModule A.\n- `test_one` — First line wrapped. [subprocess]\n" in text
    assert "- `test_two` — (no docstring)\n" in text
    assert index.recorded(text) == (2, 2)

    assert index.main([]) == 1  # written, but a test lacks a docstring
    assert index.recorded(index.INDEX.read_text()) == (2, 2)
    (tmp_path / "core" / "test_c.py").write_text('def test_three():\n    """Three."""\n', encoding="utf-8")
    index.main([])
    assert index.recorded(index.INDEX.read_text()) == (3, 3)  # the floor follows the count up
    (tmp_path / "core" / "test_c.py").unlink()
    assert index.main([]) == 1 and index.recorded(index.INDEX.read_text()) == (3, 3)  # refused, left as it was
    index.main(["--floor", "2"])
    assert index.recorded(index.INDEX.read_text()) == (2, 2)
