"""`vitstudio` command line: a thin face over vitstudio.core.

Exit codes: 0 success, 1 some inputs failed, 2 usage or model error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .core.analysis.methods import EXPLAIN_METHODS, FUSIONS

EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE = 0, 1, 2


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="timm name[.tag], hf-hub:ORG/REPO, local-dir:DIR, "
                   "a folder under models/, a seed checkpoint, or custom:img=..,patch=..,width=..,depth=..,"
                   "heads=..,classes=..")
    p.add_argument("--weights", help="weights file for the named architecture (.safetensors/.pth/.pt/.bin/.npz)")
    p.add_argument("--device", default="auto", help="auto (CUDA > MPS > CPU), cpu, cuda, cuda:N, mps")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vitstudio", description="Predict with and inspect Vision Transformers.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("models", help="list ViT-family models (local ones first)")
    p.add_argument("--filter", help="substring or glob on the name, e.g. 'deit*' or 'dinov2'")
    p.add_argument("--local", action="store_true", help="only models whose weights are available offline")
    p.add_argument("--json", action="store_true", help="one JSON object per line")

    p = sub.add_parser("predict", help="classify images and folders")
    p.add_argument("paths", nargs="+", help="image files and/or folders (searched recursively)")
    _add_model_args(p)
    p.add_argument("--topk", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=32)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object per input, one per line")
    out.add_argument("--csv", metavar="FILE", help="write a CSV (path, error, label/prob/index per rank)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("explain", help="attention / embedding analyses of one image (or a folder for distance)")
    p.add_argument("image", nargs="?", help="image file (a folder for --method distance; none for pos-embed/filters)")
    _add_model_args(p)
    p.add_argument("--method", required=True, choices=EXPLAIN_METHODS)
    p.add_argument("--layer", type=int, default=-1, help="0-based; negative counts from the end (default -1)")
    p.add_argument("--head", type=int, help="one head instead of all")
    p.add_argument("--patch", type=_patch, help="ROW,COL of the patch for token / similarity")
    p.add_argument("--fusion", default="mean", choices=FUSIONS, help="rollout head fusion")
    p.add_argument("--discard", type=float, default=0.0, help="rollout: fraction of smallest entries to drop")
    p.add_argument("--class", dest="target", type=int, help="gradient-rollout target class (default top-1)")
    p.add_argument("--cmap", default="inferno", help="colormap for PNG overlays")
    p.add_argument("--out", required=True, help="FILE.npy (raw float32 array), FILE.png (picture) or FILE.json")

    from . import cli_train

    cli_train.add_parsers(sub)

    p = sub.add_parser("card", help="show the model card of a model")
    _add_model_args(p)
    p.add_argument("--json", action="store_true")
    return parser


def _patch(text: str) -> tuple[int, int]:
    try:
        row, col = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("use ROW,COL, e.g. 3,7") from None
    return row, col


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        from .cli_train import HANDLERS

        handlers = {"models": _models, "predict": _predict, "card": _card, "explain": _explain, **HANDLERS}
        return handlers[args.command](args)
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130


def _models(args) -> int:
    from .core.models.catalog import list_catalog

    entries = list_catalog(args.filter, args.local)
    for e in entries:
        if args.json:
            print(json.dumps({"name": e.name, "architecture": e.architecture, "tag": e.tag, "source": e.source,
                              "local": e.local, "hf_hub_id": e.hf_hub_id, "num_classes": e.num_classes}))
        else:
            mark = "local" if e.local else ("hub" if e.tag else "no weights")
            print(f"{e.name:<70} {mark}")
    if not args.json:
        print(f"{len(entries)} models", file=sys.stderr)
    return EXIT_OK


def _load(args):
    from .core.models.loading import ModelLoadError, load_model

    progress = None
    if sys.stderr.isatty():
        def progress(done, total, message):
            pct = f"{100 * done / total:5.1f}%" if total else f"{done / 1e6:.1f} MB"
            print(f"\r{message}: {pct}", end="", file=sys.stderr, flush=True)
    try:
        return load_model(args.model, args.weights, args.device, args.precision, progress=progress)
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def _predict(args) -> int:
    from tqdm import tqdm

    from .core.data.images import expand_paths
    from .core.inference import classify_files, write_csv

    if args.topk < 1 or args.batch_size < 1:
        print("error: --topk and --batch-size must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    loaded = _load(args)
    if loaded is None:
        return EXIT_USAGE
    files = list(expand_paths(args.paths))
    if not files:
        print("error: no image files found in the given paths", file=sys.stderr)
        return EXIT_SOME_FAILED
    bar = tqdm(total=len(files), unit="img", file=sys.stderr,
               disable=args.quiet or len(files) <= args.batch_size)
    results = []
    for batch in classify_files(loaded, files, topk=args.topk, batch_size=args.batch_size):
        results.extend(batch)
        bar.update(len(batch))
        if args.json:
            for pred in batch:
                print(json.dumps(pred.to_json()), flush=True)
        elif not args.csv:
            for pred in batch:
                print(_human(pred))
    bar.close()
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as fh:
            write_csv(results, fh, args.topk)
    failed = sum(not r.ok for r in results)
    if failed:
        print(f"{failed} of {len(results)} inputs failed", file=sys.stderr)
    return EXIT_SOME_FAILED if failed else EXIT_OK


def _human(pred) -> str:
    if not pred.ok:
        return f"{pred.path}\n  error: {pred.error}"
    rows = [f"  {p * 100:6.2f}%  {label}  [{i}]" for i, label, p in zip(pred.indices, pred.labels, pred.probs)]
    return "\n".join([pred.path, *rows])


def _card(args) -> int:
    from .core.models.modelcard import model_card

    loaded = _load(args)
    if loaded is None:
        return EXIT_USAGE
    card = model_card(loaded)
    if args.json:
        print(json.dumps(card.as_dict()))
    else:
        width = max(len(k) for k, _ in card.lines())
        for key, value in card.lines():
            print(f"{key:<{width}}  {value}")
    return EXIT_OK


def _explain(args) -> int:
    from .core.analysis.explain import IMAGE_FREE, distance_over, explain, render
    from .core.data.images import ImageReadError, read_image

    out = Path(args.out)
    if out.suffix.lower() not in (".npy", ".png", ".json"):
        print("error: --out must end in .npy, .png or .json", file=sys.stderr)
        return EXIT_USAGE
    if args.image is None and args.method not in IMAGE_FREE:
        print(f"error: the '{args.method}' method needs an image", file=sys.stderr)
        return EXIT_USAGE
    loaded = _load(args)
    if loaded is None:
        return EXIT_USAGE
    failed = []
    try:
        if args.method == "distance" and Path(args.image).is_dir():
            exp, failed = distance_over(loaded, [args.image])
        else:
            image = read_image(args.image) if args.image and args.method not in IMAGE_FREE else None
            exp = explain(loaded, args.method, image, layer=args.layer, head=args.head, patch=args.patch,
                          fusion=args.fusion, discard=args.discard, target=args.target)
    except ImageReadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_SOME_FAILED
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for path, reason in failed:
        print(f"skipped {path}: {reason}", file=sys.stderr)
    params = {"method": exp.method, "model": loaded.name, "image": args.image, **exp.params}
    if out.suffix.lower() == ".png":
        from PIL import Image

        Image.fromarray(render(exp, args.cmap)).save(out)
    else:
        from .core.analysis.export import write_result

        write_result(out, exp.array, params, exp.extra)
    print(f"{exp.method}: array {tuple(exp.array.shape)} -> {out}", file=sys.stderr)
    return EXIT_SOME_FAILED if failed else EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
