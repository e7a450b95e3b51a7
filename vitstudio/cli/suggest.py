"""`vitstudio suggest FOLDER… --model M [--labels FILE.csv] [--n N] [--json]`: the N unlabelled images whose labels
would teach a quick head most (core/train/suggest.py): the least sure of the head fitted on what the labels file
labels so far, spread over the feature space; the images that cover the feature space when nothing is labelled."""

from __future__ import annotations

import json
import sys

from ..core.files import counted, shown_path
from .common import (
    COUNT,
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    add_model_args,
    drain,
    existing,
    load_model_from_args,
    print_ignored,
    print_left_out,
)


def register(subparsers) -> None:
    p = subparsers.add_parser("suggest", help="the unlabelled images to label next (uncertain and diverse, or "
                                              "covering the folder when nothing is labelled)")
    p.add_argument("paths", nargs="+", type=existing, help="image files and/or folders (searched recursively)")
    add_model_args(p)
    p.add_argument("--labels", metavar="FILE.csv", help="the labels so far (path,label rows; unlabelled rows allowed); "
                                                         "without it nothing is labelled yet")
    p.add_argument("--n", type=COUNT, default=10, help="how many images to suggest (default 10)")
    p.add_argument("--json", action="store_true", help="one JSON document: the suggestions with their reasons")
    p.add_argument("--batch-size", type=COUNT, default=32, help="images per forward pass (default 32)")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    p.set_defaults(handler=suggest_cmd)


def _labelled(labels: str | None) -> dict[str, str]:
    """resolved path -> label of the labelled rows (empty without a labels file)."""
    from pathlib import Path

    from ..core.data.labels_file import read_labels_file

    if not labels:
        return {}
    return {str(Path(p).resolve()): label for p, label in read_labels_file(labels).labelled}


def suggest_cmd(args) -> int:
    from pathlib import Path

    import numpy as np

    from ..core.data.datasets import DatasetError
    from ..core.folder.embedcache import embed_folder
    from ..core.train.suggest import suggest

    try:
        known = _labelled(args.labels)
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    ignored: list = []
    # the labelled images teach the head even when they live outside the folders given
    embedded = drain(embed_folder(loaded, [*args.paths, *known], args.batch_size, ignored=ignored), args.quiet)
    print_ignored(ignored)
    print_left_out(embedded.errors)  # a labels file's rows among them, and the exit is 1
    first: dict[str, int] = {}  # a labelled image inside the folders was given twice: once is enough
    for row, path in enumerate(embedded.paths):
        first.setdefault(str(Path(path).resolve()), row)
    rows_kept = np.asarray(sorted(first.values()), np.int64)
    paths = [embedded.paths[r] for r in rows_kept]
    classes = sorted(set(known.values()))
    index = {c: i for i, c in enumerate(classes)}
    labels = np.asarray([index[known[r]] if r in known else -1 for r in (str(Path(p).resolve()) for p in paths)],
                        np.int64)
    picks = suggest(embedded.features_of(rows_kept), labels, args.n, len(classes) or None)
    rows = [{"path": paths[s.index], "reason": "uncertain" if s.margin is not None else "coverage",
             "margin": s.margin, "predicted": classes[s.predicted] if s.predicted is not None else None,
             "distance": s.distance} for s in picks]
    if args.json:
        print(json.dumps({"labelled": int((labels >= 0).sum()), "unlabelled": int((labels < 0).sum()),
                          "classes": classes, "suggestions": rows}, indent=1))
        return EXIT_SOME_FAILED if embedded.errors else EXIT_OK
    how = (f"least sure of a head on {counted(int((labels >= 0).sum()), 'labelled image')} "
           f"({counted(len(classes), 'class', 'classes')}), spread out"
           if len(classes) >= 2 else "nothing labelled in two classes yet: images that cover the folder")
    print(f"{len(rows)} of {counted(int((labels < 0).sum()), 'unlabelled image')} to label next ({how}):",
          file=sys.stderr)
    for row in rows:
        reason = (f"margin {row['margin']:.3f}, looks like {row['predicted']}" if row["reason"] == "uncertain"
                  else f"distance {row['distance']:.3f}")
        print(f"{shown_path(row['path'])}\t{reason}")
    return EXIT_SOME_FAILED if embedded.errors else EXIT_OK
