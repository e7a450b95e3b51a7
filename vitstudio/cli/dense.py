"""`vitstudio segment FOLDER --masks PAINTED --out DIR` (paint a few masks, segment the whole folder by retrieval from
one block's patch tokens) and `vitstudio match A B --points x,y;…` (a point of A found in B by the cosine similarity of
patch features): the dense tasks of `vitstudio.core.dense`, with no training.

Painted masks and the masks written: one PNG per image named by its file stem, each pixel a class index (0 = the
first class; 255 = not painted, or outside the crop the model sees), at the image's own size.
"""

from __future__ import annotations

import errno
import json
import os
import sys

from ..core.files import shown_path
from .common import EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, add_model_args, add_ray_arg, drain, load_model_from_args


def register(subparsers) -> None:
    from ..core.dense.settings import CAP_METHODS, DEFAULT_CAP, DEFAULT_K, DEFAULT_TEMPERATURE, FACETS

    p = subparsers.add_parser("segment", conflict_handler="resolve", help="segment every image of a folder from a "
                              "few painted masks (retrieval from a block's patch tokens, as Hummingbird)")
    p.add_argument("folder", help="the folder of images (searched recursively)")
    add_model_args(p)
    p.add_argument("--masks", required=True, metavar="PAINTED_DIR", help="one PNG per painted image, named by the "
                   "image's file stem, each pixel a class index (255 = not painted)")
    p.add_argument("--classes", dest="class_names", metavar="NAME,NAME…", help="the classes' names in index order "
                   "(default: background,object; class-N past two)")
    p.add_argument("--layer", type=int, help="the block whose patch tokens are compared (default: the last)")
    p.add_argument("--k", type=int, default=DEFAULT_K, help=f"neighbours per patch (default {DEFAULT_K})")
    p.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE,
                   help=f"softmax temperature of the neighbours' similarities (default {DEFAULT_TEMPERATURE})")
    p.add_argument("--cap", type=int, default=DEFAULT_CAP, help=f"most painted patches in the memory bank "
                   f"(default {DEFAULT_CAP:,}); beyond it a sample is kept, and the command says so")
    p.add_argument("--cap-method", choices=CAP_METHODS, default="random", help="how the bank is capped: random, "
                   "or farthest-point sampling (default random)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for one mask PNG per image (not inside "
                   "FOLDER unless --out-inside; a new or empty folder, or an earlier segment output, replaced whole "
                   "when this one is finished)")
    p.add_argument("--out-inside", action="store_true", help="allow --out inside FOLDER")
    p.add_argument("--json", action="store_true", help="one JSON line per image: its file, its mask, each class's "
                   "share of the pixels")
    p.add_argument("--coco", action="store_true", help="also write OUT/masks.coco.json: each image's classes as "
                   "COCO RLE")
    p.add_argument("--csv", action="store_true", help="also write OUT/areas.csv: each image's share of every class")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    add_ray_arg(p)
    p.set_defaults(handler=segment_cmd)

    m = subparsers.add_parser("match", help="find points of image A in image B by the similarity of patch features")
    m.add_argument("image_a", metavar="A", help="the image whose points are matched (points in its pixels)")
    m.add_argument("image_b", metavar="B", help="the image the points are found in")
    add_model_args(m)
    m.add_argument("--points", metavar="x,y;x,y", help="points in A's pixels (default: none, the mutual matches only)")
    m.add_argument("--layer", type=int, help="the block whose features are compared (default: the last)")
    m.add_argument("--facet", choices=FACETS, default="token", help="the block's output tokens, or its attention's "
                   "keys or queries (default token)")
    m.add_argument("--refine", action="store_true", help="sub-patch precision: the match is the highest pixel of "
                   "the similarity map upsampled bilinearly")
    m.add_argument("--mutual", type=int, default=10, metavar="N", help="the N most similar mutual nearest "
                   "neighbour pairs (default 10; 0: none)")
    m.add_argument("--json", action="store_true", help="the matches as one JSON document")
    m.set_defaults(handler=match_cmd)


def _settings(args):
    from ..core.dense.segment import SegmentSettings

    names = None
    if args.class_names is not None:
        names = tuple(n.strip() for n in args.class_names.split(","))
        if len(names) < 2 or not all(names) or len(set(names)) != len(names):
            raise ValueError(f"--classes names two or more different classes, comma-separated; not "
                             f"'{args.class_names}'")
    return SegmentSettings(names, args.layer, args.k, args.temperature, args.cap, args.cap_method)


def segment_cmd(args) -> int:
    from ..core.dense.segment import checked_out, segment_folder

    try:  # the arguments are checked before the model loads, the masks before any image is read
        if not os.path.isdir(args.folder):
            raise ValueError(f"{shown_path(args.folder)} is not a folder of images to segment")
        settings = _settings(args)
        settings.check()
        checked_out(args.out, args.folder, args.out_inside, args.masks)
        loaded = load_model_from_args(args)
        if loaded is None:
            return EXIT_USAGE
        result = drain(segment_folder(loaded, args.folder, args.masks, args.out, settings, args.out_inside,
                                      coco=args.coco, areas=args.csv), args.quiet)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # a place no folder can be made in (/proc/self/x, a read-only disk): one line
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise  # the entry's line for a full disk, exit 1
        print(f"error: could not write the masks into {shown_path(args.out)}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    return _segment_report(args, result)


def _segment_report(args, result) -> int:
    from ..core.files import counted, shown_path

    for path in result.exports:
        if not args.quiet:
            print(f"wrote {shown_path(path)}", file=sys.stderr)
    for path, reason in result.errors:
        print(f"{shown_path(path)}: {reason}", file=sys.stderr)
    if result.bank.note:
        print(f"note: {result.bank.note}", file=sys.stderr)
    if not args.quiet:
        print(f"{counted(len(result.images), 'image')} segmented into {', '.join(map(shown_path, result.classes))} "
              f"from {result.painted} painted "
              f"({len(result.bank):,} patches of block {result.layer}); masks in {shown_path(args.out)}",
              file=sys.stderr)
    if args.json:
        for record in result.records():
            print(json.dumps(record))
    return EXIT_SOME_FAILED if result.errors else EXIT_OK


def _points(text: str | None) -> list[tuple[float, float]]:
    if not text:
        return []
    points = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        try:
            x, y = (float(v) for v in part.split(","))
        except ValueError:
            raise ValueError(f"--points takes x,y pairs separated by ';' (e.g. \"12,40;100,7\"), not '{part}'") \
                from None
        points.append((x, y))
    return points


def match_cmd(args) -> int:
    from ..core.data.images import ImageReadError, read_image
    from ..core.dense.matching import facet_features, match_points, mutual_matches

    try:
        points = _points(args.points)
        if args.mutual < 0:
            raise ValueError(f"--mutual is how many mutual matches to list, 0 or more; not {args.mutual}")
        images = [read_image(args.image_a), read_image(args.image_b)]
        loaded = load_model_from_args(args)
        if loaded is None:
            return EXIT_USAGE
        a, b = facet_features(loaded, images, args.layer, args.facet)
        rows = match_points(a, b, points, args.refine)
    except (ValueError, ImageReadError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    mutual = mutual_matches(a, b, args.mutual) if args.mutual else []
    layer = loaded.token_depth - 1 if args.layer is None else args.layer
    if args.json:
        print(json.dumps({"layer": layer, "facet": args.facet, "points": rows, "mutual": mutual}))
        return EXIT_OK
    for row in rows:
        (x, y), (mx, my) = row["point"], row["match"]
        print(f"{x:g},{y:g} -> {mx:g},{my:g}  similarity {row['similarity']:.4f}")
    for pair in mutual:
        print(f"mutual {pair['a'][0]:g},{pair['a'][1]:g} <-> {pair['b'][0]:g},{pair['b'][1]:g}  similarity "
              f"{pair['similarity']:.4f}")
    return EXIT_OK
