"""`vitstudio finetune`: fine-tune a ViT on a folder dataset, or resume a run (`--out RUN --resume`). Every option is
generated from TrainConfig's fields (core/train/schema.py)."""

from __future__ import annotations

import contextlib
import errno
import sys
from pathlib import Path

from .common import (
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    add_config_options,
    add_view_arg,
    apply_view,
    drain,
    one_line,
    print_left_out,
)


def register(subparsers) -> None:
    from ..core.train.recipes import PRESETS, TrainConfig
    from ..core.train.schema import settings_of

    p = subparsers.add_parser("finetune", help="fine-tune a ViT on a folder dataset (one subfolder per class)",
                       description="Every setting of TrainConfig has an option, named after its field; the options "
                                   "given override the preset's values.")
    p.add_argument("data_dir_arg", nargs="?", metavar="DATA_DIR",
                   help="dataset folder: one subfolder per class, or train/ + val/ (same as --data-dir)")
    p.add_argument("--labels", metavar="FILE.csv",
                   help="train on a labels file instead of class folders: CSV rows path,label (paths relative to "
                        "the CSV or absolute; rows without a label are ignored); the images are never moved")
    add_view_arg(p)
    p.add_argument("--config", help="a train_config.json holding every setting (the other options are ignored)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--exclude-list", metavar="FILE",
                   help="text file of image paths (one per line) left out of training and validation, e.g. the "
                        "doubtful labels of `vitstudio audit`; the dataset itself is not touched")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--plan", action="store_true",
                   help="print the memory plan (weights, gradients, optimizer state, activations, total, the "
                        "device's free memory) and exit without training or writing a run")
    p.add_argument("--memory-limit", metavar="SIZE",
                   help="memory the run may use, e.g. 12GB (GB = 2^30 bytes; default: the device's free memory); "
                        "a run whose plan exceeds it is refused (exit 2) with the settings that would fit")
    add_config_options(p, settings_of(TrainConfig), PRESETS)
    p.set_defaults(handler=finetune_cmd)


def _exclusions(path: str | None) -> tuple[str, ...]:
    if not path:
        return ()
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#"))


def finetune_cmd(args) -> int:
    from ..core.data.datasets import DatasetError
    from ..core.models.loading import ModelLoadError
    from ..core.train.engine import fine_tune

    args.data_dir = args.data_dir or args.data_dir_arg
    if args.labels:  # a labels file is the dataset (core/data/labels_file.py)
        if args.data_dir:
            print("error: give DATA_DIR or --labels FILE.csv, not both", file=sys.stderr)
            return EXIT_USAGE
        args.data_dir = args.labels
    if not apply_view(args, "data_dir", dataset=True):
        return EXIT_USAGE
    import os

    main_process = int(os.environ.get("RANK", "0")) == 0  # under torchrun only rank 0 talks (and writes)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1  # each rank would name its own run: --out is needed
    if args.plan and args.data_dir and not args.out_dir:  # a plan writes no run: it needs no name
        args.out_dir = "(planned run)"
    if args.data_dir and args.model and not (args.out_dir or args.config or args.resume or distributed):
        _name_the_run(args)
    given = bool(args.data_dir and args.model and args.out_dir)  # every setting is on the command line
    if not args.config and not given and not (args.resume and args.out_dir):
        print("error: give DATA_DIR and --model [--out RUN] (or --config FILE, or --out RUN --resume)",
              file=sys.stderr)
        return EXIT_USAGE
    from ..core.files import die_at
    from ..core.train.runlock import RunInUse

    out = Path(args.out_dir) if args.out_dir else None
    with _first_interrupt_only() as interrupted:
        try:
            config, resume = _finetune_config(args, given)
            out = Path(config.out_dir)
            if args.plan or args.memory_limit:
                refused = _plan(config, args.memory_limit, args.plan and main_process)
                if refused or args.plan:
                    return refused or EXIT_OK
            result = drain(fine_tune(config, resume=resume), args.quiet or not main_process)
        except (DatasetError, ModelLoadError, ValueError, FileExistsError, FileNotFoundError, RunInUse) as exc:
            print(f"error: {one_line(exc)}", file=sys.stderr)
            return EXIT_USAGE
        except OSError as exc:  # the run folder could not be written (a full disk, a read-only one): one line
            print(f"error: {write_failure(exc, out)}", file=sys.stderr)
            return EXIT_SOME_FAILED
        except KeyboardInterrupt:  # before the first epoch began (during the epochs the engine handles it)
            interrupted.set()
            die_at("cli-interrupted")
            print(_how_to_continue(out) if out is not None else "Interrupted.", file=sys.stderr)
            return 130
        if result.status in _stopped():
            interrupted.set()
    return _report(result) if main_process else EXIT_OK


def _stopped() -> tuple[str, ...]:
    from ..core.train.runs import STOPPED  # at use: the command line's modules import no torch

    return STOPPED


def _report(result) -> int:
    """The run's outcome in one line, every input it left out (exit 1, as every command that leaves out inputs),
    the count of files the folder walk ignored, and how to continue a stopped run."""
    from ..core.files import die_at

    print(f"{result.status}: {result.accuracy_name} {result.best_val_acc:.4f}{result.kept} after "
          f"{result.epochs_done} epochs -> {result.out_dir}")
    print_left_out(result.skipped)
    if result.ignored:
        print(f"{len(result.ignored)} other file(s) in the dataset folder are not images or not in a class folder "
              f"(listed in status.json)", file=sys.stderr)
    if result.status in _stopped():
        die_at("cli-interrupted")
        print(_how_to_continue(Path(result.out_dir)), file=sys.stderr)
        return 130
    return EXIT_SOME_FAILED if result.skipped else EXIT_OK


def _plan(config, memory_limit: str | None, show: bool) -> int:
    """The run's memory plan, printed when `show`; EXIT_USAGE (with the settings that would fit) when it will not
    fit the limit, else 0."""
    from ..core.train.memory_plan import parse_memory
    from ..core.train.run_plan import plan_for_dataset

    plan = plan_for_dataset(config, parse_memory(memory_limit) if memory_limit else None)
    if show:
        print("\n".join(plan.lines()))
    if not plan.fits:
        print(f"error: {plan.refusal}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def write_failure(exc: OSError, out: Path | None) -> str:
    """What a failed write of the run means and what to do: the file, the system's reason, and how to go on."""
    what = f"could not write {exc.filename}" if exc.filename else "could not write the run"
    reason = exc.strerror or one_line(exc)
    then = (f" Free some space on that disk, then continue the run: vitstudio finetune --out {out} --resume"
            if exc.errno == errno.ENOSPC and out is not None else
            " Free some space on that disk and start again." if exc.errno == errno.ENOSPC else "")
    return f"{what}: {reason}.{then}"


def _name_the_run(args) -> None:
    """No --out: a new run in the user's models folder, named as the app names it (DATASET-PRESET-MMDD-HHMM)."""
    from ..core.train.runs import new_run_folder

    args.out_dir = str(new_run_folder(args.data_dir, args.preset or "last-blocks"))
    print(f"Run folder: {args.out_dir}", file=sys.stderr)


def _finetune_config(args, given: bool):
    """(the config to run, whether to resume it): from --config FILE, from the run in --out (`--resume`: it records
    its dataset, base model and settings), or from the command line (also with `--resume` when the run was stopped
    before it recorded its settings: then it starts over)."""
    from ..core.train.recipes import TrainConfig, make_config
    from ..core.train.runs import read_train_config

    if args.config:
        try:
            return TrainConfig.from_json(Path(args.config).read_text(encoding="utf-8")), args.resume
        except (OSError, ValueError, TypeError) as exc:
            raise ValueError(f"{args.config}: {exc}") from None
    out = Path(args.out_dir)
    if args.resume and (out / "train_config.json").exists():
        return read_train_config(out), True  # the run in --out, even renamed or copied
    if args.resume and not given:
        raise FileNotFoundError(f"Nothing to resume in {out}: it has no train_config.json (it was stopped before it "
                                f"recorded its settings). Start it again: vitstudio finetune DATA_DIR --model MODEL "
                                f"--out {out} [options]")
    return make_config(args.data_dir, args.model, args.out_dir, args.preset or "last-blocks",
                       **_overrides(args)), False


def _overrides(args) -> dict:
    """The settings given on the command line (None: not given, the preset's value stays); tuples as tuples;
    --exclude and --exclude-list together."""
    from ..core.train.recipes import TrainConfig
    from ..core.train.schema import settings_of

    values = {}
    for s in settings_of(TrainConfig):
        value = getattr(args, s.name, None)
        if s.name not in ("data_dir", "model", "out_dir", "preset") and value is not None:
            values[s.name] = tuple(value) if s.length else value
    if args.exclude_list:
        values["exclude"] = (*values.get("exclude", ()), *_exclusions(args.exclude_list))
    return values


class _Flag:
    def __init__(self) -> None:
        self.on = False

    def set(self) -> None:
        self.on = True


@contextlib.contextmanager
def _first_interrupt_only():
    """The first Ctrl+C interrupts the run; any later one is ignored while the run writes its status, cleans up,
    prints the one line saying how to continue and the interpreter exits (a second Ctrl+C landing there printed
    a traceback). The caller sets the flag it gets once the run has been interrupted; the handler then stays
    ignoring until the process ends. Only in the main thread, where Python delivers SIGINT."""
    import signal
    import threading

    flag = _Flag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        if not flag.on:
            flag.set()
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN if flag.on else previous)


def _how_to_continue(out: Path) -> str:
    """Only advice that will work: resume when an epoch finished; before that the same command starts it over
    (and so does `--resume` once the run has recorded its settings: it needs them)."""
    from ..core.train.runs import CHECKPOINT

    if (out / CHECKPOINT).exists():
        return f"Interrupted; continue with: vitstudio finetune --out {out} --resume"
    if (out / "train_config.json").is_file():
        return (f"Interrupted before the first epoch finished; nothing to resume. Run the same command again (or "
                f"vitstudio finetune --out {out} --resume) to start {out.name} over.")
    return (f"Interrupted before {out.name} recorded its settings; nothing to resume. Run the same command again "
            f"to start it.")
