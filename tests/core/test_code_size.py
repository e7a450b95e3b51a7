"""Small files, short functions (ARCHITECTURE.md, practice 11): no file under vitstudio/ over 450 lines, no function
or method over 60 (end_lineno - lineno + 1: from the `def` line to the last, docstring included)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "vitstudio"
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 60

def _measure(package: Path = PACKAGE) -> tuple[list[str], list[str]]:
    """(files over the limit, functions over the limit), each as 'path[:qualified name]: N lines'."""
    files, functions = [], []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).as_posix()
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > MAX_FILE_LINES:
            files.append(f"{rel}: {lines} lines")
        for name, size in _function_sizes(ast.parse(source, filename=rel)):
            if size > MAX_FUNCTION_LINES:
                functions.append(f"{rel}:{name}: {size} lines")
    return files, functions


def _function_sizes(tree: ast.AST, prefix: str = ""):
    """(qualified name, lines) of every function and method, nested ones included (as "Class.method.inner")."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, node.end_lineno - node.lineno + 1
            yield from _function_sizes(node, name + ".")
        else:
            yield from _function_sizes(node, prefix)


def test_no_file_over_the_limit():
    """No file under vitstudio/ exceeds 450 lines."""
    files, _ = _measure()
    assert not files, f"files over {MAX_FILE_LINES} lines (split them by responsibility): {files}"


def test_no_function_over_the_limit():
    """No function/method (nested included, docstring counted) exceeds 60 lines."""
    _, functions = _measure()
    assert not functions, f"functions over {MAX_FUNCTION_LINES} lines (split into named steps): {functions}"


def test_the_measure_finds_what_is_over_the_limit(tmp_path):
    """The two checks above can fail: a package with one file and one method over the limits is reported, by name
    and size, and nothing else is.

    The two checks above can fail: on a package written in the test, a file of 452 lines and a method of 61 are reported
    by name and size, nothing else (replaces the allow-list check, which looped over an empty list).
    """
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "ok.py").write_text("def f():\n    return 1\n")
    body = "".join(f"        x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (package / "sub" / "big.py").write_text("class A:\n    def long(self):\n" + body
                                            + "\n" * (MAX_FILE_LINES - MAX_FUNCTION_LINES))
    files, functions = _measure(package)
    lines = MAX_FILE_LINES + 2
    assert files == [f"pkg/sub/big.py: {lines} lines"]
    assert functions == [f"pkg/sub/big.py:A.long: {MAX_FUNCTION_LINES + 1} lines"]


def test_the_measure_counts_what_it_should():
    """The measure itself: from the `def` line to the last line (docstring included), methods and nested functions
    named and measured on their own."""
    long_body = "".join(f"        x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    source = ("class A:\n"
              "    def short(self):\n"
              "        \"\"\"Doc.\"\"\"\n"
              "        def inner():\n"
              "            pass\n"
              "\n"
              "    def long(self):\n" + long_body)
    sizes = dict(_function_sizes(ast.parse(source)))
    assert sizes == {"A.short": 4, "A.short.inner": 2, "A.long": MAX_FUNCTION_LINES + 1}
