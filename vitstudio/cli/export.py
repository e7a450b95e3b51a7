"""`vitstudio export`: a model as ONNX (checked against ONNX Runtime) or in upstream's seed format, or a run's
attention over training as GIF/MP4."""

from __future__ import annotations

import sys
from pathlib import Path

from .common import EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="export a model: ONNX (checked against ONNX Runtime), upstream's seed "
                       "format, or a run's attention over training as GIF/MP4")
    p.add_argument("model", help="a run folder or name under models/, or any --model spec")
    p.add_argument("--weights", help="weights file for the model")
    p.add_argument("--format", choices=["onnx", "seed", "gif", "mp4"], help="onnx: FILE.onnx with labels and "
                   "preprocessing as metadata; seed: DIR with model.pth + class_indices.json for upstream's "
                   "predict.py; gif/mp4: the run's attention over training (default: from --out's suffix)")
    p.add_argument("--out", metavar="PATH", help="the file (onnx, gif, mp4) or folder (seed) to write")
    p.add_argument("--onnx", metavar="FILE", help="same as --format onnx --out FILE")
    p.add_argument("--opset", type=int, default=17, help="ONNX opset (at least 17; default 17)")
    p.set_defaults(handler=export_cmd)


def export_cmd(args) -> int:
    from ..core.models.loading import ModelLoadError, load_model, local_folder

    out = args.onnx or args.out
    fmt = "onnx" if args.onnx else (args.format or {".onnx": "onnx", ".gif": "gif", ".mp4": "mp4"}.get(
        Path(out or "").suffix.lower()))
    if not out or not fmt:
        print("error: give --out PATH and --format onnx|seed|gif|mp4 (or --onnx FILE)", file=sys.stderr)
        return EXIT_USAGE
    try:
        if fmt in ("gif", "mp4"):
            from ..core.train.probe import write_animation

            run = local_folder(args.model)
            if run is None:
                raise ValueError(f"{args.model} is not a run folder (attention over training is kept in runs).")
            print(f"wrote {write_animation(run, Path(out))}")
            return EXIT_OK
        loaded = load_model(args.model, args.weights, "cpu")
        if fmt == "seed":
            from ..core.models.seed_export import export_seed

            result = export_seed(loaded, out)
            print(f"wrote {result.folder}/model.pth and class_indices.json; in upstream's predict.py: "
                  f"model = {result.constructor}; model_weight_path = '{result.folder}/model.pth'")
            for note in result.notes:
                print(f"note: {note}", file=sys.stderr)
            return EXIT_OK
        from ..core.models.onnx_export import export_onnx

        result = export_onnx(loaded, out, args.opset)
    except (ModelLoadError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as exc:
        print(f"error: ONNX export needs the onnx extra (pip install 'vitstudio[onnx]'): {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # a full disk, a folder not writable, a file where a folder should be
        why = (f"{exc.filename} is a file, not a folder" if isinstance(exc, (FileExistsError, NotADirectoryError))
               else exc.strerror or exc)
        print(f"error: could not write {out}: {why}", file=sys.stderr)
        return EXIT_SOME_FAILED
    check = ("not checked (onnxruntime not installed)" if result.max_abs_diff is None
             else f"ONNX Runtime matches PyTorch (max |Δlogit| {result.max_abs_diff:.2e})")
    print(f"wrote {result.path} (opset {result.opset}, labels and preprocessing in its metadata); {check}")
    return EXIT_OK
