"""`vitstudio concepts FOLDER --model M --out FILE`: a sparse autoencoder on the patch tokens of one block of the
folder's images (the Concepts tab's twin). Under `torchrun --nproc-per-node N -m vitstudio concepts …` the processes
share the images while the tokens are collected; rank 0 trains and writes.

An interrupted run (Ctrl+C) keeps FILE.partial: the same command resumes it. Then:
    vitstudio explain IMG --model M --method concept --concepts FILE --concept N --out DIR
    vitstudio predict IMG --model M --concepts FILE [--ablate N,N] [--scale N=F]
"""

from __future__ import annotations

import json
import sys

from .common import (
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    add_config_options,
    add_model_args,
    add_ray_arg,
    existing,
    load_model_from_args,
)


def register(subparsers) -> None:
    from ..core.concepts.settings import ConceptSettings
    from ..core.train.schema import settings_of

    p = subparsers.add_parser("concepts", help="learn concepts (a sparse autoencoder) on a folder's patch tokens")
    p.add_argument("paths", nargs="+", type=existing, help="image files and/or folders (searched recursively)")
    add_model_args(p)
    add_config_options(p, settings_of(ConceptSettings))
    p.add_argument("--out", required=True, metavar="FILE", help="write FILE.safetensors (the SAE, loadable by "
                   "overcomplete's TopKSAE) and FILE.json (model, block, normalisation, data, every concept)")
    p.add_argument("--json", action="store_true", help="print every concept: index, how often and on how many "
                   "images it fires, its top images")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    add_ray_arg(p)
    p.set_defaults(handler=concepts_cmd)


def _settings(args):
    from dataclasses import fields

    from ..core.concepts.settings import ConceptSettings

    given = {f.name: getattr(args, f.name) for f in fields(ConceptSettings) if getattr(args, f.name) is not None}
    settings = ConceptSettings(**given)
    settings.check()
    return settings


def concepts_cmd(args) -> int:
    from ..core.concepts.concepts_file import writable_target
    from ..core.concepts.learn import learn_concepts
    from ..core.distributed import device_for, finish, init_distributed
    from ..core.files import not_regular
    from .common import drain

    try:
        settings = _settings(args)
        what = not_regular(args.out)
        if what:  # /dev/null: its FILE.json would be written beside it, in /dev
            raise ValueError(f"--out {args.out} is {what}, not a file name: concepts writes FILE.safetensors and "
                             f"FILE.json")
        writable_target(args.out)  # '' (it wrote ..safetensors here), a folder named FILE.safetensors
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    info = init_distributed()
    args.device = device_for(info, args.device)
    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    try:
        result = drain(learn_concepts(loaded, args.paths, settings, args.out, info=info),
                       args.quiet or not info.main)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finish(info)
    if result is None:
        return EXIT_OK
    return _report(args, result)


def _report(args, result) -> int:
    from ..core.concepts.learn import poor_fit_warning
    from ..core.files import counted, shown_path

    tokens, training = result.tokens, result.training
    for path, reason in tokens.errors:
        print(f"{shown_path(path)}: {reason}", file=sys.stderr)
    if result.path is None:
        print("Stopped; the same command resumes it.", file=sys.stderr)
        return EXIT_SOME_FAILED
    resumed = f", resumed at step {training.resumed_from}" if training.resumed_from else ""
    print(f"{counted(len(tokens.paths), 'image')} ({tokens.computed} read, the rest from the cache), "
          f"{len(tokens.paths) * tokens.patches} tokens of block {result.concepts.layer}: R² {training.r2:.3f}, "
          f"L0 {training.l0:.1f}, {training.dead} of {result.concepts.size} concepts dead{resumed}; wrote "
          f"{shown_path(result.path)} and its .json", file=sys.stderr)
    warning = poor_fit_warning(result.concepts)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        rows = [{k: c[k] for k in ("index", "frequency", "images", "top_images")}
                for c in result.concepts.stats["concepts"]]
        print(json.dumps({"concepts": rows}))
    return EXIT_SOME_FAILED if tokens.errors else EXIT_OK
