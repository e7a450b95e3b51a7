"""`vitstudio explain`: attention / embedding analyses of images, one model load for all. The methods, their
parameters and help come from the analysis registry: one vocabulary with the GUI and exports."""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from pathlib import Path

from ..core import fields
from ..core.analysis import registry
from ..core.files import shown_path
from .common import (
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    NO_IMAGES,
    add_decoder_arg,
    add_model_args,
    add_view_arg,
    checked,
    existing,
    load_model_from_args,
    print_ignored,
    print_left_out,
    resolve_view,
)
from .register_option import add_registers_arg, registers_for


class _WholeNames(argparse.HelpFormatter):
    """Method names hold hyphens (gradient-rollout, integrated-gradients): a line never breaks inside one."""

    def _fill_text(self, text, width, indent):
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False)

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def register(subparsers) -> None:
    """Options and choices come from the analysis registry: one vocabulary with the GUI and exports."""
    methods = "; ".join(f"{a.name} = {a.title}" for a in registry.REGISTRY.values())
    used = registry.params_help()
    p = subparsers.add_parser("explain", help="attention / embedding analyses of images (one model load for all)",
                              formatter_class=_WholeNames,
                       description=f"Methods: {methods}. Several images (or folders) and several methods in one call "
                       "write OUT/<image file name>.<method>.<format> (small.bmp.rollout.png; a repeated name gets "
                       "-2, -3…); one image and one method may write --out FILE directly.")
    p.add_argument("inputs", nargs="*", metavar="IMAGE", type=existing, help="image files and/or folders (each "
                   "image is explained; for distance a folder is averaged); none for the model-only methods "
                   "(pos-embed, filters)")
    add_model_args(p)
    add_view_arg(p)
    p.add_argument("--method", required=True, action="append", metavar="METHOD",
                   help=f"one of {', '.join(registry.REGISTRY)}; repeat it or give a comma list for several")
    for param in registry.all_params().values():  # one option per registry parameter: a new one appears here
        p.add_argument(param.option, dest=param.name, default=None, help=_param_help(param, used), **_typed(param))
    p.add_argument("--cmap", default="inferno", choices=fields.COLORMAPS, help="colormap for pictures")
    p.add_argument("--alpha", type=checked(float, fields.PROBABILITY), default=0.5,
                   help="overlay opacity in pictures (default 0.5)")
    p.add_argument("--json", action="store_true", help="print each result's parameters as one JSON line per image "
                   "and method on stdout (the logit lens's classes after every block, a text map's cosine, …); "
                   "--out is then optional")
    p.add_argument("--out", help="FILE.npy (raw float32 array + .json parameters), FILE.png "
                   "(picture) or FILE.json for one image and one method; otherwise a folder")
    p.add_argument("--format", default="png", choices=["png", "npy", "json"],
                   help="what to write per result when --out is a folder (default png)")
    p.add_argument("--mask", type=float, metavar="SHARE", help="write masks instead: each map thresholded to keep "
                   "SHARE of its mass (DINO-style, e.g. 0.6) as OUT/<image>.<method>.mask.png, and one COCO RLE "
                   "file per method, OUT/<method>.masks.json")
    add_decoder_arg(p)  # for the folder averages (distance); single images are always read by PIL
    add_registers_arg(p)
    p.set_defaults(handler=explain_cmd)


def _typed(param) -> dict:
    """argparse's type or choices for a registry parameter of this kind."""
    if param.kind == "choice":
        return dict(choices=param.choices)
    kinds = {"patch": _patch, "float": checked(float, param.range), registry.TEXT_KIND: str, registry.FILE_KIND: str}
    return dict(type=kinds.get(param.kind, int))


def _param_help(param, used: dict[str, str]) -> str:
    default = "" if param.default is None else f" (default {param.default})"
    bounds = f" in {param.range}" if param.range is not None else ""
    return f"{param.help}{bounds}{default}; used by {used[param.name]}"


def _patch(text: str) -> tuple[int, int]:
    try:
        row, col = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("use ROW,COL, e.g. 3,7") from None
    return row, col


def _plan_and_images(args):
    """(the plan, the image files) of the command, or its exit code when refused: before the model loads."""
    from ..core.data.images import expand_paths

    try:
        plan = _explain_plan(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    ignored: list = []
    images = list(expand_paths(args.inputs, ignored=ignored)) if any(
        not registry.get(m).folder and registry.get(m).needs_image for m in plan.methods) else []
    print_ignored(ignored)
    if args.inputs and not (images or any(registry.get(m).folder for m in plan.methods)):
        print(f"error: {NO_IMAGES}", file=sys.stderr)
        return EXIT_USAGE
    return plan, images


def explain_cmd(args) -> int:
    prepared = _plan_and_images(args)
    if isinstance(prepared, int):
        return prepared
    plan, images = prepared
    from ..core.analysis.explain import validate

    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    given = {name: getattr(args, name) for name in registry.all_params()}  # None: each method's own default
    try:  # every parameter is checked against the model before any image is read
        for method in plan.methods:
            validate(loaded, method, **given)
        masks = _mask_exports(plan, args)
        register = registers_for(args, loaded)  # a RegisterError is a ValueError
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with register:  # every analysis runs on the model with the test-time register
        return _explain_all(args, plan, images, loaded, given, masks)


def _explain_all(args, plan, images, loaded, given, masks) -> int:
    from ..core.analysis.explain import explain, explain_folder, render_figure
    from ..core.data.images import ImageReadError, read_image

    failed = 0
    last = (None, None)  # (file, image) read last: one image's methods decode it once
    for method in plan.methods:
        analysis = registry.get(method)
        if not analysis.needs_image:
            jobs = [(None, method)]
        elif analysis.folder:
            jobs = [(Path(i), method) for i in args.inputs]
        else:
            jobs = [(f, method) for f in images]
        for source, _ in jobs:
            image = None
            try:
                if source is not None and analysis.folder and source.is_dir():
                    exp, skipped = explain_folder(loaded, method, [str(source)], decoder=args.decoder)
                    print_left_out(skipped)
                    failed += len(skipped)
                else:
                    if source is not None and last[0] != source:
                        last = (source, read_image(source))
                    image = last[1] if source is not None else None
                    exp = explain(loaded, method, image, **given)
            except ImageReadError as exc:
                print(f"error: {shown_path(exc.path)}: {exc.reason}", file=sys.stderr)
                failed += 1
                continue
            except (ValueError, MemoryError, RuntimeError) as exc:  # one input never takes the command down
                print(f"error: {shown_path(source or '')}: {exc or type(exc).__name__}", file=sys.stderr)
                failed += 1
                continue
            if masks is not None and exp.crop is not None:
                masks[method].add(exp.array, exp.crop.shape[:2], plan.name_of(source), _placed(loaded, image))
                continue
            _emit(exp, plan, loaded.name, source, args, render_figure)
    for export in (masks or {}).values():
        print(f"masks: {export.finish()}", file=sys.stderr)
    return EXIT_SOME_FAILED if failed else EXIT_OK


def _placed(loaded, image) -> tuple | None:
    """(the image's (H, W), where the model's crop lies in it): a mask is the image's size, not the crop's, so the
    PNG and its COCO record describe the image they name."""
    if image is None:
        return None
    hw = (image.height, image.width)
    return hw, loaded.crop_box(hw)


def _mask_exports(plan, args) -> dict | None:
    """--mask: one exporter per method into the output folder (masks are maps over the image: one per map)."""
    if args.mask is None:
        return None
    import numpy as np

    from ..core.analysis.masks import MaskExport, mass_mask

    mass_mask(np.zeros((1, 1)), args.mask)  # the share is checked before any work
    for method in plan.methods:
        if registry.get(method).renderer != "overlay":
            raise ValueError(f"'{method}' draws no map over the image, so it has no mask")
    if plan.single:
        raise ValueError("--mask writes a PNG per image and a JSON per method: give --out a folder")
    return {m: MaskExport(plan.out, m, args.mask) for m in plan.methods}


class _ExplainPlan:
    """Which methods, and where each result goes: --out itself for one image and one method, else a folder.

    In a folder, a result is named after its input's whole file name, extension included
    (`small.bmp.rollout.png` beside `small.webp.rollout.png`); a second input of the same name from another folder
    gets `-2` (`small.bmp-2.rollout.png`), and so on in input order, so no result overwrites another."""

    def __init__(self, methods: list[str], out: Path | None, single: bool, fmt: str) -> None:
        self.methods, self.out, self.single, self.fmt = methods, out, single, fmt
        self._names: dict[str, str] = {}  # input path -> its unique name in the output folder

    def target(self, source: Path | None, method: str) -> Path:
        if self.single:
            return self.out
        return self.out / (f"{self._unique(source)}.{method}.{self.fmt}" if source is not None else
                           f"{method}.{self.fmt}")

    def name_of(self, source: Path) -> str:
        return self._unique(source)

    def _unique(self, source: Path) -> str:
        key = str(source)
        if key not in self._names:
            taken, n, name = set(self._names.values()), 1, source.name
            while name in taken:
                n += 1
                name = f"{source.name}-{n}"
            self._names[key] = name
        return self._names[key]


def _explain_plan(args) -> _ExplainPlan:
    methods = [m.strip() for value in args.method for m in value.split(",") if m.strip()]
    _refuse_unused(methods, args)
    resolve_view(args, "inputs")  # --view NAME: the images it selects
    for method in methods:
        for param in registry.get(method).params:  # unknown names: a clear message listing the known ones
            if param.kind == "index" and getattr(args, param.name) is None:  # one of many: never a silent default
                raise ValueError(f"the '{method}' method needs {param.option} N ({param.help}, from 0)")
    need_image = [m for m in methods if registry.get(m).needs_image]
    if need_image and not args.inputs:
        raise ValueError(f"the '{need_image[0]}' method needs an image (or a folder)")
    if args.out is None:
        if not args.json:
            raise ValueError("give --out (a file or a folder), or --json to print the results")
        if args.mask is not None:
            raise ValueError("--mask writes files: give --out a folder")
        return _ExplainPlan(methods, None, False, args.format)
    out = Path(args.out)
    one_input = len(args.inputs) <= 1 and not (args.inputs and Path(args.inputs[0]).is_dir()
                                               and any(not registry.get(m).folder for m in need_image))
    # a file when named like one ("x.png", "x.txt"); a folder may have a dot in its name ("maps.v2", "run.final")
    names_a_file = (re.fullmatch(r"\.[A-Za-z]{1,4}", out.suffix) is not None and not out.is_dir()
                    and not args.out.endswith(("/", os.sep)))
    single = len(methods) == 1 and one_input and names_a_file
    if names_a_file and not single:
        raise ValueError("several images or methods write one file each: give --out a folder (and --format)")
    if single and out.suffix.lower() not in (".npy", ".png", ".json"):
        raise ValueError("--out must end in .npy, .png or .json (or name a folder: end it with /)")
    if single:
        from ..core.outputs import refuse_file_onto_inputs

        refuse_file_onto_inputs(out, args.inputs, "--out")
    if not single:
        out.mkdir(parents=True, exist_ok=True)
    fmt = out.suffix.lower().lstrip(".") if single else args.format
    return _ExplainPlan(methods, out, single, fmt)


def _refuse_unused(methods: list[str], args) -> None:
    """An option that none of the methods takes is a ValueError naming it and what they take, not ignored."""
    unused = registry.unused_params(methods, {name: getattr(args, name) for name in registry.all_params()})
    if not unused:
        return
    taken = dict.fromkeys(p.option for m in methods for p in registry.get(m).params)
    raise ValueError(f"{', '.join(p.option for p in unused)} {'is' if len(unused) == 1 else 'are'} not used by "
                     f"{' or '.join(methods)} (its options: {', '.join(taken) or 'none'})")


def _emit(exp, plan, model_name: str, source: Path | None, args, render_figure) -> None:
    """One result: its record on stdout (--json), its file under --out."""
    if args.registers:  # what the array was computed on: the model with a test-time register on those neurons
        exp.params["registers"] = str(args.registers)
    if args.json:
        _print_record(exp, model_name, source)
    if plan.out is not None:
        out = plan.target(source, exp.method)
        _write_explanation(exp, out, model_name, source, args, render_figure)
        print(f"{exp.method}: array {tuple(exp.array.shape)} -> {shown_path(out)}", file=sys.stderr)


def _print_record(exp, model_name: str, source: Path | None) -> None:
    import json

    record = registry.record(exp.method, exp.params, model=model_name,
                             image=shown_path(source) if source is not None else None)
    print(json.dumps(record, default=float), flush=True)


def _write_explanation(exp, out: Path, model_name: str, source: Path | None, args, render_figure) -> None:
    from ..core.analysis.export import write_result

    params = registry.record(exp.method, exp.params, model=model_name, image=str(source) if source else None)
    if out.suffix.lower() == ".png":
        from PIL import Image

        from ..core.analysis.explain import describe

        title = describe(exp, model_name, source.name if source is not None else "")
        Image.fromarray(render_figure(exp, args.cmap, args.alpha, title)).save(out)
    else:
        write_result(out, exp.array, params, exp.extra)
