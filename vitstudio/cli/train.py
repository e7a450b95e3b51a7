"""`vitstudio finetune | eval | export | demo-model`: the training face of the CLI over vitstudio.core."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE = 0, 1, 2


def add_config_options(parser, settings, presets: dict | None = None) -> None:
    """One option per Setting (as transformers' HfArgumentParser adds one per dataclass field), named after its
    field (`--min-lr-ratio`) with its earlier names as aliases, grouped by section. Every option defaults to None:
    only the settings given override the preset; ranges are checked by TrainConfig.validate(), so the CLI and the
    GUI give the same message."""
    import argparse

    groups: dict[str, object] = {}
    for s in settings:
        group = groups.get(s.section)
        if group is None:
            group = groups[s.section] = parser.add_argument_group(f"{s.section} settings")
        kw: dict = dict(dest=s.name, default=None, help=_option_help(s, presets))
        if s.kind is bool:
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["type"] = s.kind
            if s.choices is not None:
                kw["choices"] = list(s.choices)
            if s.length:
                kw["nargs"] = s.length if s.length > 0 else "*"
                kw["metavar"] = tuple(p.upper() for p in s.parts) if s.length > 0 else (s.parts or ("VALUE",))[0]
        group.add_argument(s.flag, *s.aliases, **kw)


def _option_help(s, presets: dict | None) -> str:
    from .core.train.schema import describe_default

    text = s.help
    if s.range is not None:
        text += f"; in {s.range}"
    if s.suggestions and s.choices is None and not any(v in text for v in s.suggestions):
        text += f"; e.g. {', '.join(s.suggestions)}"
    return f"{text} (default: {describe_default(s, presets)})".replace("%", "%%")


def add_parsers(sub) -> None:
    from .core.train.recipes import PRESETS, TrainConfig
    from .core.train.schema import settings_of

    p = sub.add_parser("finetune", help="fine-tune a ViT on a folder dataset (one subfolder per class)",
                       description="Every setting of TrainConfig has an option, named after its field; the options "
                                   "given override the preset's values.")
    p.add_argument("data_dir_arg", nargs="?", metavar="DATA_DIR",
                   help="dataset folder: one subfolder per class, or train/ + val/ (same as --data-dir)")
    p.add_argument("--config", help="a train_config.json holding every setting (the other options are ignored)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--exclude-list", metavar="FILE",
                   help="text file of image paths (one per line) left out of training and validation, e.g. the "
                        "doubtful labels of `vitstudio audit`; the dataset itself is not touched")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_options(p, settings_of(TrainConfig), PRESETS)

    p = sub.add_parser("eval", help="evaluate a model on a folder dataset (its val split, or all of it)")
    p.add_argument("data_dir", help="dataset folder (class subfolders)")
    p.add_argument("--model", required=True, help="a run folder or name under models/, or any --model spec")
    p.add_argument("--weights", help="weights file for --model")
    p.add_argument("--all", action="store_true", help="every image, not only the run's validation split")
    p.add_argument("--device", default="auto", help="auto (CUDA > MPS > CPU), cpu, cuda, cuda:N, mps")
    p.add_argument("--json", metavar="FILE", help="write the full report (confusion matrix, misclassified)")
    p.add_argument("--worst", type=int, default=10, help="list this many most confident mistakes (default 10)")

    p = sub.add_parser("export", help="export a model: ONNX (checked against ONNX Runtime), upstream's seed "
                       "format, or a run's attention over training as GIF/MP4")
    p.add_argument("model", help="a run folder or name under models/, or any --model spec")
    p.add_argument("--weights", help="weights file for the model")
    p.add_argument("--format", choices=["onnx", "seed", "gif", "mp4"], help="onnx: FILE.onnx with labels and "
                   "preprocessing as metadata; seed: DIR with model.pth + class_indices.json for upstream's "
                   "predict.py; gif/mp4: the run's attention over training (default: from --out's suffix)")
    p.add_argument("--out", metavar="PATH", help="the file (onnx, gif, mp4) or folder (seed) to write")
    p.add_argument("--onnx", metavar="FILE", help="same as --format onnx --out FILE")
    p.add_argument("--opset", type=int, default=17, help="ONNX opset (at least 17; default 17)")

    p = sub.add_parser("demo-model", help="train the bundled demo model (scikit-learn digits) from scratch")
    p.add_argument("--out", default="models/digits-vit", help="run folder to write (default models/digits-vit)")
    p.add_argument("--epochs", type=int, default=40, help="epochs (default 40)")


def _drain(gen, quiet: bool):
    """Run a core generator with a progress bar; returns its result."""
    from tqdm import tqdm

    from .core.jobs import Progress
    from .core.train.engine import EpochMetrics, RunWarning, StepProgress

    bar, last_message = None, None
    try:
        while True:
            rec = next(gen)
            if isinstance(rec, RunWarning):  # printed even when quiet: the run needs the user's attention
                print(f"warning: {rec.message}", file=sys.stderr)
            if quiet:
                continue
            if isinstance(rec, StepProgress):
                if bar is None or bar.total != rec.steps:
                    bar = tqdm(total=rec.steps, file=sys.stderr, leave=False, disable=None)  # None: off when not a tty
                bar.n = rec.step
                bar.set_description(f"epoch {rec.epoch + 1}/{rec.epochs}")
                bar.set_postfix(loss=f"{rec.loss:.3f}", lr=f"{rec.lr:.2e}", ips=f"{rec.img_per_s:.0f}",
                                eta=f"{rec.eta_s:.0f}s")
                bar.refresh()
            elif isinstance(rec, EpochMetrics):
                if bar is not None:
                    bar.close()
                    bar = None
                star = " *" if rec.best else ""
                print(f"epoch {rec.epoch + 1}: train loss {rec.train_loss:.4f} acc {rec.train_acc:.4f} | "
                      f"val loss {rec.val_loss:.4f} acc {rec.val_acc:.4f} | lr {rec.lr:.2e} | {rec.seconds:.1f}s{star}",
                      file=sys.stderr)
            elif isinstance(rec, Progress) and rec.message and rec.message != last_message:
                last_message = rec.message
                print(rec.message, file=sys.stderr)
    except StopIteration as stop:
        return stop.value
    finally:
        if bar is not None:
            bar.close()


def _exclusions(path: str | None) -> tuple[str, ...]:
    if not path:
        return ()
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#"))


def finetune(args) -> int:
    from .core.data.datasets import DatasetError
    from .core.models.loading import ModelLoadError
    from .core.train.engine import fine_tune

    args.data_dir = args.data_dir or args.data_dir_arg
    import os

    main_process = int(os.environ.get("RANK", "0")) == 0  # under torchrun only rank 0 talks (and writes)
    given = bool(args.data_dir and args.model and args.out_dir)  # every setting is on the command line
    if not args.config and not given and not (args.resume and args.out_dir):
        print("error: give DATA_DIR, --model and --out (or --config FILE, or --out RUN --resume)", file=sys.stderr)
        return EXIT_USAGE
    from .core.files import die_at
    from .core.train.runlock import RunInUse

    out = Path(args.out_dir) if args.out_dir else None
    with _first_interrupt_only() as interrupted:
        try:
            config, resume = _finetune_config(args, given)
            out = Path(config.out_dir)
            result = _drain(fine_tune(config, resume=resume), args.quiet or not main_process)
        except (DatasetError, ModelLoadError, ValueError, FileExistsError, FileNotFoundError, RunInUse) as exc:
            print(f"error: {_one_line(exc)}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:  # before the first epoch began (during the epochs the engine handles it)
            interrupted.set()
            die_at("cli-interrupted")
            print(_how_to_continue(out) if out is not None else "Interrupted.", file=sys.stderr)
            return 130
        if result.status in ("cancelled", "interrupted"):
            interrupted.set()
    if not main_process:
        return EXIT_OK
    print(f"{result.status}: best val accuracy {result.best_val_acc:.4f} after {result.epochs_done} epochs -> "
          f"{result.out_dir}")
    if result.skipped:
        print(f"{len(result.skipped)} file(s) skipped (listed in status.json):", file=sys.stderr)
        for path, why in list(result.skipped.items())[:10]:
            print(f"  {path}: {why}", file=sys.stderr)
    if result.status in ("cancelled", "interrupted"):
        die_at("cli-interrupted")
        print(_how_to_continue(Path(result.out_dir)), file=sys.stderr)
        return 130
    return EXIT_OK


def _finetune_config(args, given: bool):
    """(the config to run, whether to resume it): from --config FILE, from the run in --out (`--resume`: it records
    its dataset, base model and settings), or from the command line (also with `--resume` when the run was stopped
    before it recorded its settings: then it starts over)."""
    from .core.train.recipes import TrainConfig, make_config
    from .core.train.runs import read_train_config

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
    from .core.train.recipes import TrainConfig
    from .core.train.schema import settings_of

    values = {}
    for s in settings_of(TrainConfig):
        value = getattr(args, s.name, None)
        if s.name not in ("data_dir", "model", "out_dir", "preset") and value is not None:
            values[s.name] = tuple(value) if s.length else value
    if args.exclude_list:
        values["exclude"] = (*values.get("exclude", ()), *_exclusions(args.exclude_list))
    return values


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


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
    from .core.train.runs import CHECKPOINT

    if (out / CHECKPOINT).exists():
        return f"Interrupted; continue with: vitstudio finetune --out {out} --resume"
    if (out / "train_config.json").is_file():
        return (f"Interrupted before the first epoch finished; nothing to resume. Run the same command again (or "
                f"vitstudio finetune --out {out} --resume) to start {out.name} over.")
    return (f"Interrupted before {out.name} recorded its settings; nothing to resume. Run the same command again "
            f"to start it.")


def evaluate_cmd(args) -> int:
    from .core.data.datasets import DatasetError, Split, scan_dataset, split_dataset
    from .core.models.loading import ModelLoadError, load_model, local_folder
    from .core.train.evaluation import evaluate

    try:
        loaded = load_model(args.model, args.weights, args.device)
        run = local_folder(args.model)  # a run, named by path or by its name under models/
        manifest = run / "split.json" if run is not None else None
        if not args.all and manifest is not None and manifest.is_file():
            split = Split.from_manifest(json.loads(manifest.read_text()), args.data_dir)
            items, which = split.val, f"the run's validation split ({len(split.val)} images)"
        else:
            split = split_dataset(scan_dataset(args.data_dir))
            items, which = split.train + split.val, f"every image of {args.data_dir} ({len(split.train + split.val)})"
        if list(split.classes) != loaded.labels:
            raise ValueError(f"The dataset's classes {list(split.classes)} differ from the model's {loaded.labels}.")
        report = _drain(evaluate(loaded, items, split.classes), quiet=True)
    except (DatasetError, ModelLoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"accuracy {report.accuracy:.4f} on {int(report.confusion.sum())} images: {which}")
    print(f"{'class':<20} {'precision':>9} {'recall':>9} {'f1':>9} {'support':>8}")
    for row in report.per_class():
        print(f"{row['class']:<20} {row['precision']:9.4f} {row['recall']:9.4f} {row['f1']:9.4f} {row['support']:8d}")
    _print_confusion(report)
    worst = sorted(report.misclassified, key=lambda m: -m.prob)[: args.worst]
    print(f"{len(report.misclassified)} misclassified" + (f"; the {len(worst)} most confident mistakes:" if worst
                                                          else ""))
    for m in worst:
        print(f"  {report.classes[m.true]} -> {report.classes[m.predicted]} ({m.prob * 100:.1f} %)  {m.path}")
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_json(), indent=1))
    return EXIT_SOME_FAILED if report.skipped else EXIT_OK


def _print_confusion(report) -> None:
    names = [c[:8] for c in report.classes]
    width = max(8, *(len(n) for n in names))
    print("confusion matrix (rows: true class, columns: predicted)")
    print(" " * (width + 1) + " ".join(f"{n:>{width}}" for n in names))
    for name, row in zip(names, report.confusion):
        print(f"{name:>{width}} " + " ".join(f"{int(v):>{width}}" for v in row))


def export_cmd(args) -> int:
    from .core.models.loading import ModelLoadError, load_model, local_folder

    out = args.onnx or args.out
    fmt = "onnx" if args.onnx else (args.format or {".onnx": "onnx", ".gif": "gif", ".mp4": "mp4"}.get(
        Path(out or "").suffix.lower()))
    if not out or not fmt:
        print("error: give --out PATH and --format onnx|seed|gif|mp4 (or --onnx FILE)", file=sys.stderr)
        return EXIT_USAGE
    try:
        if fmt in ("gif", "mp4"):
            from .core.train.probe import write_animation

            run = local_folder(args.model)
            if run is None:
                raise ValueError(f"{args.model} is not a run folder (attention over training is kept in runs).")
            print(f"wrote {write_animation(run, Path(out))}")
            return EXIT_OK
        loaded = load_model(args.model, args.weights, "cpu")
        if fmt == "seed":
            from .core.models.seed_export import export_seed

            result = export_seed(loaded, out)
            print(f"wrote {result.folder}/model.pth and class_indices.json; in upstream's predict.py: "
                  f"model = {result.constructor}; model_weight_path = '{result.folder}/model.pth'")
            for note in result.notes:
                print(f"note: {note}", file=sys.stderr)
            return EXIT_OK
        from .core.models.onnx_export import export_onnx

        result = export_onnx(loaded, out, args.opset)
    except (ModelLoadError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as exc:
        print(f"error: ONNX export needs the onnx extra (pip install 'vitstudio[onnx]'): {exc}", file=sys.stderr)
        return EXIT_USAGE
    check = ("not checked (onnxruntime not installed)" if result.max_abs_diff is None
             else f"ONNX Runtime matches PyTorch (max |Δlogit| {result.max_abs_diff:.2e})")
    print(f"wrote {result.path} (opset {result.opset}, labels and preprocessing in its metadata); {check}")
    return EXIT_OK


def demo_model(args) -> int:
    import tempfile

    from .core.models.demo import render_digits
    from .core.train.demo_recipe import demo_config
    from .core.train.engine import fine_tune

    with tempfile.TemporaryDirectory() as tmp:
        data = render_digits(Path(tmp) / "digits")
        try:
            result = _drain(fine_tune(demo_config(data, args.out, args.epochs)), quiet=False)
        except FileExistsError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    print(f"demo model: val accuracy {result.best_val_acc:.4f} -> {result.out_dir}")
    return EXIT_OK


HANDLERS = {"finetune": finetune, "eval": evaluate_cmd, "export": export_cmd, "demo-model": demo_model}
