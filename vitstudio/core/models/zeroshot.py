"""Zero-shot classes: a classifier from class names, through a CLIP-style model's text tower.

Class names become prompts (the model's own templates when it names them, OpenCLIP's 80 ImageNet templates
otherwise, or one template given by the user: "a photo of a {}", or "{}" for the raw names). Each prompt's text
embedding is normalised, averaged over a class's prompts and normalised again (as OpenCLIP's
`build_zero_shot_classifier`). The head is then a linear layer: weights = logit_scale × class embeddings, bias =
the model's logit bias (SigLIP) or 0, applied to the normalised image embedding, so logits are
logit_scale · cos(image, class) (+ bias) and everything downstream (predict, folder table, sort, audit, gradient
maps) works unchanged. Probabilities: softmax over classes for CLIP, a sigmoid per class for SigLIP
(`probabilities`), whose values need not sum to 1.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import torch
from torch import nn

from vitstudio.core.models.model import LoadedModel, share_lock
from vitstudio.core.models.openclip import attach_text_side, encode_prompts, text_side


class ZeroShotHead(nn.Module):
    """projection (pooled tokens -> CLIP image embedding), L2-normalise, then one linear layer over the classes."""

    def __init__(self, projection: nn.Module, classes: torch.Tensor, logit_scale: float, logit_bias: float | None):
        super().__init__()
        self.projection = projection
        self.fc = nn.Linear(classes.shape[1], classes.shape[0])
        with torch.no_grad():
            self.fc.weight.copy_(classes * logit_scale)  # (C, D)
            self.fc.bias.fill_(0.0 if logit_bias is None else logit_bias)
        self.sigmoid = logit_bias is not None
        self.prompt: str | None = None  # the one template it was built with; None: the default templates

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        embedding = nn.functional.normalize(self.projection(pooled), dim=-1)
        return self.fc(embedding)


def parse_classes(text: str) -> list[str]:
    """Class names from "ant, bee, wasp", a file (one per line, or comma-separated) or a folder (the names of its
    class folders, as the GUI's "From folder…"); a clear error when there are fewer than two or one repeats."""
    path = Path(text).expanduser()
    if "\n" not in text and "," not in text and path.is_dir():  # a dataset: its class folders' names
        names = sorted(p.name for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
        if len(names) < 2:
            raise ValueError(f"{path} has {len(names)} subfolder(s); classes from a folder are the names of its class "
                             f"folders (at least two).")
        return names
    if "\n" not in text and "," not in text and path.is_file():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"Could not read class names from {path}: {exc}") from None
    names = [n.strip() for line in text.splitlines() for n in line.split(",")]
    names = [n for n in names if n]
    if len(names) < 2:
        raise ValueError(f"Give at least two class names (comma-separated, or a file with one per line); got "
                         f"{len(names)}.")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"Class names must differ; repeated: {', '.join(repeated)}.")
    return names


def templates_for(loaded: LoadedModel, prompt: str | None) -> tuple[str, ...]:
    """The prompt templates: `prompt` when given (must hold one {}), else the model's own, else OpenCLIP's."""
    if prompt is not None:
        if prompt.count("{}") != 1:
            raise ValueError(f"The prompt must contain {{}} exactly once (where the class name goes), not '{prompt}'.")
        return (prompt,)
    side = text_side(loaded.model)
    if side is not None and side.templates:
        return side.templates
    from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES

    return tuple(t("{}") for t in OPENAI_IMAGENET_TEMPLATES)


def class_embeddings(loaded: LoadedModel, names: list[str], templates: tuple[str, ...]) -> torch.Tensor:
    """(C, D): per class, the normalised mean of its prompts' normalised text embeddings."""
    prompts = tuple(t.format(n) for n in names for t in templates)
    per_prompt = encode_prompts(loaded, prompts).reshape(len(names), len(templates), -1)
    return nn.functional.normalize(per_prompt.mean(1), dim=-1)


def with_classes(loaded: LoadedModel, names: list[str], prompt: str | None = None) -> LoadedModel:
    """A LoadedModel classifying into `names`, with a new uid (results of the old head are never shown for it).
    It shares the image tower's blocks and weights with `loaded` (and its lock); only the head differs, so
    `loaded` keeps working unchanged while the new classes are encoded."""
    side = text_side(loaded.model)
    if side is None:
        raise ValueError(f"Classes from words need a CLIP-style model with a text tower (e.g. "
                         f"open_clip:ViT-B-32:openai); {loaded.display_name} has none.")
    templates = templates_for(loaded, prompt)
    weights = class_embeddings(loaded, names, templates)
    head = ZeroShotHead(image_projection(loaded.model.head), weights.float(), side.logit_scale, side.logit_bias)
    head = head.to(weights.device).eval()
    head.prompt = prompt  # Compare gives a CLIP-style second model the same classes and prompt
    model = _with_head(loaded.model, head)
    model.num_classes = len(names)
    share_lock(model, loaded.model)
    attach_text_side(model, side)
    how = "one prompt: " + templates[0] if len(templates) == 1 else f"{len(templates)} prompt templates averaged"
    output = "sigmoid per class" if side.sigmoid else "softmax over classes"
    new_uid = LoadedModel.__dataclass_fields__["uid"].default_factory()
    return dataclasses.replace(loaded, model=model, labels=list(names),
                               label_set=f"zero-shot from words ({how}; {output})", uid=new_uid)


def image_projection(head: nn.Module) -> nn.Module:
    """The CLIP image projection under a model's head: the head itself until classes are given."""
    return head.projection if isinstance(head, ZeroShotHead) else head


def without_classes(loaded: LoadedModel) -> LoadedModel:
    """The same CLIP-style model headless again (its output the image embedding), with a new uid."""
    head = loaded.model.head
    if not isinstance(head, ZeroShotHead):
        return loaded
    model = _with_head(loaded.model, head.projection)
    model.num_classes = 0
    share_lock(model, loaded.model)
    attach_text_side(model, text_side(loaded.model))
    new_uid = LoadedModel.__dataclass_fields__["uid"].default_factory()
    return dataclasses.replace(loaded, model=model, labels=[], label_set="none (give classes)", uid=new_uid)


def _with_head(model: nn.Module, head: nn.Module) -> nn.Module:
    """A shallow copy of `model` (the same blocks and parameters, no second copy in memory) with its own head."""
    twin = copy.copy(model)
    twin._modules = dict(model._modules)  # copy.copy shares the submodule table: give the twin its own
    twin.head = head
    return twin


def prompt_of(loaded: LoadedModel) -> str | None:
    """The one prompt template a zero-shot head was built with, or None (the default templates, or no zero-shot
    head at all)."""
    return getattr(getattr(loaded.model, "head", None), "prompt", None)


def is_sigmoid(loaded: LoadedModel) -> bool:
    """A SigLIP-style zero-shot head: each class is a yes/no on its own."""
    return bool(getattr(getattr(loaded.model, "head", None), "sigmoid", False))


def probabilities(loaded: LoadedModel, logits: torch.Tensor) -> torch.Tensor:
    """Softmax over classes, or a sigmoid per class for a SigLIP-style zero-shot head."""
    return logits.sigmoid() if is_sigmoid(loaded) else logits.softmax(dim=-1)
