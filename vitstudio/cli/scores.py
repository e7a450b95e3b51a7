"""`vitstudio scores FOLDER --model M`: fiftyone-brain's uniqueness, representativeness, hardness and mistakenness of
every image (core/folder/scores.py), from the embedding cache (a folder embedded before runs no forward)."""

from __future__ import annotations

import json
import sys

from ..core.files import counted, shown_path
from .common import (
    BATCH_SIZE,
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    NO_IMAGES,
    add_model_args,
    add_ray_arg,
    drain,
    existing,
    has_images,
    load_model_from_args,
    print_ignored,
)

TOP = 10  # images listed per score without --json / --csv


def register(subparsers) -> None:
    p = subparsers.add_parser("scores", help="uniqueness, representativeness, hardness and mistakenness of every "
                              "image (fiftyone-brain's formulas, on the model's features and predictions)")
    p.add_argument("paths", nargs="+", type=existing, help="image files and/or folders (searched recursively); an "
                   "image's folder name is its given label (for mistakenness)")
    add_model_args(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object per image, one per line (a null score "
                     "with no value; mistakenness_note says why one is null)")
    out.add_argument("--csv", metavar="FILE", help="write a CSV: path, given, predicted and the four scores")
    p.add_argument("--batch-size", **BATCH_SIZE)
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    add_ray_arg(p)
    p.set_defaults(handler=scores_cmd)


def scores_cmd(args) -> int:
    from ..core.folder.embedcache import embed_folder
    from ..core.folder.model_fit import fit_of
    from ..core.folder.scores import embedded_scores

    if not has_images(args.paths):
        print(f"error: {NO_IMAGES}", file=sys.stderr)
        return EXIT_USAGE
    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    ignored: list = []
    embedded = drain(embed_folder(loaded, args.paths, args.batch_size, ignored=ignored), args.quiet)
    scores = drain(embedded_scores(loaded, embedded, args.paths), args.quiet)  # score_folder's two steps
    print_ignored(ignored)
    for path, reason in scores.errors:
        print(f"{shown_path(path)}: {reason}", file=sys.stderr)
    if not scores.paths:
        print("error: no readable image in the given paths", file=sys.stderr)
        return EXIT_SOME_FAILED
    rows = scores.rows()
    if scores.mistakenness_note:  # said whatever the output: a JSON reader sees null, a person sees why
        print(f"note: {scores.mistakenness_note}", file=sys.stderr)
    fit = fit_of(loaded, embedded, args.paths)
    unlike = fit.unlike() if fit is not None else None  # the class folders' mismatch: the note above says it
    if unlike:
        print(f"warning: {unlike}", file=sys.stderr)
    if args.json:
        for row, note in zip(rows, scores.mistakenness_notes()):
            row = {**row, "mistakenness_note": note} if note else row
            print(json.dumps({**row, "model_fit": unlike} if unlike else row))
    elif args.csv:
        _write_csv(rows, args.csv)
    else:
        _describe(rows, scores.mistakenness_note)
    return EXIT_SOME_FAILED if scores.errors else EXIT_OK


def _write_csv(rows: list[dict], path: str) -> None:
    from ..core.files import SafeCsvWriter, open_csv

    with open_csv(path) as fh:
        writer = SafeCsvWriter(fh)
        writer.writerow(list(rows[0]))
        for row in rows:
            writer.writerow(["" if v is None else (f"{v:.6f}" if isinstance(v, float) else v) for v in row.values()])


def _describe(rows: list[dict], unknown: str = "") -> None:
    from ..core.folder.scores import NAMES

    print(f"{counted(len(rows), 'image')}; the {TOP} highest of each score (--json or --csv for all):")
    for name in NAMES:
        scored = sorted((r for r in rows if r[name] is not None), key=lambda r: -r[name])[:TOP]
        if not scored:
            why = unknown if name == "mistakenness" and unknown else (
                "the model has no classes, or no image is in a class folder")
            print(f"{name}: none ({why})")
            continue
        print(f"{name}:")
        for r in scored:
            print(f"  {r[name]:.4f}  {shown_path(r['path'])}")
