"""`vitstudio embed | sort | audit`: a whole folder through the model, over the same core as the app's folder view.

embed  SRC… --model M [--out FILE.npz]             pooled features + logits of every image (cached; prints counts);
                                                   under `torchrun --nproc-per-node N -m vitstudio embed …` the
                                                   processes share the files (so does `predict`)
sort   SRC… --model M --out DIR [--move] [--min-confidence P] [--dry-run] | sort --resume LOG
undo-sort DIR|LOG                                  reverse the newest sort into DIR (or the sort LOG records)
audit  DATA --model M [--json] [--threshold T] [--hash-distance B] [--top N]
                                                   duplicates, leaks across train/val, doubtful labels
"""

from __future__ import annotations

import os
import sys

from ..core.fields import NOT_NEGATIVE, PROBABILITY, Range
from ..core.files import counted, shown_path
from .common import (
    BATCH_SIZE,
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    NO_IMAGES,
    add_decoder_arg,
    add_model_args,
    add_ray_arg,
    add_view_arg,
    apply_view,
    checked,
    drain,
    existing,
    has_images,
    load_model_from_args,
    print_fit,
    print_ignored,
    print_left_out,
)
from .register_option import add_registers_arg, registers_for


def register(subparsers) -> None:
    p = subparsers.add_parser("embed", help="pooled features and logits of every image of folders (cached per model)")
    p.add_argument("paths", nargs="+", type=existing, help="image files and/or folders (searched recursively)")
    add_model_args(p)
    p.add_argument("--out", help="also write them to FILE.npz (paths, features, logits, labels)")
    add_registers_arg(p)
    p.add_argument("--batch-size", **BATCH_SIZE)
    add_decoder_arg(p)
    add_view_arg(p)
    add_ray_arg(p)
    p.add_argument("--quiet", action="store_true", help="no progress messages")

    p.set_defaults(handler=embed_cmd)

    p = subparsers.add_parser("sort", help="copy (or move) images into OUT/<predicted class>/ folders")
    p.add_argument("paths", nargs="*", type=existing, help="image files and/or folders (searched recursively)")
    add_model_args(p)
    p.add_argument("--out", help="folder to sort into (created; not inside a source folder); files there are never "
                                 "overwritten; an interrupted sort into it is resumed; its undo log is kept in the "
                                 "app's data folder (`vitstudio undo-sort OUT` finds it)")
    p.add_argument("--move", action="store_true", help="move instead of copy (the default keeps the originals)")
    p.add_argument("--min-confidence", type=checked(float, PROBABILITY), default=0.0,
                   help="below this top-1 probability an image goes to OUT/unsure/ (default 0: never)")
    p.add_argument("--dry-run", action="store_true", help="print what would go where, touch nothing")
    p.add_argument("--labels", metavar="FILE.csv", help="also sort every image a labels file (path,label rows) "
                                                         "lists, labelled or not")
    p.add_argument("--resume", metavar="LOG", help="finish an interrupted sort from its log (no model needed)")
    add_view_arg(p)
    p.add_argument("--batch-size", **BATCH_SIZE)
    p.add_argument("--quiet", action="store_true", help="no progress messages")

    p.set_defaults(handler=sort_cmd)

    p = subparsers.add_parser("undo-sort", help="reverse a sort from its log (copies deleted, moved files put back)")
    p.add_argument("log", metavar="OUT|LOG", help="the folder sorted into (its newest sort not yet undone), or a "
                                                  "vitstudio-sort-*.jsonl log")

    p.set_defaults(handler=undo_sort_cmd)

    p = subparsers.add_parser("audit", help="dataset health: exact/near duplicates, train/val leaks, doubtful labels")
    p.add_argument("data_dir", nargs="?", type=existing, help="a folder of class folders (optionally train/ and val/)")
    p.add_argument("--labels", metavar="FILE.csv", help="a labels file (path,label rows): alone, the images it "
                   "lists; with DATA_DIR, labels given apart from its folders (the app's Labels tab keeps them in "
                   "the data folder), reviewed instead of the folder each file is in")
    add_model_args(p)
    p.add_argument("--threshold", type=checked(float, Range(-1, 1)), default=None,
                   help="feature cosine at or above which the model counts two images as near-duplicates "
                        "(default: calibrated on the folder, 10x closer than the median nearest neighbour)")
    p.add_argument("--hash-distance", type=checked(int, Range(0, 64)), default=None,
                   help="perceptual-hash bits (of 64) within which the hash counts two images as near-duplicates "
                        "(default 10, measured on real photos; a near pair needs two signals to agree)")
    p.add_argument("--json", action="store_true", help="the whole report as one strict JSON document")
    p.add_argument("--top", type=checked(int, NOT_NEGATIVE), default=20,
                   help="groups and doubtful labels listed (default 20)")
    add_view_arg(p)
    add_ray_arg(p)
    p.add_argument("--batch-size", **BATCH_SIZE)
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    p.set_defaults(handler=audit_cmd)


def _embedded(args, loaded):
    from ..core.folder.embedcache import embed_folder

    ignored: list = []
    result = drain(embed_folder(loaded, args.paths, args.batch_size, decoder=getattr(args, "decoder", "auto"),
                                 ignored=ignored), args.quiet)
    print_ignored(ignored)
    return result


def _embedded_sharded(args, loaded, info):
    """Under torchrun: the new files shared among the processes, rank 0 caches and returns them (others None)."""
    from ..core.data.images import expand_paths
    from ..core.folder.sharded import embed_sharded

    files = [str(p) for p in expand_paths(args.paths)]
    return drain(embed_sharded(loaded, files, info, args.batch_size), args.quiet or not info.main)


def embed_cmd(args) -> int:
    import numpy as np

    from ..core.distributed import device_for, finish, init_distributed

    if not apply_view(args, "paths"):
        return EXIT_USAGE
    if not has_images(args.paths):
        print(f"error: {NO_IMAGES}", file=sys.stderr)
        return EXIT_USAGE
    info = init_distributed()  # under torchrun: the processes share the files, rank 0 writes
    args.device = device_for(info, args.device)
    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    if args.registers:
        return _embedded_with_register(args, loaded, info)
    result = _embedded_sharded(args, loaded, info) if info.enabled else _embedded(args, loaded)
    finish(info)
    if result is None:  # not rank 0
        return EXIT_OK
    for path, reason in result.errors:
        print(f"{shown_path(path)}: {reason}", file=sys.stderr)
    print(f"{counted(len(result.paths), 'image')} embedded ({result.computed} computed, "
          f"{len(result.paths) - result.computed} from the cache), {len(result.errors)} unreadable", file=sys.stderr)
    print_fit(loaded, result, args.paths)
    if args.out:
        np.savez(args.out, paths=np.asarray(result.paths), features=result.features_of(),
                 logits=np.asarray(result.logits[result.rows]), labels=np.asarray(result.labels))
        print(f"wrote {args.out}", file=sys.stderr)
    return EXIT_SOME_FAILED if result.errors else EXIT_OK


def _embedded_with_register(args, loaded, info) -> int:
    """--registers: every image's pooled features and logits on the model with the test-time register, computed in
    this process (the embedding cache keeps the plain model's) and written to --out."""
    import numpy as np

    from ..core.analysis.embeddings import pooled_features
    from ..core.inference import decoded_batches

    if not args.out or info.enabled or getattr(args, "ray", None) is not None:
        print("error: --registers embeds in this process into --out FILE.npz (the cache keeps the plain model's "
              "features): give --out, without torchrun or --ray", file=sys.stderr)
        return EXIT_USAGE
    paths, features, logits, errors = [], [], [], []
    try:
        with registers_for(args, loaded):
            for batch in decoded_batches(loaded, args.paths, args.batch_size, decoder=args.decoder):
                errors += batch.errors
                if batch.tensor is not None:
                    pooled, scores = pooled_features(loaded, batch.tensor)
                    features.append(pooled)
                    logits.append(scores)
                    paths += [path for path, _, error in batch.items if error is None]
    except ValueError as exc:  # a register file that is not one, or does not fit the model
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for path, reason in errors:
        print(f"{shown_path(path)}: {reason}", file=sys.stderr)
    if paths:
        np.savez(args.out, paths=np.asarray(paths), features=np.concatenate(features),
                 logits=np.concatenate(logits), labels=np.asarray(loaded.labels))
        print(f"{counted(len(paths), 'image')} embedded with the test-time register of "
              f"{shown_path(args.registers)}; wrote {args.out}", file=sys.stderr)
    return EXIT_SOME_FAILED if errors else EXIT_OK


def sort_cmd(args) -> int:
    from ..core.folder.journal import JournalBusy
    from ..core.folder.sorting import NestedFoldersError, apply_sort, check_out_folder, plan_sort, run_sort

    if args.resume:  # file operations only: no torch to import (a resume starts in ~0.1 s, not ~4 s)
        try:
            return _report_sort(run_sort(args.resume), ())
        except (OSError, ValueError, KeyError) as exc:
            print(f"error: cannot resume from {args.resume}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    from ..core.inference import NoClassifierHead, require_classifier

    listed: list[str] = []
    if args.paths and not apply_view(args, "paths"):
        return EXIT_USAGE
    if args.labels:
        listed = _listed_images(args.labels)
        if listed is None:
            return EXIT_USAGE
        args.paths = [*args.paths, *listed]
    if not args.paths or not args.out or not args.model:  # never the demo by default: a sort files the user's images
        print("error: give the images or folders to sort, --model and --out (or --resume LOG)", file=sys.stderr)
        return EXIT_USAGE
    try:  # the folders a labels file lists images in are sources too: the output may not be inside them
        check_out_folder([*args.paths, *sorted({os.path.dirname(p) for p in listed})], args.out)
    except NestedFoldersError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    loaded = load_model_from_args(args)  # an emptied source is no error: a sort into OUT that moved it all resumes
    if loaded is None:
        return EXIT_USAGE
    try:
        require_classifier(loaded)  # sorting goes by predicted class: a headless model has none
    except NoClassifierHead as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    result = _embedded(args, loaded)
    probs = result.probabilities()
    top = probs.argmax(1)
    plan = plan_sort([(p, loaded.labels[t], float(probs[i, t])) for i, (p, t) in enumerate(zip(result.paths, top))],
                     args.out, args.min_confidence, args.move)
    print(plan.describe(), file=sys.stderr)
    print_fit(loaded, result, args.paths)  # before any file is filed into classes that may mean nothing here
    print_left_out(result.errors)
    if args.dry_run:
        for p in plan.placements:
            print(f"{shown_path(p.source)} -> {shown_path(p.target)}")
        return EXIT_SOME_FAILED if result.errors else EXIT_OK  # as the sort itself would end
    try:
        return _report_sort(apply_sort(plan), result.errors)
    except JournalBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _listed_images(labels: str) -> list[str] | None:
    """Every image a labels file lists (None after printing why it cannot be read)."""
    from ..core.data.datasets import DatasetError
    from ..core.data.labels_file import read_labels_file

    try:
        return [str(p) for p, _ in read_labels_file(labels).rows]
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def _report_sort(done, read_errors) -> int:
    for path, reason in done.errors:
        print(f"{shown_path(path)}: {reason}", file=sys.stderr)
    print(done.describe(), file=sys.stderr)
    return EXIT_SOME_FAILED if done.errors or read_errors else EXIT_OK


def undo_sort_cmd(args) -> int:
    from ..core.folder.undo import journal_for, undo_sort

    try:
        result = undo_sort(journal_for(args.log))
    except OSError as exc:  # said in words: "PATH: why", not "[Errno 2] …"
        print(f"error: {shown_path(exc.filename)}: {exc.strerror}" if exc.filename else f"error: {exc}",
              file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for path, reason in result.problems:
        print(f"{shown_path(path)}: {reason}", file=sys.stderr)
    print(result.describe(), file=sys.stderr)
    return EXIT_SOME_FAILED if result.problems else EXIT_OK


def audit_cmd(args) -> int:
    """Exit 0, or 1 when files could not be read (listed in the report), 2 on a usage error."""
    from ..core.data.datasets import DatasetError
    from ..core.folder.audit import audit
    from ..core.folder.duplicates import HASH_DISTANCE

    if not (args.data_dir or args.labels):
        print("error: give DATA_DIR, --labels FILE.csv, or both", file=sys.stderr)
        return EXIT_USAGE
    if not apply_view(args, "data_dir", dataset=True):
        return EXIT_USAGE
    given_apart = None
    if args.data_dir and args.labels:  # the labels over the folders, as the Folder tab's review reads them
        from ..core.train.labelling import load_labels

        try:
            given_apart = load_labels(args.labels)
        except DatasetError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    args.data_dir = args.data_dir or args.labels  # a labels file alone scans like a folder of class folders
    hash_distance = HASH_DISTANCE if args.hash_distance is None else args.hash_distance
    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    try:
        report = drain(audit(args.data_dir, loaded, args.threshold, args.batch_size,
                              hash_distance=hash_distance, given_apart=given_apart), args.quiet)
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for line in (report.fit or {}).get("warnings", ()):  # the fit is in the JSON too ("model_fit")
        print(f"warning: {line}", file=sys.stderr)
    print(report.to_json() if args.json else report.describe(args.top))
    return EXIT_SOME_FAILED if report.errors else EXIT_OK
