"""`vitstudio teach PROJECT [--model M] [--recipe quick|teachable-machine] [--export DIR] [--json]`: a head taught on
a Teach project (or any folder of class subfolders) from its cached features, its per-class accuracy on Teachable
Machine's 15 % split, and, with --export, the model written as a timm run folder, ONNX and the seed format, each run
on every sample and checked against the app's prediction (core/teach/)."""

from __future__ import annotations

import errno
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
    load_model_from_args,
    print_left_out,
)

FULL_DISK = (errno.ENOSPC, errno.EDQUOT)  # as cli/app.py's (a command module imports no other)


def register(subparsers) -> None:
    p = subparsers.add_parser("teach", help="teach a head on a Teach project or class folders (Teachable Machine's "
                                            "loop), report per-class validation accuracy, export proven equal")
    p.add_argument("project", help="a Teach project folder (settings.json + images/<class>/) or any folder of class "
                                    "subfolders; it is only read")
    add_model_args(p)
    p.add_argument("--recipe", choices=["quick", "teachable-machine"],
                   help="the head: quick (a linear head, L-BFGS; the default) or teachable-machine (its Dense 100 → "
                        "softmax, Adam 1e-3, 50 epochs, batch 16: for comparison, not exported) (default: the "
                        "project's setting)")
    p.add_argument("--export", metavar="DIR", help="write DIR/run (plain timm), DIR/model.onnx and DIR/seed, run each "
                                                   "on every sample and check it against the app (DIR/check.json); "
                                                   "DIR is new, empty or an earlier export, replaced whole at the end")
    p.add_argument("--json", action="store_true", help="one JSON document: the figures and the export check")
    p.add_argument("--batch-size", type=COUNT, default=32, help="images per forward pass (default 32)")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    p.set_defaults(handler=teach_cmd)


def teach_cmd(args) -> int:
    from ..core.teach.project import open_project
    from ..core.teach.session import check_teachable, teach

    try:
        project = open_project(args.project)
        project.check_trainable()
        if args.export:
            from ..core.teach.export import check_export_folder

            check_export_folder(args.export, [], project.root)  # said before the model loads
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    why = _choose_model(args, project.settings)
    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    recipe = args.recipe or project.settings.recipe
    if args.export and recipe != "quick":
        print(f"error: the {recipe} recipe's two-layer head has no place in a timm ViT's head: export with "
              f"--recipe quick", file=sys.stderr)
        return EXIT_USAGE
    try:
        check_teachable(loaded)
        weights = f" with weights {shown_path(args.weights)}" if args.weights else ""
        print(f"model: {loaded.display_name}{weights} ({why})", file=sys.stderr)  # after every refusal: one line
        features, result = drain(teach(loaded, project, recipe, args.batch_size), args.quiet)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    skipped = [*project.skipped, *features.errors]
    print_left_out(skipped)
    exported = None
    if args.export:
        from ..core.teach.export import export_taught

        try:
            exported = export_taught(loaded, result, args.export, project=project.root)
        except ValueError as exc:  # the folder changed while teaching, or another export holds it now
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except OSError as exc:  # a place no folder can be made in (/proc/self/x, a read-only disk): one line
            if exc.errno in FULL_DISK:
                raise  # the entry's line for a full disk, exit 1
            print(f"error: could not write the export into {shown_path(args.export)}: {exc.strerror or exc}",
                  file=sys.stderr)
            return EXIT_USAGE
    if args.json:
        print(json.dumps(_figures(project, loaded, why, features, result, exported, skipped), indent=1))
    else:
        _report(loaded, features, result, exported)
    return EXIT_SOME_FAILED if skipped or (exported is not None and not exported.equal) else EXIT_OK


def _choose_model(args, settings) -> str:
    """The model to teach with, set on `args`, and why: --model, else the one the project was taught with, else the
    bundled demo."""
    if args.model:
        return "--model"
    if settings.model:
        args.model = settings.model
        args.weights = args.weights or settings.weights
        return "recorded in the project"
    return "no model recorded: the bundled demo"


def _report(loaded, features, result, exported) -> None:
    counts = {c: int((result.labels == i).sum()) for i, c in enumerate(result.classes)}
    print(f"{loaded.display_name}, {result.head.recipe} head fitted in {result.fit_seconds:.2f} s on "
          f"{counted(len(result.split.train), 'sample')} ({features.computed} embedded now, the rest from the "
          f"cache); validation: {counted(len(result.split.val), 'sample')} (15 % of each class, rounded up, whole "
          f"recordings and near-duplicate groups)")
    held_out = result.held_out()
    for name, accuracy in result.per_class_accuracy().items():
        shown = "—" if accuracy is None else f"{accuracy:.1%}"
        print(f"{shown_path(name)}\t{shown} of {held_out[name]} held out ({counted(counts[name], 'sample')})")
    print(f"validation accuracy {result.val_accuracy:.1%}")
    if result.validation_note():
        print(f"note: {shown_path(result.validation_note())}")
    for path, true, predicted in result.wrong():
        print(f"wrong: {shown_path(path)} is {shown_path(true)}, predicted {shown_path(predicted)}", file=sys.stderr)
    advice = result.record_next()
    if advice:
        print(f"record more of {shown_path(advice[0])}: its held-out samples are taken for {shown_path(advice[1])}")
    if exported is not None:
        _print_export(exported)


def _print_export(exported) -> None:
    if exported.ood_bank:
        print(f"export ood bank: {', '.join(shown_path(p) for p in exported.ood_bank)} (predict --model says whether "
              f"an image is like the taught samples)")
    else:
        print(f"export ood bank: not written: {exported.no_ood_bank}")
    for check in exported.checks:
        if check.not_checked:
            print(f"export {check.artefact}: not written: {check.not_checked}")
        elif check.equal:
            print(f"export {check.artefact}: {check.path} predicts as the app on all {check.samples} samples "
                  f"(same top-1, max |Δp| {check.max_abs_diff:.1e})")
        else:
            print(f"export {check.artefact}: {check.path} differs from the app on {len(check.differing)} of "
                  f"{check.samples} samples")
            for sample, why in check.differing:
                print(f"differs: {shown_path(sample)} ({check.artefact}): {why}", file=sys.stderr)


def _figures(project, loaded, why, features, result, exported, skipped) -> dict:
    return {"project": str(project.root), "model": loaded.name, "model_from": why, "recipe": result.head.recipe,
            "classes": list(result.classes),
            "samples": {c: int((result.labels == i).sum()) for i, c in enumerate(result.classes)},
            "train": len(result.split.train), "val": len(result.split.val), "val_accuracy": result.val_accuracy,
            "per_class_accuracy": result.per_class_accuracy(), "confusion": result.confusion.tolist(),
            "validation_note": result.validation_note() or None,
            "wrong": [{"path": p, "true": t, "predicted": k} for p, t, k in result.wrong()],
            "record_next": list(result.record_next() or []),
            "fit_seconds": result.fit_seconds, "embedded_now": features.computed,
            "skipped": [{"path": p, "reason": r} for p, r in skipped],
            "export": exported.to_json() if exported is not None else None}

