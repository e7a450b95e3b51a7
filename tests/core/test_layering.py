"""vitstudio.core must stay importable without Qt."""

import subprocess
import sys


def test_core_imports_no_qt():
    code = (
        "import sys, pkgutil, importlib, vitstudio.core as c\n"
        "for m in pkgutil.iter_modules(c.__path__): importlib.import_module('vitstudio.core.' + m.name)\n"
        "import vitstudio.cli\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph')"
        " or m.startswith('vitstudio.gui')]\n"
        "print(len(list(pkgutil.iter_modules(c.__path__))), bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert int(out.stdout.split()[0]) >= 8  # all core modules were actually imported
