"""A new head started from the class names' text embeddings, for CLIP-style base models: the
fine-tune starts where zero-shot classification is, not at chance.

Zero-shot logits are s · cos(P·x + c, t_k) (+ one bias shared by all classes, SigLIP): P·x + c is the image
tower's projection of the pooled features x, t_k the class's normalised text embedding, s the model's logit scale.
A plain timm head is one Linear on x, so the projection is folded into it: W = (s / r) · T·P, b = (s / r) · T·c.
Dividing by r, the mean norm of P·x + c over a sample of training images, stands in for each image's own norm: the
ranking of the classes for an image (hence the accuracy) is exactly zero-shot's, the logits are close to its
scale. A shared bias moves no softmax, so SigLIP's is left out. The run's first validation, before any step, then
equals the zero-shot accuracy on its split; it is recorded in the run folder (`head_start.json`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from vitstudio.core.files import atomic_write_bytes
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.openclip import text_side
from vitstudio.core.models.zeroshot import class_embeddings, templates_for

START_FILE = "head_start.json"


@dataclass(frozen=True)
class HeadStart:
    """How a run's new head started; for a head from text, the validation before any step (= zero-shot's)."""

    how: str
    from_text: bool = False
    templates: tuple[str, ...] = ()
    val_loss: float | None = None
    val_acc: float | None = None


@dataclass(frozen=True)
class TextInit:
    weight: torch.Tensor  # (C, F) on the pooled features the head reads, float32 on the CPU
    bias: torch.Tensor  # (C,)
    templates: tuple[str, ...]

    @property
    def how(self) -> str:
        prompts = f"one prompt '{self.templates[0]}'" if len(self.templates) == 1 else \
            f"{len(self.templates)} prompt templates averaged"
        return f"new head started from the class names' text embeddings ({prompts}): zero-shot to begin with"


def prompt_word(class_name: str) -> str:
    """A folder name as words for a prompt: golden_retriever -> golden retriever."""
    return " ".join(class_name.replace("_", " ").split())


def projection_of(head: nn.Module, width: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(A, c) with head(x) = A·x + c for x of `width` features, when the head is Linear, Identity and Dropout
    layers in sequence (the CLIP projection); None for anything else (an MLP projection is not one Linear)."""
    matrix, offset = torch.eye(width, dtype=torch.float64), torch.zeros(width, dtype=torch.float64)
    for part in head.modules() if isinstance(head, nn.Sequential) else [head]:
        if isinstance(part, nn.Linear):
            weight = part.weight.detach().double().cpu()
            bias = part.bias.detach().double().cpu() if part.bias is not None else 0.0
            matrix, offset = weight @ matrix, weight @ offset + bias
        elif not isinstance(part, (nn.Sequential, nn.Identity, nn.Dropout)):
            return None
    return matrix, offset


def text_init(base: LoadedModel, classes: list[str], prompt: str | None, pooled: torch.Tensor) -> TextInit | str:
    """The folded head for `classes` (folder names) from `base`'s text tower, or why it cannot start from text.
    `pooled`: (N, F) pooled features of some training images, for the scale."""
    side = text_side(base.model)
    if side is None:
        return f"{base.display_name} has no text tower"
    folded = projection_of(base.model.head, pooled.shape[1])
    if folded is None:
        return f"{base.display_name}'s image projection is not linear, so it cannot be folded into a new head"
    matrix, offset = folded
    templates = templates_for(base, prompt)
    text = class_embeddings(base, [prompt_word(c) for c in classes], templates).double().cpu()  # (C, D)
    embedded = pooled.double().cpu() @ matrix.T + offset
    norm = float(embedded.norm(dim=1).mean()) if len(embedded) else 1.0
    scale = side.logit_scale / max(norm, 1e-12)
    return TextInit((scale * text @ matrix).float(), (scale * text @ offset).float(), templates)


def write_head_start(folder: Path, start: HeadStart) -> None:
    atomic_write_bytes(Path(folder) / START_FILE, json.dumps(asdict(start), indent=1).encode())


def read_head_start(folder: Path) -> HeadStart | None:
    """The run's head start, or None (an older run, or a damaged file: it only decorates the curves)."""
    try:
        data = json.loads((Path(folder) / START_FILE).read_text(encoding="utf-8"))
        data["templates"] = tuple(data.get("templates", ()))
        return HeadStart(**data)
    except (OSError, ValueError, TypeError):
        return None


def sample_pooled(base: LoadedModel, paths: list[str], count: int = 32) -> torch.Tensor:
    """(≤ count, F) pooled features of the first readable `paths` (eval crop), for the head's scale."""
    from vitstudio.core.inference import decoded_batches, pooled_and_logits

    for batch in decoded_batches(base, paths[:count], batch_size=count):
        if batch.tensor is not None:
            return pooled_and_logits(base, batch.tensor)[0]
    return torch.zeros(0, int(getattr(base.model, "num_features", 1)))


def start_from_text(base: LoadedModel, config, classes: list[str], pooled: torch.Tensor | None,
                    train_paths: list[str]) -> tuple[TextInit | None, str | None]:
    """(the text-started head, None), or (None, why not) for a CLIP-style base model that cannot start from its
    class names, or (None, None) when the run does not ask for it or the model has no text tower."""
    if not config.text_head or text_side(base.model) is None:
        return None, None
    if pooled is None:
        pooled = sample_pooled(base, train_paths)
    init = text_init(base, classes, config.prompt, pooled)
    if isinstance(init, str):
        return None, f"The new head starts at random: {init}."
    return init, None
