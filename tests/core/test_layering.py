"""vitstudio.core must stay importable without Qt."""

import subprocess
import sys


def test_core_imports_no_qt():
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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert int(out.stdout.split()[0]) >= 30  # all core modules, in every subpackage, were actually imported


def test_core_is_grouped_by_layer():
    """core/ reads as the architecture: a few subpackages, no flat pile of modules."""
    from pathlib import Path

    import vitstudio.core as c

    root = Path(c.__file__).parent
    packages = sorted(p.name for p in root.iterdir() if (p / '__init__.py').exists())
    assert packages == ["analysis", "data", "folder", "models", "train"]
    flat = sorted(p.stem for p in root.glob('*.py') if p.stem != "__init__")
    assert len(flat) <= 4, flat

