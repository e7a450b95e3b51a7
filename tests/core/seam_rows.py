"""The rows of the seam matrix (tests/core/test_seam_matrix.py): every model family as the user meets it on disk — a
timm folder saved at a non-default image size, a transformers folder, a seed checkpoint, a `custom:` spec — each with
the source's own forward as the reference, and the CLI driven in-process as the user drives it.

Built once per module and shared by every cell of the row (a `Sources` cache); every model is tiny (depth 1–2, width
16–32, ≤ 56 px)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import timm
import torch
from timm.models import save_for_hf

from tests.core.reference_vit import sharpen

SMALL = dict(embed_dim=32, depth=2, num_heads=2, num_classes=5)
# row -> (timm entry point, keyword arguments): the image size is never the entry point's default, and the patch
# size is the architecture's own (not in model_args), as a user's timm folder of that model looks
TIMM_ROWS = {
    "vit": ("vit_base_patch16_224", dict(img_size=48)),
    "vit-p8": ("vit_small_patch8_224", dict(img_size=40, qkv_bias=False)),  # and no qkv bias
    "deit-distilled": ("deit_tiny_distilled_patch16_224", dict(img_size=48, mlp_ratio=2.0)),  # and MLP 2x
    "deit3": ("deit3_small_patch16_224", dict(img_size=48)),
    "dinov2": ("vit_small_patch14_dinov2", dict(img_size=56)),
    "vit-registers": ("vit_base_patch16_reg4_gap_256", dict(img_size=48)),
    "eva02": ("eva02_tiny_patch14_224", dict(img_size=56)),
    "beit": ("beit_base_patch16_224", dict(img_size=48)),
    "relpos": ("vit_relpos_small_patch16_224", dict(img_size=48)),
    "cait": ("cait_xxs24_224", dict(img_size=48, depth=1, depth_token_only=1)),
    # NaFlexViT takes any grid; the folder records its size in pretrained_cfg, as a run fine-tuned at 48 px does
    # (timm's default 384 px would make occlusion 576 forwards here)
    "naflexvit": ("naflexvit_base_patch16_gap", dict(img_size=48, pretrained_cfg_overlay=dict(input_size=(3, 48, 48)))),
    "swin": ("swin_tiny_patch4_window7_224", dict(img_size=40, window_size=4, embed_dim=16, depths=(1, 1),
                                                  num_heads=(1, 2), num_classes=5)),
}
TRANSFORMERS_ROWS = ("hf-vit", "hf-vit-headless", "hf-deit", "hf-deit-distilled", "hf-beit", "hf-beit-shared",
                     "hf-beit-ls0", "hf-dinov2", "hf-dinov2-swiglu", "hf-dinov2-registers")
OTHER_ROWS = ("seed", "seed-prelogits", "custom")
BASE_ROWS = (*TIMM_ROWS, *TRANSFORMERS_ROWS, *OTHER_ROWS)


@dataclass
class Source:
    """A model as the user names it (`--model spec [--weights file]`) and its own forward (None: no logits)."""

    row: str
    spec: str
    weights: str | None
    reference: Callable[[torch.Tensor], torch.Tensor] | None
    notes: dict = field(default_factory=dict)

    @property
    def model_args(self) -> list[str]:
        return ["--model", self.spec, *(["--weights", self.weights] if self.weights else [])]


def _timm_folder(row: str, folder: Path) -> Source:
    arch, kwargs = TIMM_ROWS[row]
    torch.manual_seed(0)
    sizes = kwargs if "depths" in kwargs else {**SMALL, **kwargs}  # Swin: per-stage depths and heads
    model = sharpen(timm.create_model(arch, pretrained=False, **sizes), scale=0.6).eval()
    save_for_hf(model, str(folder), safe_serialization=True)
    return Source(row, str(folder), None, _no_grad(model))


def _no_grad(module):
    def forward(x):
        with torch.no_grad():
            out = module(x)
        return out.logits if hasattr(out, "logits") else out
    return forward


def _transformers_folder(row: str, folder: Path) -> Source:
    from tests.core import test_transformers_format as hf

    builders = {"hf-vit": hf._vit, "hf-deit-distilled": hf._deit, "hf-beit": hf._beit,
                "hf-beit-shared": hf._beit_shared, "hf-dinov2": hf._dinov2, "hf-dinov2-swiglu": hf._dinov2_swiglu,
                "hf-dinov2-registers": hf._dinov2_registers, "hf-deit": _hf_deit_plain, "hf-beit-ls0": _hf_beit_ls0,
                "hf-vit-headless": _hf_vit_headless}
    model, _ = builders[row](folder)
    headless = row == "hf-vit-headless"
    return Source(row, str(folder), None, None if headless else lambda x: _no_grad(model)(x))


def _hf_deit_plain(folder):
    """DeiTForImageClassification: no distillation token's head, one classifier on the class token."""
    from tests.core.test_transformers_format import SIZES, _jitter, transformers

    torch.manual_seed(5)
    model = transformers.DeiTForImageClassification(transformers.DeiTConfig(**SIZES)).eval()
    _jitter(model)
    model.save_pretrained(folder)
    processor = transformers.DeiTImageProcessor(size={"height": 40, "width": 40}, crop_size={"height": 32,
                                                "width": 32}, do_center_crop=True, resample=3)
    processor.save_pretrained(folder)
    return model, processor


def _hf_beit_ls0(folder):
    """BEiT without layer scale (layer_scale_init_value=0: transformers keeps no lambda parameters)."""
    from tests.core.test_transformers_format import SIZES, _jitter, transformers

    torch.manual_seed(6)
    model = transformers.BeitForImageClassification(transformers.BeitConfig(**SIZES, layer_scale_init_value=0.0,
                                                    use_relative_position_bias=True)).eval()
    _jitter(model)
    model.save_pretrained(folder)
    return model, None


def _hf_vit_headless(folder):
    from tests.core.test_transformers_format import SIZES, _jitter, transformers

    torch.manual_seed(7)
    model = transformers.ViTModel(transformers.ViTConfig(**SIZES)).eval()
    _jitter(model)
    model.save_pretrained(folder)
    return model, None


def _seed(row: str, folder: Path) -> Source:
    from tests.core.seed_reference import SeedVisionTransformer
    from tests.core.test_finetune_sources import _seed_folder

    rep = 24 if row == "seed-prelogits" else None
    spec, _ = _seed_folder(folder, rep)
    ref = SeedVisionTransformer(img_size=32, patch_size=8, num_classes=4, embed_dim=32, depth=2, num_heads=1,
                                representation_size=rep)
    ref.load_state_dict(torch.load(folder / "model-3.pth", weights_only=True))
    return Source(row, spec, None, _no_grad(ref.eval()))


def _custom(folder: Path) -> Source:
    from safetensors.torch import save_file

    from tests.conftest import TINY_SPEC, make_tiny_vit

    model = make_tiny_vit()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tiny.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return Source("custom", TINY_SPEC, str(path), _no_grad(model))


def build_source(row: str, folder: Path) -> Source:
    if row in TIMM_ROWS:
        return _timm_folder(row, folder)
    if row in TRANSFORMERS_ROWS:
        return _transformers_folder(row, folder)
    if row.startswith("seed"):
        return _seed(row, folder)
    if row == "custom":
        return _custom(folder)
    raise AssertionError(row)


def run_source(row: str, run: Path) -> Source:
    """A run folder as a source: its own forward is plain timm's `local-dir:` model, or, for a representation layer
    plain timm cannot build, the seed reference port loaded from the run's weights in upstream's names."""
    config = json.loads((run / "config.json").read_text())
    rep = (config.get("vitstudio") or {}).get("representation_size")
    if not rep:
        model = timm.create_model(f"local-dir:{run}", pretrained=True).eval()
        eps = (config.get("vitstudio") or {}).get("layer_norm_eps")
        if eps is not None:  # recorded beside timm's arguments (which cannot carry it): plain timm sets it by hand
            for module in model.modules():
                if isinstance(module, torch.nn.LayerNorm):
                    module.eps = eps
        return Source(f"run:{row}", str(run), None, _no_grad(model))
    from safetensors.torch import load_file

    from tests.core.seed_reference import SeedVisionTransformer

    state = {k.replace("head.fc.", "pre_logits.fc.").replace("head.out.", "head."): v
             for k, v in load_file(str(run / "model.safetensors")).items()}
    args = config["model_args"]
    side = args["img_size"][0] if isinstance(args["img_size"], (list, tuple)) else args["img_size"]
    ref = SeedVisionTransformer(img_size=side, patch_size=args["patch_size"],
                                num_classes=state["head.weight"].shape[0], embed_dim=args["embed_dim"],
                                depth=args["depth"], num_heads=args["num_heads"], representation_size=int(rep))
    ref.load_state_dict(state)
    return Source(f"run:{row}", str(run), None, _no_grad(ref.eval()))


class Sources:
    """Each row's source, built on first use and kept for the module; a run folder per row, fine-tuned on first use
    (through the CLI, as the fine-tune cell checks it) by `finetune` (given where a module has run rows)."""

    def __init__(self, root: Path, finetune: Callable[[Source, Path], tuple[int, str, str]] | None = None) -> None:
        self.root, self._finetune = root, finetune
        self._built: dict[str, Source] = {}
        self._runs: dict[str, tuple[int, str, str, Path]] = {}

    def __getitem__(self, row: str) -> Source:
        if row.startswith("run:"):
            base = row[4:]
            code, out, err, run = self.fine_tuned(base)
            if code != 0:
                import pytest

                pytest.skip(f"no run folder of {base}: its fine-tune cell exits {code}")
            if row not in self._built:
                self._built[row] = run_source(base, run)
            return self._built[row]
        if row not in self._built:
            self._built[row] = build_source(row, self.root / row)
        return self._built[row]

    def fine_tuned(self, row: str) -> tuple[int, str, str, Path]:
        """(exit code, stdout, stderr, run folder) of `vitstudio finetune` on this row's source (once)."""
        if row not in self._runs:
            run = self.root / "runs" / row
            self._runs[row] = (*self._finetune(self[row], run), run)
        return self._runs[row]


@pytest.fixture(scope="module")
def one_parser():
    """`vitstudio.cli.main` builds the whole command line's parser on every call (~7 ms, once per process for a
    user); the matrix's ~560 in-process calls share one (each parse_args makes a Namespace of its own)."""
    from vitstudio.cli import app

    parser = app.build_parser()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(app, "build_parser", lambda: parser)
        yield parser
