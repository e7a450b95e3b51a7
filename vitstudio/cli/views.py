"""`vitstudio views FOLDER` (the saved views of a folder: list, save, delete) and `vitstudio tag FOLDER IMAGE…`
(tags per image): kept in the app's records of the folder, never in it (core/folder/views.py). `--view NAME` on
predict, embed, sort, explain, audit and finetune restricts them to the images a view selects now."""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path

from ..core.files import counted
from .common import EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, add_model_args, drain, load_model_from_args, view_model

FULL_DISK = (errno.ENOSPC, errno.EDQUOT)  # as cli/app.py's (a command module imports no other)


def register(subparsers) -> None:
    p = subparsers.add_parser("views", help="list, save or delete the saved views of a folder (filter rules over "
                              "tags, class folders and paths; kept in the app's data folder, not in the folder)")
    p.add_argument("folder", help="the image folder")
    p.add_argument("--json", action="store_true", help="the views as one JSON object (name: rules, images)")
    p.add_argument("--save", metavar="NAME", help="save a view of the rules given by the options below (all must "
                   "hold); it selects what matches each time it is used, not a fixed list")
    p.add_argument("--tags", metavar="A[,B…]", help="with --save: images with any of these tags")
    p.add_argument("--all-tags", metavar="A[,B…]", help="with --save: images with all of these tags")
    p.add_argument("--not-tags", metavar="A[,B…]", help="with --save: images with none of these tags")
    p.add_argument("--label", metavar="A[,B…]", help="with --save: images in these class folders")
    p.add_argument("--path", metavar="GLOB", help="with --save: images whose path in the folder matches (cats/*.jpg)")
    p.add_argument("--delete", metavar="NAME", help="delete the saved view NAME")
    e = p.add_argument_group("exporting a view's images")
    e.add_argument("--export", metavar="NAME", help="the view whose images --out or --labels-csv export")
    e.add_argument("--out", metavar="DIR", help="with --export: copy them into DIR/<class folder>/ (images outside "
                   "a class folder into DIR/unlabelled/), journalled: `vitstudio undo-sort DIR` reverses it")
    e.add_argument("--move", action="store_true", help="with --out: move instead of copy")
    e.add_argument("--labels-csv", metavar="FILE", help="with --export: write a labels file of them (path, class "
                   "folder), which finetune, audit and eval take as a dataset")
    e.add_argument("--csv", metavar="FILE", help="with --export: a CSV of every column for them (path, file, class "
                   "folder, tags; with --model, the prediction, confidence, margin, correctness and the brain's "
                   "scores among the view's images too), spreadsheet-safe, UTF-8 with a byte-order mark")
    e.add_argument("--coco", metavar="FILE", help="with --export and --masks: their masks as COCO JSON (RLE), "
                   "segmented from the painted masks as `vitstudio segment` segments (the model: --model)")
    e.add_argument("--masks", metavar="PAINTED_DIR", help="with --coco: the painted masks (one PNG per painted image "
                   "of the folder, named by its stem, as `vitstudio segment --masks` takes)")
    add_model_args(e)
    p.set_defaults(handler=views_cmd)

    t = subparsers.add_parser("tag", help="add or remove tags on images of a folder (several per image; kept in the "
                              "app's data folder, not in the folder)")
    t.add_argument("folder", help="the image folder")
    t.add_argument("images", nargs="+", help="images of the folder (or subfolders of it: every image inside)")
    t.add_argument("--add", metavar="A[,B…]", help="tag names to add")
    t.add_argument("--remove", metavar="A[,B…]", help="tag names to remove")
    t.set_defaults(handler=tag_cmd)


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def _rules(args) -> list[dict]:
    rules = [{"field": "tags", "op": op, "value": _names(text)}
             for op, text in (("any", args.tags), ("all", args.all_tags), ("none", args.not_tags)) if text]
    if args.label:
        rules.append({"field": "label", "op": "in", "value": _names(args.label)})
    if args.path:
        rules.append({"field": "path", "op": "glob", "value": args.path})
    return rules


def _folder(path: str) -> str | None:
    if not Path(path).is_dir():
        print(f"error: {path} is not a folder", file=sys.stderr)
        return None
    return path


def views_cmd(args) -> int:
    from ..core.folder import views

    if _folder(args.folder) is None:
        return EXIT_USAGE
    rules = _rules(args)
    if args.export:
        return _export(args)
    if rules and not args.save:
        print("error: --tags, --all-tags, --not-tags, --label and --path describe a view to --save NAME",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.save:
            if not rules:
                raise ValueError("give the view's rules: --tags, --all-tags, --not-tags, --label and/or --path")
            views.save_view(args.folder, args.save, rules)
        if args.delete:
            views.delete_view(args.folder, args.delete)
        listed = _listed(args, views.read_views(args.folder))
        if listed is None:
            return EXIT_USAGE
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(listed))
        return EXIT_OK
    if not listed:
        print("no saved views (save one with --save NAME and its rules)")
    for name, view in listed.items():
        rules = "; ".join(f"{r['field']} {r['op']} {r['value']}" for r in view["rules"])
        count = (counted(view["images"], "image") if view["images"] is not None else
                 f"images counted with {view['needs']}")
        print(f"{name}: {count} ({rules})")
    return EXIT_OK


def _listed(args, saved: dict[str, list[dict]]) -> dict[str, dict] | None:
    """Each view's rules and how many images it selects now; a view with rules on the model's columns is counted with
    --model's model, and without one says what it needs ("images": null). The folder, its records and the model's
    columns are read once for all the views (per view, a listing of 300,000 views re-read a 41 MB views.json
    300,000 times)."""
    from ..core.data.images import expand_paths
    from ..core.folder import view_select, views

    if not saved:
        return {}
    files = list(expand_paths([args.folder]))
    columns = view_select.file_columns(args.folder, files)
    kept = views.saved_models(args.folder)
    if args.model and any(views.model_fields(rules) for rules in saved.values()):
        loaded = load_model_from_args(args)  # a listing loads no model it was not given
        if loaded is None:
            return None  # its error printed
        columns |= view_select.model_columns(loaded, args.folder, files)
    listed = {}
    for name, rules in saved.items():
        needed = views.model_fields(rules)
        if needed and "prediction" not in columns:
            also = f"; saved with {kept[name][0]}, which --view uses" if name in kept else ""
            listed[name] = {"rules": rules, "images": None, "needs": f"--model (rules on {', '.join(needed)}{also})"}
        else:
            listed[name] = {"rules": rules, "images": int(view_select.selected(rules, columns).sum())}
    return listed


def tag_cmd(args) -> int:
    from ..core.data.images import expand_paths
    from ..core.folder.views import tag

    if _folder(args.folder) is None:
        return EXIT_USAGE
    add, remove = _names(args.add), _names(args.remove)
    if not add and not remove:
        print("error: give --add and/or --remove with tag names", file=sys.stderr)
        return EXIT_USAGE
    images = list(expand_paths(args.images))
    missing = [str(p) for p in images if not p.is_file()]
    if missing:
        print(f"error: {missing[0]} is not an image file" + (f" (and {len(missing) - 1} more)" if missing[1:] else ""),
              file=sys.stderr)
        return EXIT_USAGE
    try:
        tags = tag(args.folder, images, add, remove)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{counted(len(images), 'image')} tagged; {counted(len(tags), 'image')} of the folder "
          f"{'has' if len(tags) == 1 else 'have'} tags", file=sys.stderr)
    return EXIT_OK


def _export(args) -> int:
    """--export NAME: its images copied (or moved) into --out by class folder, journalled as a sort, and/or their
    labels file written to --labels-csv, every column to --csv, their masks to --coco."""
    from ..core.folder import selection_export, view_select
    from ..core.folder.selection_export import write_labels_csv
    from ..core.folder.sorting import NestedFoldersError, apply_sort, check_out_folder, plan_sort

    if not (args.out or args.labels_csv or args.csv or args.coco) or (args.move and not args.out) or \
            bool(args.coco) != bool(args.masks):
        print("error: --export NAME needs --out DIR, --labels-csv FILE, --csv FILE and/or --coco FILE (--move goes "
              "with --out, --masks with --coco)", file=sys.stderr)
        return EXIT_USAGE
    try:
        loaded = _export_model(args)
        if loaded is False:
            return EXIT_USAGE
        files = view_select.view_files(args.folder, args.export, view_model(args, args.folder, args.export))
        if args.out:
            check_out_folder([args.folder], args.out)
        _refuse_onto_inputs(args)
        documents = _export_tables(args, files, loaded)  # computed first: a refusal leaves no file written
        if args.labels_csv:
            write_labels_csv(args.labels_csv, [(str(f), view_select.label_of(args.folder, f)) for f in files])
        for path, data in documents:
            selection_export.write_whole(path, data)
    except (ValueError, NestedFoldersError, OSError) as exc:
        if getattr(exc, "errno", None) in FULL_DISK:
            raise  # the entry's one line for a full disk (cli/app.py), exit 1
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not args.out:
        written = ", ".join(f for f in (args.labels_csv, args.csv, args.coco) if f)
        print(f"wrote {written} ({counted(len(files), 'image')})", file=sys.stderr)
        return EXIT_OK
    labelled = [(str(f), view_select.label_of(args.folder, f) or "unlabelled", 1.0) for f in files]
    done = apply_sort(plan_sort(labelled, args.out, move=args.move))
    for path, reason in done.errors:
        print(f"{path}: {reason}", file=sys.stderr)
    print(done.describe(), file=sys.stderr)
    return EXIT_SOME_FAILED if done.errors else EXIT_OK


def _refuse_onto_inputs(args) -> None:
    """Each file --export writes is refused where it is (or is inside) the folder or the painted masks' folder."""
    from ..core.outputs import Input, refuse_onto_inputs

    inputs = [Input("the folder the view is of", args.folder),
              *([Input("the painted masks' folder", args.masks)] if args.masks else [])]
    for option, target in (("--labels-csv", args.labels_csv), ("--csv", args.csv), ("--coco", args.coco)):
        if target:
            refuse_onto_inputs(target, inputs, option)


def _export_model(args):
    """The model --coco segments with (and --csv predicts with, when --model is given); None when neither needs
    one; False once a refusal is printed. Loaded before the view is read: a model refused is said first."""
    if not args.coco and not (args.csv and args.model):
        return None
    loaded = load_model_from_args(args)
    return False if loaded is None else loaded


def _export_tables(args, files, loaded) -> list[tuple[str, bytes]]:
    """(file, its bytes) of --csv (every column: the files', and the model's prediction when it was given) and
    --coco (the view's images segmented from the painted masks)."""
    import json
    import os

    from ..core.data.images import expand_paths
    from ..core.folder import selection_export, view_select, views

    documents = []
    if args.csv:
        names = [str(f) for f in files]
        tags = views.read_tags(args.folder)
        if args.model:
            from ..core.folder.embedcache import embed_folder
            from ..core.folder.results import folder_results
            from ..core.folder.scores import NAMES, brain_scores, given_labels

            embedded = drain(embed_folder(loaded, names), quiet=True)
            results = folder_results(embedded, [args.folder])
            scores = brain_scores(embedded, given_labels(embedded.paths, [args.folder]))  # over the view's images
            rows = range(len(results))
            picked = [set(tags.get(views.relative(args.folder, results.paths[r]), ())) for r in rows]
            columns = selection_export.selection_columns(results, rows, picked, {},
                                                         extra={n: getattr(scores, n) for n in NAMES})
        else:
            columns = selection_export.file_columns(names, [view_select.label_of(args.folder, f) or "" for f in files],
                                                    [set(tags.get(views.relative(args.folder, f), ())) for f in files],
                                                    {})
        documents.append((args.csv, selection_export.csv_bytes(tuple(columns), selection_export.table_rows(columns))))
    if args.coco:
        from ..core.dense.export import coco_assembled, coco_masks
        from ..core.dense.painted import match_painted
        from ..core.dense.segment import segment_images

        painted = match_painted(args.masks, [str(p) for p in expand_paths([args.folder])])
        done = drain(segment_images(loaded, [str(f) for f in files], painted, keep=coco_masks), quiet=True)
        for path, reason in done.errors:
            print(f"{path}: {reason}", file=sys.stderr)
        named = [(os.path.relpath(path, args.folder), kept) for path, kept in done.images]
        document = coco_assembled(named, done.classes, f"view {args.export}: segmented by retrieval from "
                                                       f"{len(painted)} painted images, block {done.layer}")
        documents.append((args.coco, json.dumps(document).encode("utf-8")))
    return documents
