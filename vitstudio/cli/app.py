"""`vitstudio` command line: the top-level parser and the dispatch, a thin face over vitstudio.core.

Each command group is a module of this package with one `register(subparsers)` that adds its parser(s) and sets
each parser's `handler` (as accelerate's `commands/accelerate_cli.py` does). Nothing here imports torch: a handler
does, once the arguments are parsed and a custom model spec has passed its cheap check.

Exit codes: 0 success, 1 some inputs failed, 2 usage or model error.
"""

from __future__ import annotations

import argparse
import errno
import sys

from . import (
    card,
    concepts,
    demo,
    dense,
    evaluate,
    explain,
    export,
    faithfulness,
    folder,
    layers,
    models,
    play,
    predict,
    registers,
    scores,
    suggest,
    teach,
    train,
    views,
)
from .common import EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, Parser, on_ray, printable_names, records_said

# The order of `vitstudio --help`.
COMMANDS = (models, predict, explain, faithfulness, play, train, teach, evaluate, export, demo, folder, views,
            scores, layers, registers, concepts, dense, suggest, card)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="vitstudio", description="Predict with and inspect Vision Transformers.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    with printable_names(), records_said():  # a name that is not UTF-8 never stops a command at its print
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    _quiet_idle_threads()
    refused = _precheck_model(getattr(args, "model", None))
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with on_ray(args):
            return args.handler(args)
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except ImportError as exc:
        if not _torch_failed(exc):
            raise
        print(f"error: {_torch_failure(exc)}", file=sys.stderr)
        return EXIT_SOME_FAILED
    except _one_line_errors() as exc:  # one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `vitstudio models | head`: the reader left; that is not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return EXIT_OK
    except OSError as exc:  # after BrokenPipeError, one of its kind
        if exc.errno not in FULL_DISK:
            raise
        print(f"error: {_full_disk(exc)}", file=sys.stderr)
        return EXIT_SOME_FAILED


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def _quiet_idle_threads() -> None:
    """Before torch loads (its OpenMP runtime reads this once): the model's threads sleep between operations instead
    of spinning, so a folder pass's reader threads get the cores they wait on. Measured on 2 cores, the demo model
    over 50k images (decode, fingerprints and forward overlapped): the pass 76 → 58 s; a single ViT-S image ~15 %
    slower (a thread wakes per operation), which a command's seconds of start-up hide. The user's own setting wins."""
    import os

    if "torch" not in sys.modules:  # in a process that has it already (tests calling main) it would change nothing
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _full_disk(exc: OSError) -> str:
    """A write any command may meet (caches, a concepts file, its checkpoint) on a full disk: the file, and that the
    same command goes on from what was written (caches and checkpoints are kept whole, never half-written)."""
    from ..core.files import shown_path

    what = f"could not write {shown_path(exc.filename)}" if exc.filename else "could not write a file"
    return (f"{what}: {exc.strerror or 'No space left on device'}. Free some space on that disk and run the same "
            f"command again: it goes on from what was written.")


def _precheck_model(spec: str | list[str] | None) -> str | None:
    """An absurd or damaged custom spec / model folder is refused from its numbers before torch loads (~5 s);
    `compare-layers` names two models."""
    if not spec:
        return None
    from ..core.models.config_check import precheck_spec

    try:
        for one in [spec] if isinstance(spec, str) else spec:
            precheck_spec(one)
    except ValueError as exc:
        return str(exc)
    return None


def _one_line_errors() -> tuple:
    """Errors told in one line, imported only once something was raised (the CLI starts without torch)."""
    from ..core.folder.ray_cluster import RayJobError
    from ..core.inference import NoClassifierHead
    from ..core.jobs import GPUOutOfMemory

    return GPUOutOfMemory, NoClassifierHead, RayJobError


def _torch_failed(exc: ImportError) -> bool:
    return (exc.name or "").split(".")[0] == "torch" or "libtorch" in str(exc) or any(
        "/torch/" in frame.filename for frame in _frames(exc))


def _frames(exc: BaseException):
    import traceback

    return traceback.extract_tb(exc.__traceback__)


def _torch_failure(exc: ImportError) -> str:
    """PyTorch that cannot be imported (a memory limit too low for its libraries, a broken install): one line."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "failed to map segment" in first or "cannot allocate memory" in first.lower():
        return (f"PyTorch could not be loaded: {first}. Its libraries need more memory than this process may use "
                f"(a memory limit such as `ulimit -v`, or the machine is out of memory).")
    return f"PyTorch could not be loaded: {first}. Reinstall it (`make` in the checkout, or pip install torch)."
