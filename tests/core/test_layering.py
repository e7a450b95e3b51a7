"""vitstudio.core must stay importable without Qt, and every import runs down a floor (pyproject.toml's
[tool.importlinter] contracts) with no circle of modules."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_core_imports_no_qt(forked_cli):
    """Importing every vitstudio.core module (≥ 30) and vitstudio.cli loads no
    PySide6/shiboken6/pyqtgraph/vitstudio.gui (in a process of its own, forked from one that imported the command
    line and never Qt: tests/core/forked_cli.py). [subprocess]
    """
    code = (
        "import sys, pkgutil, importlib, vitstudio.core as c\n"
        "mods = [m.name for m in pkgutil.walk_packages(c.__path__, 'vitstudio.core.')]\n"
        "for name in mods: importlib.import_module(name)\n"
        "import vitstudio.cli\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph')"
        " or m.startswith('vitstudio.gui')]\n"
        "print(len(mods), bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    out = forked_cli.python(["-c", code])
    assert out.returncode == 0, out.stdout + out.stderr
    assert int(out.stdout.split()[0]) >= 30  # all core modules, in every subpackage, were actually imported


def test_core_is_grouped_by_layer():
    """core/ reads as the architecture: a few subpackages, no flat pile of modules.

    core/ has exactly the subpackages analysis, concepts, data, dense, folder, models, play, teach, train and exactly
    the flat modules distributed, errors, fields, files, inference, jobs, outputs, records.
    """
    from pathlib import Path

    import vitstudio.core as c

    root = Path(c.__file__).parent
    packages = sorted(p.name for p in root.iterdir() if (p / '__init__.py').exists())
    assert packages == ["analysis", "concepts", "data", "dense", "folder", "models", "play", "teach", "train"]
    flat = sorted(p.stem for p in root.glob('*.py') if p.stem != "__init__")
    # the general helpers of the lowest floor (fields: the field spec and vocabularies; errors: the user-facing kind;
    # records: what a user or the app wrote, read bounded), inference, and outputs (results swapped in whole)
    assert flat == ["distributed", "errors", "fields", "files", "inference", "jobs", "outputs", "records"], flat


def test_imports_only_go_down_a_floor():
    """The layers of pyproject.toml's [tool.importlinter]: an import that runs back up a floor, between the GUI and
    the command line, from the GUI into the core's work packages past the app, between the GUI's areas, or from the
    core to Qt fails here, and the report above names the import and its line."""
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == 0


def test_no_circle_of_modules():
    """No two modules import each other, directly or through others (a function-level import counts too)."""
    import grimp

    graph = grimp.build_graph("vitstudio", cache_dir=None)
    circles = set()
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            related = imported.startswith(importer + ".") or importer.startswith(imported + ".")
            if not related and graph.chain_exists(importer=imported, imported=importer):  # a package's own face aside
                circles.add(tuple(sorted((importer, imported))))
    assert not circles, sorted(circles)
