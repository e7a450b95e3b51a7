"""A model card: the facts a user wants to see about a loaded ViT, FLOPs included."""

from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass

import torch
from torch.utils.flop_counter import FlopCounterMode

from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import trunk_blocks


@dataclass(frozen=True)
class ModelCard:
    name: str
    architecture: str
    kind: str
    params: int
    gflops: float  # multiply-adds count as 2 FLOPs, batch 1 at the input size
    input_size: tuple[int, int, int]
    patch_size: tuple[int, int]
    grid_size: tuple[int, int]
    prefix_tokens: int
    tokens: int
    layers: int
    heads: int
    width: int
    interpolation: str
    crop_pct: float
    crop_mode: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    num_classes: int
    head: str
    label_set: str
    weights_source: str
    device: str
    precision: str
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return asdict(self)

    def lines(self) -> list[tuple[str, str]]:
        """(field, value) pairs formatted for people."""
        return [
            ("Model", self.name),
            ("Architecture", f"{self.architecture} ({self.kind})"),
            ("Parameters", f"{self.params / 1e6:.2f} M"),
            ("GFLOPs", f"{self.gflops:.3g} at {self.input_size[1]}×{self.input_size[2]}"),
            ("Patch", f"{self.patch_size[0]}×{self.patch_size[1]} px"),
            ("Grid", f"{self.grid_size[0]}×{self.grid_size[1]}"),
            ("Tokens", f"{self.tokens} ({self.prefix_tokens} prefix + {self.tokens - self.prefix_tokens} patches)"),
            ("Layers × heads × width", f"{self.layers} × {self.heads} × {self.width}"),
            ("Input", f"{self.input_size[1]}×{self.input_size[2]}, {self.interpolation}, "
                      f"crop {self.crop_pct:.3f} ({self.crop_mode})"),
            ("Mean / std", f"{_fmt(self.mean)} / {_fmt(self.std)}"),
            ("Classes", f"{self.num_classes} (labels: {self.label_set})"),
            ("Head", self.head),
            ("Weights", self.weights_source),
            ("Device", f"{self.device}, {self.precision}"),
            *(("Note", note) for note in self.notes),
        ]


def _fmt(values) -> str:
    return "(" + ", ".join(f"{v:.3f}" for v in values) + ")"


def _crop_mode(cfg: dict) -> str:
    """timm's crop mode, or a transformers processor's own steps (crop_pct is then only timm's nearest)."""
    size = cfg.get("hf_size")
    if not size:
        return str(cfg.get("crop_mode", "center"))
    resize = f"shortest edge {size['shortest_edge']}" if "shortest_edge" in size else \
        f"{size['height']}×{size['width']}"
    return f"transformers processor: resize to {resize}, centre crop with floored margins"


def _describe_head(model) -> str:
    from vitstudio.core.models.checkpoints import representation_size

    if not int(getattr(model, "num_classes", 0) or 0):
        from vitstudio.core.models.openclip import text_side

        if text_side(model) is not None:  # a CLIP-style model classifies into classes given in words
            return "none yet: give classes in words (the Classes box, --classes) for a zero-shot head"
        return "none: features and attention only (fine-tune a head to classify)"
    rep = representation_size(model)
    if rep:
        return (f"pre-logits (Linear + Tanh, {rep}) + classifier, as the original ViT; plain timm cannot build "
                f"this head (ViT Studio can; `export --format seed` writes upstream's format)")
    return "distilled: class and distillation heads, averaged" if hasattr(model, "head_dist") else "linear classifier"


def count_flops(loaded: LoadedModel) -> int:
    """FLOPs of one forward at batch 1, counted by torch's FlopCounterMode (a real, small forward)."""
    x = torch.zeros(1, *loaded.data_config["input_size"], device=loaded.device)
    counter = FlopCounterMode(display=False)
    # FlopCounterMode has no formula for some fused SDPA kernels (the CPU one counts 0), so count the
    # explicit q@k^T / attn@v path instead; it is the same arithmetic.
    fused = [(m, m.fused_attn) for m in loaded.model.modules() if hasattr(m, "fused_attn")]
    # FlopCounterMode's module tracker hooks the gradients of any input that requires them and fails on CaiT's
    # class token (a parameter passed to its class-attention blocks), so parameters stop requiring them meanwhile
    grads = [(p, p.requires_grad) for p in loaded.model.parameters()]
    with loaded.lock:  # the flags are shared with any other thread using this model
        try:
            for module, _ in fused:
                module.fused_attn = False
            for param, _ in grads:
                param.requires_grad_(False)
            with torch.inference_mode(), counter:
                loaded.model(x)
        finally:
            for module, flag in fused:
                module.fused_attn = flag
            for param, flag in grads:
                param.requires_grad_(flag)
    return int(counter.get_total_flops())


# One card per model, measured once (FLOPs take a forward): a model with other classes is another LoadedModel
# (zeroshot.with_classes), so a card never goes stale; a model that is freed takes its card with it.
_cards: weakref.WeakKeyDictionary[LoadedModel, ModelCard] = weakref.WeakKeyDictionary()


def model_card(loaded: LoadedModel) -> ModelCard:
    """The card of `loaded`."""
    card = _cards.get(loaded)
    if card is None:
        card = _cards[loaded] = _build_card(loaded)
    return card


def _build_card(loaded: LoadedModel) -> ModelCard:
    model = loaded.model
    blocks = trunk_blocks(model)
    gh, gw = loaded.grid_size
    cfg = loaded.data_config
    card = ModelCard(
        name=loaded.display_name, architecture=loaded.architecture, kind=loaded.kind,
        params=sum(p.numel() for p in model.parameters()),
        gflops=count_flops(loaded) / 1e9,
        input_size=tuple(cfg["input_size"]), patch_size=loaded.patch_size, grid_size=(gh, gw),
        prefix_tokens=loaded.num_prefix_tokens, tokens=loaded.num_prefix_tokens + gh * gw,
        layers=len(blocks), heads=loaded.num_heads if blocks else 0,
        width=int(getattr(model, "embed_dim", 0) or model.num_features),
        interpolation=str(cfg.get("interpolation")), crop_pct=float(cfg.get("crop_pct", 1.0)),
        crop_mode=_crop_mode(cfg), mean=tuple(cfg["mean"]), std=tuple(cfg["std"]),
        num_classes=loaded.num_classes, head=_describe_head(model), label_set=loaded.label_set,
        weights_source=loaded.weights_source,
        device=str(loaded.device), precision=loaded.precision, notes=loaded.notes,
    )
    return card
