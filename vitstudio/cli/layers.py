"""`vitstudio layers` (a linear probe per block over a labelled folder, beside the logit lens's accuracy) and
`vitstudio compare-layers` (CKA between every block of two models on the same images): the Folder tab's Layers view
and the Compare tab's CKA map on the command line."""

from __future__ import annotations

import json
import sys

from ..core.fields import LAYER_FEATURES, PRECISIONS, Range
from ..core.files import counted
from .common import (
    BATCH_SIZE,
    COUNT,
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    add_decoder_arg,
    add_model_args,
    add_ray_arg,
    checked,
    drain,
    existing,
    load_model_from_args,
    print_left_out,
)

FEATURES = f"{LAYER_FEATURES[0].upper()}{LAYER_FEATURES[1:]}: the same for the probes and for CKA."


def register(subparsers) -> None:
    p = subparsers.add_parser("layers", help="at which depth the class becomes readable: a k-fold linear probe per "
                              "block over a labelled folder, beside the logit lens's accuracy", description=FEATURES)
    p.add_argument("data_dir", nargs="?", type=existing, help="dataset folder (class subfolders)")
    p.add_argument("--labels", metavar="FILE.csv", help="a labels file (path,label rows) instead of DATA_DIR")
    add_model_args(p)
    p.add_argument("--folds", type=checked(int, Range(2)), default=5, help="folds of the cross-validation (default 5)")
    p.add_argument("--batch-size", **BATCH_SIZE)
    p.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")
    add_ray_arg(p)
    p.set_defaults(handler=layers_cmd)

    c = subparsers.add_parser("compare-layers", help="CKA between every block of two models on the same images "
                              "(what fine-tuning changed, and where)", description=FEATURES)
    c.add_argument("inputs", nargs="+", metavar="IMAGE", type=existing, help="image files and/or folders")
    c.add_argument("--model", action="append", required=True, help="model A, then model B (give it twice); any "
                   "--model spec of the other commands")
    c.add_argument("--weights", action="append", help="a weights file for the named architecture, once per --model "
                   "in the same order (or not at all)")
    c.add_argument("--device", default="auto", help="auto (CUDA > MPS > CPU), cpu, cuda, cuda:N, mps")
    c.add_argument("--precision", default="auto", choices=PRECISIONS, help="auto, fp32, bf16 or fp16 autocast")
    c.add_argument("--minibatch", type=checked(int, Range(4)), metavar="N",  # the unbiased estimator needs n > 3
                   help="minibatch CKA (Nguyen et al. 2021) over batches of N images (at least 4), for folders "
                   "whose features should not be held at once; default: linear CKA on all images")
    c.add_argument("--batch-size", type=COUNT, default=32, help="images per forward (default 32)")
    c.add_argument("--json", action="store_true", help="print the matrix as JSON on stdout")
    add_decoder_arg(c)
    c.set_defaults(handler=compare_layers_cmd)


def layers_cmd(args) -> int:
    from ..core.data.dataset_scan import DatasetError
    from ..core.train.layer_probes import probe_layers

    if bool(args.data_dir) == bool(args.labels):
        print("error: give DATA_DIR or --labels FILE.csv (one of them)", file=sys.stderr)
        return EXIT_USAGE
    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    try:
        result = drain(probe_layers(loaded, args.data_dir or args.labels, args.folds, args.batch_size), quiet=False)
    except (DatasetError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return _report(result, args.json, _probe_table)


def _probe_table(result) -> None:
    print(f"{counted(result.images, 'image')}, {counted(len(result.classes), 'class', 'classes')}, "
          f"{result.folds}-fold probes; {result.lens_note}")
    print(f"{'block':>5} {'probe':>7} {'±':>6} {'lens':>7}")
    for row in result.to_json()["blocks"]:
        lens = "" if row["lens_accuracy"] is None else f"{row['lens_accuracy']:7.4f}"
        print(f"{row['block']:>5} {row['probe_accuracy']:7.4f} {row['probe_spread']:6.4f} {lens:>7}")


def compare_layers_cmd(args) -> int:
    from ..core.folder.layer_compare import compare_layers
    from ..core.models.loading import ModelLoadError, load_model

    if len(args.model) != 2:
        print(f"error: give --model twice (model A, then model B), not {len(args.model)} time(s)", file=sys.stderr)
        return EXIT_USAGE
    weights = args.weights or [None, None]
    if len(weights) != 2:
        print("error: give --weights once per --model (twice), or not at all", file=sys.stderr)
        return EXIT_USAGE
    try:
        a = load_model(args.model[0], weights[0], args.device, args.precision)
        same = args.model[1] == args.model[0] and weights[1] == weights[0]  # a model against itself: one load
        b = a if same else load_model(args.model[1], weights[1], args.device, args.precision)
        result = drain(compare_layers(a, b, args.inputs, args.minibatch, args.batch_size), quiet=False)
    except (ModelLoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return _report(result, args.json, _cka_table)


def _cka_table(result) -> None:
    doc = result.to_json()
    print(f"{doc['estimator']} on {counted(result.images, 'image')}; rows: {doc['rows']}, columns: {doc['columns']}")
    for i, row in enumerate(result.matrix):
        print(f"{i:>3} " + " ".join(f"{v:6.3f}" for v in row))


def _report(result, as_json: bool, table) -> int:
    """The files skipped (stderr), then the result as JSON or as the command's table; exit 1 if any was skipped."""
    print_left_out(result.errors)
    if as_json:
        print(json.dumps(result.to_json()))  # ASCII, as every --json: bytes that are not UTF-8 as \udcNN
    else:
        table(result)
    return EXIT_SOME_FAILED if result.errors else EXIT_OK
