"""The code's comments and docstrings say why, not where a change came from (the house style): no issue numbers, no
"seen in the soak"."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import vitstudio

INCIDENT = re.compile(r"\bissue #?\d+|\bseen in the soak\b", re.IGNORECASE)


def incidents(source: str) -> list[tuple[int, str]]:
    """(line, text) of each comment or string (docstrings included) that names an issue or the soak as its origin."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING) and INCIDENT.search(tok.string):
            found.append((tok.start[0], INCIDENT.search(tok.string).group(0)))
    return found


def test_no_comment_or_docstring_tells_an_incident():
    """Every module of vitstudio/, read with `tokenize` (comments and strings only, nothing imported): none names an
    "issue N" or "seen in the soak" (a comment says why the code is so; where the change came from is the commit's).
    The check itself finds both in a comment and a docstring, and nothing in code or in words like "tissue 3"."""
    sample = '"""Paint (issue 52)."""\nx = 1  # leaked a handle, seen in the soak\nissue_3 = "tissue 3"\n'
    assert [line for line, _ in incidents(sample)] == [1, 2]
    root = Path(vitstudio.__file__).parent
    hits = [f"{path.relative_to(root.parent)}:{line}: {text}" for path in sorted(root.rglob("*.py"))
            for line, text in incidents(path.read_text(encoding="utf-8"))]
    assert not hits, "say why instead of where it came from:\n  " + "\n  ".join(hits)
