"""`vitstudio registers FOLDER` (Jiang et al.'s register neurons, written to a file that `--registers` takes on
predict and explain) and `vitstudio artifacts FOLDER` (the high-norm patch tokens per layer and image: Darcet et al.'s
artifacts, and what a test-time register does to them)."""

from __future__ import annotations

import json
import sys

from ..core.fields import AT_LEAST_ONE
from ..core.files import counted, shown_path
from .common import (
    BATCH_SIZE,
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    NO_IMAGES,
    add_decoder_arg,
    add_model_args,
    checked,
    drain,
    existing,
    has_images,
    load_model_from_args,
)
from .register_option import add_registers_arg, registers_for


def threshold_arg(text: str) -> float | str:
    """argparse's `type` for --threshold: 'auto' or a number > 0."""
    if text == "auto":
        return text
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither 'auto' nor a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"the threshold must be a norm above 0, not {text}")
    return value


def register(subparsers) -> None:
    p = subparsers.add_parser("registers", help="the MLP neurons that make a model's high-norm artifact tokens "
                              "(Jiang et al. 2025's register neurons), written for --registers")
    p.add_argument("paths", nargs="+", metavar="FOLDER", type=existing, help="image files and/or folders")
    add_model_args(p)
    p.add_argument("--detect-layer", type=int, default=-1, help="block whose output norms pick the outlier tokens "
                   "(default -1, the last; the paper uses -2 for DINOv2-L)")
    p.add_argument("--threshold", type=threshold_arg, default="auto", help="a token norm above which a token is an "
                   "outlier, or auto (default): Q3 + 3·IQR of the folder's patch norms at the detect layer, at least "
                   "twice their median (said in the output)")
    p.add_argument("--highest-layer", type=int, help="score neurons of blocks 0..N (default: the detect layer)")
    p.add_argument("--top", type=checked(int, AT_LEAST_ONE), default=10, help="neurons kept (default 10)")
    p.add_argument("--sparse", action="store_true", help="keep only sparse neurons (below 0.5 on at least half the "
                   "tokens), as the paper's search does")
    p.add_argument("--out", metavar="FILE.json", required=True, help="the register file to write")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("--batch-size", **BATCH_SIZE)
    add_decoder_arg(p)
    p.set_defaults(handler=registers_cmd)

    a = subparsers.add_parser("artifacts", help="high-norm patch tokens per layer and image (Darcet et al. 2023's "
                              "artifacts): maximum and median patch norm, outliers and where they sit")
    a.add_argument("paths", nargs="+", metavar="FOLDER", type=existing, help="image files and/or folders")
    add_model_args(a)
    add_registers_arg(a)
    a.add_argument("--threshold", type=threshold_arg, default="auto", help="a patch norm above which a patch is an "
                   "outlier in every layer, or auto (default): per layer, Q3 + 3·IQR of its patch norms, at least "
                   "twice their median")
    a.add_argument("--layer", type=int, default=-1, help="the layer whose outliers are located (default -1)")
    a.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    a.add_argument("--batch-size", **BATCH_SIZE)
    add_decoder_arg(a)
    a.set_defaults(handler=artifacts_cmd)


def registers_cmd(args) -> int:
    from ..core.analysis.registers import RegisterError, find_register_neurons, write_registers

    if not has_images(args.paths):
        print(f"error: {NO_IMAGES}", file=sys.stderr)
        return EXIT_USAGE
    if not args.out.lower().endswith(".json"):
        print("error: --out names the register file: FILE.json", file=sys.stderr)
        return EXIT_USAGE
    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    try:
        result, errors = drain(find_register_neurons(
            loaded, args.paths, args.detect_layer, args.threshold, args.highest_layer, args.top, args.sparse,
            args.batch_size or 16, decoder=args.decoder), quiet=args.json)
    except RegisterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for path, reason in errors:
        print(f"skipped {shown_path(path)}: {reason}", file=sys.stderr)
    if result.neurons:
        write_registers(result, args.out)
    if args.json:
        print(json.dumps(result.to_json()))
    _say_registers(result, args.out)
    return EXIT_SOME_FAILED if errors else EXIT_OK


def _say_registers(result, out: str) -> None:
    """What was found, on stderr (stdout holds the JSON when asked)."""
    print(f"threshold {result.threshold:.4g} at block {result.detect_layer} ({result.threshold_rule}); "
          f"{result.images_with_outliers} of {counted(result.images, 'image')} had tokens above it", file=sys.stderr)
    if not result.neurons:
        print("no token is above the threshold in any image: no register neurons to report (nothing written)",
              file=sys.stderr)
        return
    print(f"{'block':>5} {'neuron':>6} {'at outliers':>12} {'elsewhere':>10}", file=sys.stderr)
    for n in result.neurons:
        print(f"{n.layer:>5} {n.neuron:>6} {n.score:12.4g} {n.elsewhere:10.4g}", file=sys.stderr)
    print(f"register file: {shown_path(out)}", file=sys.stderr)


def artifacts_cmd(args) -> int:
    from ..core.analysis.registers import RegisterError
    from ..core.analysis.token_norms import artifacts

    if not has_images(args.paths):
        print(f"error: {NO_IMAGES}", file=sys.stderr)
        return EXIT_USAGE
    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    try:
        with registers_for(args, loaded):
            result, errors = drain(artifacts(loaded, args.paths, args.threshold, args.layer, args.batch_size or 16,
                                             decoder=args.decoder), quiet=args.json)
    except (RegisterError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for path, reason in errors:
        print(f"skipped {shown_path(path)}: {reason}", file=sys.stderr)
    doc = result.to_json()
    doc["registers"] = args.registers
    if args.json:
        print(json.dumps(doc))
    else:
        _artifacts_table(doc)
    return EXIT_SOME_FAILED if errors else EXIT_OK


def _artifacts_table(doc: dict) -> None:
    with_register = f", with the test-time register of {shown_path(doc['registers'])}" if doc["registers"] else ""
    print(f"{counted(doc['images'], 'image')}{with_register}; thresholds: {doc['threshold_rule']}")
    print(f"{'layer':>5} {'mean max':>9} {'max':>9} {'median':>8} {'outliers':>8}  prefix tokens (max norm)")
    for row in doc["layers"]:
        prefix = ", ".join(f"{k} {v:.3g}" for k, v in row["prefix_max_norm"].items())
        print(f"{row['layer']:>5} {row['mean_max_patch_norm']:9.4g} {row['max_patch_norm']:9.4g} "
              f"{row['median_patch_norm']:8.4g} {row['outliers']:>8}  {prefix}")
    print(f"outliers at layer {doc['layer']}, per image (on the object: inside the rollout's mask):")
    for image in doc["per_image"]:
        where = " ".join(f"({r},{c})" for r, c in image["where"]) or "none"
        on = "" if image["on_object"] is None or not image["where"] else f"; {image['on_object']} on the object"
        print(f"  {shown_path(image['path'])}: {where}{on}")
