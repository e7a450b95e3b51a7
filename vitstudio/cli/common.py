"""What the `vitstudio` commands share: exit codes, the model and decoder options, loading the model they name,
and the note on files a folder walk left alone."""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE = 0, 1, 2


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="timm name[.tag], hf-hub:ORG/REPO, local-dir:DIR, "
                   "a folder under models/, a seed checkpoint, or custom:img=..,patch=..,width=..,depth=..,"
                   "heads=..,classes=..")
    p.add_argument("--weights", help="weights file for the named architecture (.safetensors/.pth/.pt/.bin/.npz)")
    p.add_argument("--device", default="auto", help="auto (CUDA > MPS > CPU), cpu, cuda, cuda:N, mps")
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"],
                   help="auto (bf16 autocast on GPUs that support it, fp32 elsewhere; the default), fp32, or "
                        "bf16/fp16 autocast")


def add_decoder_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--decoder", default="auto", choices=["auto", "tensor", "pil"],
                   help="auto: JPEGs decoded and preprocessed on a GPU (torchvision), PIL on a CPU; tensor / pil "
                        "force one (unreadable-by-tensor files always fall back to PIL)")


def print_ignored(ignored: list[tuple[str, str]]) -> None:
    """The files a folder walk met and left alone (notes.txt, labels.csv), one line each on stderr: not failures."""
    for path, reason in ignored:
        print(f"ignored {path}: {reason}", file=sys.stderr)


def load_model_from_args(args):
    """The model that --model/--weights/--device/--precision name, or None once the error is printed."""
    from .core.models.loading import ModelLoadError, load_model

    progress = None
    if sys.stderr.isatty():
        def progress(done, total, message):
            pct = f"{100 * done / total:5.1f}%" if total else f"{done / 1e6:.1f} MB"
            print(f"\r{message}: {pct}", end="", file=sys.stderr, flush=True)
    try:
        return load_model(args.model, args.weights, args.device, args.precision, progress=progress)
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
