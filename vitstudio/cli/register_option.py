"""`--registers FILE.json`, the option shared by predict, explain, embed and artifacts: the model run with a test-time
register on the neurons a `vitstudio registers` file names (core/analysis/registers.py)."""

from __future__ import annotations


def add_registers_arg(p) -> None:
    p.add_argument("--registers", metavar="FILE.json", help="run the model with a test-time register (Jiang et al. "
                   "2025): one extra token that the register neurons of FILE (from `vitstudio registers`) write to "
                   "instead of the patches")


def registers_for(args, loaded):
    """The test-time register of --registers FILE as a context (nothing without it); a RegisterError when the file
    is not one or does not fit the model."""
    from ..core.analysis.registers import applied, check_fits, read_registers

    path = getattr(args, "registers", None)
    if path is None:
        return applied(loaded, None)
    registers = read_registers(path)
    check_fits(loaded, registers)
    return applied(loaded, registers)
