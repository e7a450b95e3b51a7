"""`vitstudio finetune | eval | export | demo-model`: the training face of the CLI over vitstudio.core."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE = 0, 1, 2


TRAIN_OPTIONS = (
    ("epochs", int, "number of epochs"), ("batch-size", int, "images per step"),
    ("grad-accum", int, "steps whose gradients are accumulated per optimizer update"),
    ("lr", float, "peak learning rate"), ("weight-decay", float, "weight decay"),
    ("layer-decay", float, "layer-wise learning-rate decay (timm), e.g. 0.75"),
    ("warmup-epochs", float, "linear warm-up length in epochs"), ("label-smoothing", float, "label smoothing"),
    ("mixup", float, "mixup alpha (0 = off)"), ("cutmix", float, "CutMix alpha (0 = off)"),
    ("drop-path", float, "stochastic depth rate"), ("ema-decay", float, "weight EMA decay (0 = off)"),
    ("patience", int, "stop after this many epochs without a better val accuracy (0 = never)"),
    ("seed", int, "random seed (split, initialisation, augmentation)"), ("img-size", int, "training image size"),
    ("val-ratio", float, "fraction of each class held out for validation"),
    ("last-blocks", int, "number of final blocks trained by the last-blocks preset"),
    ("workers", int, "DataLoader worker processes (pil data path)"),
)


def add_parsers(sub) -> None:
    from .core.train.recipes import PRESETS

    p = sub.add_parser("finetune", help="fine-tune a ViT on a folder dataset (one subfolder per class)")
    p.add_argument("data_dir", nargs="?", help="dataset folder: one subfolder per class, or train/ + val/")
    p.add_argument("--model", help="base model (any --model spec), e.g. vit_small_patch16_224.augreg_in21k")
    p.add_argument("--config", help="a train_config.json holding every setting (the other options are ignored)")
    p.add_argument("--weights", help="weights file for --model")
    p.add_argument("--preset", default="last-blocks", choices=list(PRESETS),
                   help="starting recipe; the options below override its values (default last-blocks)")
    p.add_argument("--out", help="new run folder, e.g. models/flowers-vit (never overwritten)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    for name, kind, text in TRAIN_OPTIONS:
        p.add_argument(f"--{name}", type=kind, help=text + " (default: the preset's)")
    p.add_argument("--device", default="auto", help="auto (CUDA > MPS > CPU), cpu, cuda, cuda:N, mps")
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"],
                   help="auto (bf16 on GPUs that support it, fp32 elsewhere; the default), fp32, or bf16/fp16 "
                        "autocast with mixed-precision training")
    aug = p.add_argument_group("augmentation (defaults: the preset's)")
    aug.add_argument("--scale", type=float, nargs=2, metavar=("MIN", "MAX"),
                     help="random-resized-crop area range, e.g. 0.75 1 for mild crops (0.08 1 is timm's ImageNet)")
    aug.add_argument("--hflip", type=float, help="horizontal flip probability (0 for text, digits, oriented data)")
    aug.add_argument("--color-jitter", type=float, help="colour jitter strength, e.g. 0.4 (PIL data path)")
    aug.add_argument("--randaugment", dest="auto_augment", metavar="SPEC",
                     help="timm's RandAugment, e.g. rand-m9-mstd0.5-inc1 (PIL data path)")
    aug.add_argument("--balance", action="store_true", help="class-balanced loss: every class weighs the same")
    p.add_argument("--split-rule", choices=["stratified", "upstream"],
                   help="stratified (default) or upstream's read_split_data (random.sample, seed 0, 4 suffixes)")
    p.add_argument("--no-reuse-head", dest="reuse_head", action="store_false", default=None,
                   help="always start a random head, even when every class is among the base model's labels")
    p.add_argument("--probe", help="image whose attention rollout is snapshotted after every epoch")
    p.add_argument("--exclude-list", metavar="FILE",
                   help="text file of image paths (one per line) left out of training and validation, e.g. the "
                        "doubtful labels of `vitstudio audit`; the dataset itself is not touched")
    p.add_argument("--data-path", default="cached", choices=["cached", "pil"],
                   help="cached: decode once, augment on the device (default); pil: timm's PIL DataLoader")
    p.add_argument("--channels-last", action="store_true", help="channels-last memory format for the model")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--fused-optimizer", action="store_true",
                   help="fused optimizer kernels on CUDA for any optimizer (default: on for AdamW and Adam)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

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

    overrides = {k: getattr(args, k) for k in ("epochs", "batch_size", "grad_accum", "lr", "weight_decay",
                                               "layer_decay", "warmup_epochs", "label_smoothing", "mixup",
                                               "cutmix", "drop_path", "ema_decay", "patience", "seed", "img_size",
                                               "val_ratio", "last_blocks", "workers")}
    overrides.update(channels_last=args.channels_last or None, compile=args.compile or None,
                     fused_optimizer=args.fused_optimizer or None, scale=tuple(args.scale) if args.scale else None,
                     hflip=args.hflip, color_jitter=args.color_jitter, auto_augment=args.auto_augment,
                     balance=args.balance or None, split_rule=args.split_rule, reuse_head=args.reuse_head)
    import os

    main_process = int(os.environ.get("RANK", "0")) == 0  # under torchrun only rank 0 talks (and writes)
    given = bool(args.data_dir and args.model and args.out)  # every setting is on the command line
    if not args.config and not given and not (args.resume and args.out):
        print("error: give DATA_DIR, --model and --out (or --config FILE, or --out RUN --resume)", file=sys.stderr)
        return EXIT_USAGE
    from .core.files import die_at
    from .core.train.runlock import RunInUse

    out = Path(args.out) if args.out else None
    with _first_interrupt_only() as interrupted:
        try:
            config, resume = _finetune_config(args, overrides, given)
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


def _finetune_config(args, overrides: dict, given: bool):
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
    out = Path(args.out)
    if args.resume and (out / "train_config.json").exists():
        return read_train_config(out), True  # the run in --out, even renamed or copied
    if args.resume and not given:
        raise FileNotFoundError(f"Nothing to resume in {out}: it has no train_config.json (it was stopped before it "
                                f"recorded its settings). Start it again: vitstudio finetune DATA_DIR --model MODEL "
                                f"--out {out} [options]")
    return make_config(args.data_dir, args.model, args.out, args.preset, weights=args.weights, device=args.device,
                       precision=args.precision, probe_image=args.probe, data_path=args.data_path,
                       exclude=_exclusions(args.exclude_list), **overrides), False


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
