"""`vitstudio faithfulness`: how faithful each map is to the model, per image and over the images given
(deletion / insertion areas against a random ranking; `core/analysis/faithfulness.py` holds the exact protocol),
and with --sanity the model-randomisation check (`faithfulness_sanity.py`). The methods are the analysis registry's."""

from __future__ import annotations

import json
import sys

from ..core.analysis import registry
from ..core.fields import POSITIVE
from .common import (
    COUNT,
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    add_model_args,
    checked,
    existing,
    load_model_from_args,
    print_ignored,
)


def register(subparsers) -> None:
    default = ",".join(registry.names(compare=True))
    p = subparsers.add_parser(
        "faithfulness", help="deletion / insertion faithfulness of attribution maps (and --sanity)",
        description="Deletion: the target (top-1 class) probability as the highest-ranked patches of the input "
        "tensor are set to 0, area over [0, 1], lower is better. Insertion: from a blurred input, restoring patches "
        "in ranked order, higher is better. Baselines: a random ranking (mean of 5 seeds) and each map reversed.")
    p.add_argument("inputs", nargs="+", metavar="IMAGE", type=existing, help="image files and/or folders")
    add_model_args(p)
    p.add_argument("--methods", help=f"comma list of registered methods that give one patch map (default: those of "
                   f"{default} that apply to the model)")
    p.add_argument("--steps", type=COUNT, default=16, help="S: curves have S + 1 points (default 16)")
    p.add_argument("--blur-sigma", type=checked(float, POSITIVE),
                   help="insertion's blur in input pixels (default one patch side)")
    p.add_argument("--batch-size", type=COUNT, default=64, help="masked inputs per forward (default 64)")
    p.add_argument("--max-images", type=COUNT, help="measure at most this many images (in sorted order)")
    p.add_argument("--text", help="CLIP-style models: the curves follow each image's similarity to this text instead "
                   "of the top-1 class (with --methods text: the text map's own faithfulness)")
    p.add_argument("--sanity", action="store_true", help="also the model-randomisation sanity check (Adebayo et al. "
                   "2018): Spearman ρ of each map with the map after the head, then each block from the top, is "
                   "re-drawn")
    p.add_argument("--json", action="store_true", help="print one JSON document (curves, areas, summary) to stdout")
    p.set_defaults(handler=faithfulness_cmd)


def _methods(text: str) -> list[str]:
    methods = [m.strip() for m in text.split(",") if m.strip()]
    for method in methods:
        registry.get(method)  # an unknown name: a message listing the known ones
    if not methods:
        raise ValueError("--methods names no method")
    return methods


def _applicable(loaded) -> list[str]:
    from ..core.analysis.applicability import why_not

    methods = []
    for method in registry.names(compare=True):
        reason = why_not(loaded.model, method)
        if reason is None:
            methods.append(method)
        else:
            print(f"skipped {method}: {reason}", file=sys.stderr)
    return methods


def faithfulness_cmd(args) -> int:
    from ..core.analysis import faithfulness as fa
    from ..core.analysis.explain import validate
    from ..core.data.images import expand_paths

    try:
        methods = _methods(args.methods) if args.methods is not None else None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    if methods is None:  # the default: every Compare method that applies, the others named with their reason
        methods = _applicable(loaded)
    given = {"text": args.text} if args.text else {}
    try:  # a method asked for that does not apply to this model is refused with its reason before any image is read
        if args.text and args.sanity:
            raise ValueError("--sanity re-draws the classifier, so it measures maps of the top-1 class, not of a "
                             "--text.")
        for method in methods:
            validate(loaded, method, **given)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    ignored: list = []
    paths = [str(p) for p in expand_paths(args.inputs, ignored=ignored)][:args.max_images]
    print_ignored(ignored)
    protocol = fa.Protocol(args.steps, args.blur_sigma, batch_size=args.batch_size)
    results, errors = _drain(fa.faithfulness_over(loaded, paths, methods, protocol, **given), "faithfulness")
    for path, reason in errors:
        print(f"error: {path}: {reason}", file=sys.stderr)
    if not results:
        print("error: no readable images", file=sys.stderr)
        return EXIT_SOME_FAILED if errors else EXIT_USAGE
    sanity = _sanity(loaded, results, methods) if args.sanity else None
    doc = document(loaded, protocol, results, sanity)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(table(doc))
    return EXIT_SOME_FAILED if errors else EXIT_OK


def _drain(gen, what: str):
    from tqdm import tqdm

    bar = tqdm(desc=what, file=sys.stderr, leave=False, disable=None)
    try:
        while True:
            rec = next(gen)
            bar.total = rec.total
            bar.update(rec.done - bar.n)
    except StopIteration as stop:
        return stop.value
    finally:
        bar.close()


def _sanity(loaded, results, methods):
    from ..core.analysis.faithfulness_sanity import sanity_check
    from ..core.data.images import read_image

    inputs = [loaded.to_tensor(loaded.crop(read_image(r.image)))[None] for r in results]
    return _drain(sanity_check(loaded, inputs, methods), "sanity check")


def document(loaded, protocol, results, sanity) -> dict:
    """Everything measured, as plain JSON: per image curves and areas, the summary, the sanity curves."""
    from dataclasses import asdict

    from ..core.analysis.faithfulness import summarise

    def curves(c):
        return {"deletion": c.deletion.round(6).tolist(), "insertion": c.insertion.round(6).tolist(),
                "deletion_auc": round(c.deletion_auc, 6), "insertion_auc": round(c.insertion_auc, 6)}

    doc = {"model": loaded.name,
           "protocol": {"steps": protocol.steps, "blur_sigma_px": protocol.sigma(loaded),
                        "random_seeds": protocol.random_seeds,
                        "target": results[0].score if results and results[0].score != "probability"
                        else "top-1 class on the original",
                        "deleted_value": 0.0, "patch_grid": list(loaded.grid_size)},
           "images": [{"image": r.image, "target": r.target, "random": curves(r.random), "errors": r.errors,
                       "methods": {m: {**curves(c), "reversed": curves(r.reversed[m])} for m, c in r.methods.items()}}
                      for r in results],
           "summary": {m: asdict(s) for m, s in summarise(results).items()}}
    if sanity is not None:
        doc["sanity"] = {"steps": list(sanity.steps), "errors": sanity.errors,
                         "insensitive": list(sanity.insensitive),
                         "mean_spearman": {m: [round(float(v), 4) for v in sanity.mean_curve(m)]
                                           for m in sanity.correlation}}
    return doc


def table(doc: dict) -> str:
    """The summary as a text table, then the sanity curves."""
    rows = [f"curves follow: {doc['protocol']['target']}",
            f"{'method':<22}{'images':>7}{'deletion ↓':>18}{'insertion ↑':>18}{'beats random (del/ins)':>25}"
            f"{'reversed (del/ins)':>21}"]
    for m, s in doc["summary"].items():
        beats = "" if m == "random" else f"{s['beats_random_deletion']:.0%} / {s['beats_random_insertion']:.0%}"
        flipped = "" if m == "random" else f"{s['reversed_deletion_mean']:.3f} / {s['reversed_insertion_mean']:.3f}"
        rows.append(f"{m:<22}{s['images']:>7}{s['deletion_mean']:>11.3f} ± {s['deletion_std']:.3f}"
                    f"{s['insertion_mean']:>11.3f} ± {s['insertion_std']:.3f}{beats:>25}{flipped:>21}")
    failed = {e for r in doc["images"] for e in r["errors"].items()}
    rows += [f"{m}: not measured: {reason}" for m, reason in sorted(failed)]
    sanity = doc.get("sanity")
    if sanity:
        rows.append("\nsanity check (Spearman ρ with the trained model's map; randomised cumulatively: "
                    + ", ".join(sanity["steps"]) + ")")
        for m, curve in sanity["mean_spearman"].items():
            mark = "  <- barely changes: insensitive to the weights" if m in sanity["insensitive"] else ""
            rows.append(f"{m:<22}" + " ".join(f"{v:6.2f}" for v in curve) + mark)
    return "\n".join(rows)
