"""`vitstudio predict`: classify images and folders (under torchrun the processes share the files)."""

from __future__ import annotations

import errno
import json
import os
import sys

from .common import (
    BATCH_SIZE,
    COUNT,
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    NO_IMAGES,
    add_decoder_arg,
    add_model_args,
    add_ray_arg,
    add_view_arg,
    apply_view,
    existing,
    load_model_from_args,
    print_ignored,
)
from .register_option import add_registers_arg, registers_for


def register(subparsers) -> None:
    p = subparsers.add_parser("predict", help="classify images and folders")
    p.add_argument("paths", nargs="+", type=existing, help="image files and/or folders (searched recursively; a "
                   "folder goes through the embedding cache, shared with embed, audit and the Folder tab: a second run "
                   "computes only new or changed files)")
    add_model_args(p)
    p.add_argument("--topk", type=COUNT, default=5, help="classes listed per image (default 5)")
    p.add_argument("--batch-size", **BATCH_SIZE)
    add_decoder_arg(p)
    add_ray_arg(p)
    add_view_arg(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object per input, one per line (with \"ood\": "
                     "unlike the model's training data, null when it cannot tell, and \"ood_score\": higher = less "
                     "like it)")
    out.add_argument("--csv", metavar="FILE", help="write a CSV (path, error, label/prob/index per rank)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_registers_arg(p)
    c = p.add_argument_group("concepts (a file from `vitstudio concepts`)")
    c.add_argument("--concepts", metavar="FILE", help="predict through the file's sparse autoencoder at its block "
                   "(alone: equal to plain predict, the SAE's error term is kept)")
    c.add_argument("--ablate", metavar="N[,N…]", help="switch these concepts off (with --concepts)")
    c.add_argument("--scale", metavar="N=F", action="append", help="scale concept N by F (repeatable; with "
                   "--concepts)")
    p.set_defaults(handler=predict_cmd)


def predict_cmd(args) -> int:
    from ..core.data.images import expand_paths

    folder_work = bool(args.view) or any(os.path.isdir(p) for p in args.paths)
    if not apply_view(args, "paths"):
        return EXIT_USAGE
    ignored: list = []
    files = list(expand_paths(args.paths, ignored=ignored))  # before torch: an empty folder is said at once
    print_ignored(ignored)
    if not files:
        print(f"error: {NO_IMAGES}", file=sys.stderr)
        return EXIT_USAGE
    if args.csv:
        from ..core.outputs import OutputRefused, refuse_file_onto_inputs

        try:
            refuse_file_onto_inputs(args.csv, args.paths, "--csv")
        except OutputRefused as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    from tqdm import tqdm

    from ..core.distributed import device_for, init_distributed
    from ..core.inference import require_classifier

    info = init_distributed()  # under torchrun: every process takes every N-th file, rank 0 writes
    args.device = device_for(info, args.device)
    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    require_classifier(loaded)  # a headless model: refused in one line (main) before any file is read
    try:
        through = _through_concepts(args, loaded)
        register = _with_registers(args, loaded)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from ..core.models.zeroshot import is_sigmoid

    if is_sigmoid(loaded) and not args.quiet:
        print("note: SigLIP-style zero-shot classes: each probability is a sigmoid of its own (yes/no per class), so "
              "they need not sum to 100%", file=sys.stderr)
    bar = tqdm(total=len(files), unit="img", file=sys.stderr, disable=args.quiet or len(files) <= 32 or not info.main)
    counts = {"all": 0, "failed": 0}
    plain = _plain_top1(args, loaded, files) if args.registers and info.main else None
    with through, register:
        batches = _classify(args, loaded, files, info, bar, folder_work)
        if batches is None:
            return EXIT_OK
        _write(args, _shown(args, batches, counts, plain))
    bar.close()
    if counts["failed"]:
        from ..core.files import counted

        print(f"{counts['failed']} of {counted(counts['all'], 'input')} failed", file=sys.stderr)
    return EXIT_SOME_FAILED if counts["failed"] else EXIT_OK


def _shown(args, batches, counts: dict, plain: dict | None = None):
    """Every prediction, printed as its batch comes (--json, or the human lines without --csv) and counted; with
    --registers, beside each the plain model's top-1 (`plain`: path -> its record)."""
    for batch in batches:
        for pred in batch:
            without = plain.get(pred.path) if plain is not None and pred.ok else None
            if args.json:
                record = pred.to_json()
                if without is not None:
                    record["without_register"] = without
                print(json.dumps(record), flush=True)
            elif not args.csv:
                print(_human(pred) + (f"\n  without the register: {without['prob'] * 100:.2f}%  "
                                      f"{without['label']}  [{without['index']}]" if without is not None else ""))
            counts["all"] += 1
            counts["failed"] += not pred.ok
            yield pred


def _write(args, predictions) -> None:
    """Into the CSV as they come (a folder's predictions are never all held at once), or only shown."""
    if not args.csv:
        for _ in predictions:
            pass
        return
    from ..core.files import open_csv
    from ..core.inference import write_csv

    with open_csv(args.csv) as fh:
        write_csv(predictions, fh, args.topk)


def _through_concepts(args, loaded):
    """--concepts [--ablate/--scale]: every forward goes through the SAE's rewrite (or nothing changes)."""
    import contextlib

    if args.concepts and args.ray is not None:
        raise ValueError("--concepts rewrites every forward in this process: leave out --ray")
    if not args.concepts:
        if args.ablate or args.scale:
            raise ValueError("--ablate and --scale go with --concepts FILE")
        return contextlib.nullcontext()
    from ..core.concepts.intervene import intervening, parse_scales
    from ..core.concepts.maps import concepts_for

    concepts, scales = concepts_for(loaded, args.concepts), parse_scales(args.ablate, args.scale)
    for index in scales:
        concepts.check_index(index)
    return intervening(loaded, concepts, scales)


def _plain_top1(args, loaded, files) -> dict:
    """Each readable file's top-1 on the model without the register (one pass before the registered one): path ->
    {"index", "label", "prob"}."""
    from ..core.inference import classify_files

    return {pred.path: {"index": pred.indices[0], "label": pred.labels[0], "prob": pred.probs[0]}
            for batch in classify_files(loaded, files, topk=1, batch_size=args.batch_size, decoder=args.decoder)
            for pred in batch if pred.ok}


def _with_registers(args, loaded):
    """--registers FILE: every forward runs with the test-time register (a RegisterError, a ValueError, when the
    file does not fit); on this process's model only, so not with --ray."""
    if args.registers and getattr(args, "ray", None) is not None:
        raise ValueError("--registers changes the model in this process: leave out --ray")
    if args.registers and args.concepts:
        raise ValueError("--registers and --concepts each rewrite the model's forward: give one of them")
    return registers_for(args, loaded)


def _classify(args, loaded, files, info, bar, folder_work: bool):
    """Batches of predictions in input order, or None on the ranks that do not write. A folder is predicted through
    the embedding cache (`core/folder/predictions.py`: a file seen before by any folder command runs no forward),
    except through concepts or a test-time register (their rewrite is not what the cache holds) and under
    torchrun."""
    from ..core.distributed import finish
    from ..core.inference import classify_files

    if info.enabled:
        from ..core.folder.sharded import classify_sharded

        results = classify_sharded(loaded, [str(f) for f in files], info, args.topk, args.batch_size,
                                   on_batch=lambda n: bar.update(n * info.world), decoder=args.decoder)
        finish(info)
        return [results] if info.main else None
    rewritten = args.concepts or args.registers
    if not rewritten and (folder_work or args.ray is not None):  # on a cluster: its pass fills the cache
        cached = _from_cache(args, loaded, files, bar)
        if cached is not None:
            return cached
    return _counted(classify_files(loaded, files, topk=args.topk, batch_size=args.batch_size,
                                   decoder=args.decoder), bar)


UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def _from_cache(args, loaded, files, bar):
    """The predictions' chunks, or None when the cache folder cannot be written (predicted without it then)."""
    from ..core.folder.predictions import predict_folder
    from ..core.jobs import Progress

    gen = predict_folder(loaded, files, args.topk, args.batch_size, decoder=args.decoder)
    try:
        record = next(gen)  # opens the cache
    except StopIteration as stop:
        return stop.value.chunks()
    except OSError as exc:
        if exc.errno not in UNWRITABLE:
            raise
        print(f"note: the embedding cache cannot be written ({exc.strerror}: {exc.filename}); predicting without "
              f"it", file=sys.stderr)
        return None
    try:
        while True:
            if isinstance(record, Progress) and record.total:
                bar.total = record.total
                bar.n = record.done
                bar.refresh()
            record = next(gen)
    except StopIteration as stop:
        return stop.value.chunks()


def _counted(batches, bar):
    for batch in batches:
        bar.update(len(batch))
        yield batch


def _human(pred) -> str:
    from ..core.files import shown_path  # a name with a newline or bytes that are not UTF-8 stays on its line

    if not pred.ok:
        return f"{shown_path(pred.path)}\n  error: {pred.error}"
    rows = [f"  {p * 100:6.2f}%  {shown_path(label)}  [{i}]" for i, label, p in zip(pred.indices, pred.labels,
                                                                                 pred.probs)]
    return "\n".join([shown_path(pred.path), *rows, _ood_line(pred)])


def _ood_line(pred) -> str:
    if not pred.ood_calibrated:
        return (f"  out-of-distribution score {pred.ood_score:.3f} (uncalibrated: the model keeps no record of its "
                f"training data)")
    if pred.ood_verdict == "cannot tell":
        from ..core.models.ood import why_cannot_tell

        return (f"  out-of-distribution score {pred.ood_score:.3f}: cannot tell whether it is like the model's "
                f"training data ({why_cannot_tell(pred.ood_auroc)})")
    verdict = "NOT like the model's training data" if pred.ood else "like the model's training data"
    return f"  out-of-distribution score {pred.ood_score:.3f}: {verdict}"


