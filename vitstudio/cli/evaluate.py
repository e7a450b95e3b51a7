"""`vitstudio eval`: evaluate a model on a folder dataset (a run's validation split, or all of it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..core.files import counted, shown_path
from .common import EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, drain, existing, print_left_out


def register(subparsers) -> None:
    p = subparsers.add_parser("eval", help="evaluate a model on a folder dataset (its val split, or all of it)")
    p.add_argument("data_dir", nargs="?", type=existing, help="dataset folder (class subfolders)")
    p.add_argument("--labels", metavar="FILE.csv", help="a labels file (path,label rows) instead of DATA_DIR")
    p.add_argument("--model", required=True, help="a run folder or name under models/, or any --model spec")
    p.add_argument("--weights", help="weights file for --model")
    p.add_argument("--all", action="store_true", help="every image, not only the run's validation split")
    p.add_argument("--device", default="auto", help="auto (CUDA > MPS > CPU), cpu, cuda, cuda:N, mps")
    p.add_argument("--json", metavar="FILE", help="write the full report (confusion matrix, misclassified)")
    p.add_argument("--worst", type=int, default=10, help="list this many most confident mistakes (default 10)")
    p.add_argument("--prompt", help="CLIP-style models: one prompt template for the class names, e.g. \"a photo of "
                   "a {}\" (default: the model's own templates, else OpenCLIP's 80); the classes are the dataset's "
                   "folder names, so the report is the zero-shot accuracy on it")
    p.set_defaults(handler=evaluate_cmd)


def evaluate_cmd(args) -> int:
    from ..core.data.datasets import DatasetError, Split, scan_dataset, split_dataset
    from ..core.models.loading import ModelLoadError, load_model, local_folder
    from ..core.models.openclip import is_clip_style
    from ..core.models.zeroshot import with_classes
    from ..core.train.evaluation import evaluate

    if bool(args.data_dir) == bool(args.labels):
        print("error: give DATA_DIR or --labels FILE.csv (one of them)", file=sys.stderr)
        return EXIT_USAGE
    args.data_dir = args.data_dir or args.labels  # a labels file scans like a folder of class folders
    left_out: tuple = ()
    try:
        loaded = load_model(args.model, args.weights, args.device)
        run = local_folder(args.model)  # a run, named by path or by its name under models/
        manifest = run / "split.json" if run is not None else None
        if not args.all and manifest is not None and manifest.is_file():
            split = Split.from_manifest(json.loads(manifest.read_text()), args.data_dir)
            items, which = split.val, f"the run's validation split ({counted(len(split.val), 'image')})"
        else:
            scan = scan_dataset(args.data_dir)
            left_out = scan.failed  # a labels file's rows that are no readable image, wherever they point
            split = split_dataset(scan)
            items, which = split.train + split.val, f"every image of {args.data_dir} ({len(split.train + split.val)})"
        if is_clip_style(loaded):  # zero-shot on the dataset's own classes: its folder names as words
            loaded = with_classes(loaded, list(split.classes), args.prompt)
            which += f", {loaded.label_set}"
        if list(split.classes) != loaded.labels:
            raise ValueError(f"The dataset's classes {list(split.classes)} differ from the model's {loaded.labels}.")
        report = drain(evaluate(loaded, items, split.classes), quiet=True)
    except (DatasetError, ModelLoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"accuracy {report.accuracy:.4f} on {counted(int(report.confusion.sum()), 'image')}: {which}")
    print(f"{'class':<20} {'precision':>9} {'recall':>9} {'f1':>9} {'support':>8}")
    for row in report.per_class():
        print(f"{shown_path(row['class']):<20} {row['precision']:9.4f} {row['recall']:9.4f} {row['f1']:9.4f} "
              f"{row['support']:8d}")
    _print_confusion(report)
    worst = sorted(report.misclassified, key=lambda m: -m.prob)[: args.worst]
    print(f"{len(report.misclassified)} misclassified" + (f"; the {len(worst)} most confident mistakes:" if worst
                                                          else ""))
    for m in worst:
        print(f"  {shown_path(report.classes[m.true])} -> {shown_path(report.classes[m.predicted])} "
              f"({m.prob * 100:.1f} %)  {shown_path(m.path)}")
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_json(), indent=1))
    print_left_out(left_out)
    return EXIT_SOME_FAILED if report.skipped or left_out else EXIT_OK


def _print_confusion(report) -> None:
    names = [shown_path(c)[:8] for c in report.classes]
    width = max(8, *(len(n) for n in names))
    print("confusion matrix (rows: true class, columns: predicted)")
    print(" " * (width + 1) + " ".join(f"{n:>{width}}" for n in names))
    for name, row in zip(names, report.confusion):
        print(f"{name:>{width}} " + " ".join(f"{int(v):>{width}}" for v in row))
