"""The logit lens: the running tokens read through the model's own final norm and head after every block.

After block l the token sequence h_l (prefix tokens first, then the patches) is what the rest of the network would
refine; the lens reads it as if it were the last block's: logits_l = forward_head(norm(h_l)) (timm's own norm and
head, so pooling, fc_norm and a distilled model's two heads are the model's). After the last block this is the
model's forward exactly.

Per patch, the class logit each patch "says" at block l:
  * token-pooled models (a class token, attention pooling, a distilled pair): each patch token is read as the
    pooled token would be, through norm, fc_norm and the head;
  * mean-pooled models: the patch's share of the pooled logit, with the pooled token's own normalisation held
    (z_p = g ⊙ (t_p − mean_c t_p) / σ(pooled) + b for a fc_norm LayerNorm, then the head), so the map's mean over
    the patches is the model's logit at that block (exactly, for a linear head).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from vitstudio.core.analysis.capture import grid_for
from vitstudio.core.models import zeroshot
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import is_class_attention, is_windowed

TOP_K = 3


@dataclass(frozen=True)
class LensReading:
    """The lens on one batch: every block's class probabilities and one class's logit per patch."""

    logits: np.ndarray  # (B, blocks, classes) float32
    probabilities: np.ndarray  # (B, blocks, classes) float32, softmax (a sigmoid per class for SigLIP heads)
    patch_logits: np.ndarray  # (B, blocks, gh, gw) float32: the target class's logit per patch
    targets: tuple[int, ...]  # the class of each image's patch maps (default: its final top-1)


def lens_readable(model: nn.Module, analysis) -> str | None:
    """Applicability: one token sequence that runs through every block and ends in the model's norm and head."""
    name = type(model).__name__
    if is_windowed(model):
        return (f"{name} attends inside local windows and pools its last stage: no token runs through every block "
                f"to be read by the head, so there is no logit lens for it.")
    if is_class_attention(model):
        return (f"{name}'s class token enters only in its last class-attention blocks: the self-attention blocks "
                f"before them hold no token the head reads.")
    if getattr(getattr(model, "embeds", None), "pos_embed", None) is not None:
        return f"{name} pools over a per-image mask of valid patches, which the lens cannot give its head."
    missing = [m for m in ("forward_intermediates", "forward_head", "norm") if not hasattr(model, m)]
    if missing:
        return f"{name} has no {missing[0]} to read its blocks through its own head."
    return None


def block_sequences(loaded: LoadedModel, x: torch.Tensor) -> list[torch.Tensor]:
    """Every block's output token sequence, (B, prefix + patches, C) each, before the final norm."""
    model = loaded.model
    with_prefix = loaded.num_prefix_tokens > 0
    kwargs = {"return_prefix_tokens": True} if with_prefix else {}
    out = model.forward_intermediates(x.to(loaded.device), indices=loaded.depth, output_fmt="NLC",
                                      intermediates_only=True, **kwargs)
    if not with_prefix:
        return list(out)
    return [torch.cat([prefix, patches], 1) for patches, prefix in out]


def read_blocks(loaded: LoadedModel, sequences: list[torch.Tensor]) -> torch.Tensor:
    """(B, blocks, classes) logits: each block's tokens through the final norm and the head."""
    model = loaded.model
    return torch.stack([model.forward_head(model.norm(h)).float() for h in sequences], 1)


def _mean_pooled(model: nn.Module) -> bool:
    return getattr(model, "global_pool", "token") == "avg"


def patch_readings(loaded: LoadedModel, sequence: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(B, P) logit of class `target` (B,) said by each patch token of one block's `sequence` (module doc)."""
    model = loaded.model
    normed = model.norm(sequence)
    patches = normed[:, loaded.num_prefix_tokens:]  # (B, P, C)
    b, p, c = patches.shape
    if _mean_pooled(model):
        z = _shares_of_pooled(model.fc_norm, patches)
        logits = model.head(z.reshape(b * p, c))  # head_drop is the identity in eval
    else:  # each patch in the pooled token's place: every prefix slot holds it, so any pooling rule reads it alone
        copies = patches.reshape(b * p, 1, c).expand(-1, loaded.num_prefix_tokens + 1, -1)
        logits = model.forward_head(copies)
    logits = logits.float().reshape(b, p, -1)
    return logits.gather(2, target.view(b, 1, 1).expand(-1, p, 1))[..., 0]


def _shares_of_pooled(fc_norm: nn.Module, patches: torch.Tensor) -> torch.Tensor:
    """(B, P, C): fc_norm applied to each patch with the mean token's normalisation, so their mean is
    fc_norm(mean token) exactly (a LayerNorm is affine in its input once its scale is held)."""
    if not isinstance(fc_norm, nn.LayerNorm):
        return fc_norm(patches)
    pooled = patches.mean(1, keepdim=True)
    sigma = (pooled.var(-1, unbiased=False, keepdim=True) + fc_norm.eps).sqrt()
    centred = (patches - patches.mean(-1, keepdim=True)) / sigma
    if fc_norm.weight is not None:
        centred = centred * fc_norm.weight
    return centred + fc_norm.bias if fc_norm.bias is not None else centred


def logit_lens(loaded: LoadedModel, x: torch.Tensor, target: int | None = None) -> LensReading:
    """The lens on a preprocessed batch `x` (B, 3, H, W); `target` (default: each image's final top-1) picks the
    class of the patch maps."""
    gh, gw = grid_for(loaded.model, x)
    with loaded.lock, torch.inference_mode(), loaded.autocast():
        sequences = block_sequences(loaded, x)
        logits = read_blocks(loaded, sequences)  # (B, blocks, classes)
        final = logits[:, -1].argmax(-1)
        targets = final if target is None else torch.full_like(final, int(target))
        maps = torch.stack([patch_readings(loaded, h, targets) for h in sequences], 1)
        probabilities = zeroshot.probabilities(loaded, logits)
    return LensReading(logits.cpu().numpy(), probabilities.cpu().numpy().astype(np.float32),
                       maps.reshape(len(x), len(sequences), gh, gw).cpu().numpy().astype(np.float32),
                       tuple(int(t) for t in targets.tolist()))


def block_table(loaded: LoadedModel, reading: LensReading, k: int = TOP_K) -> list[dict]:
    """Per block of the first image: its top-k classes with probabilities and the target class's probability."""
    target = reading.targets[0]
    rows = []
    for block, probs in enumerate(reading.probabilities[0]):
        top = np.argsort(-probs, kind="stable")[:k]
        rows.append({"block": block, "top": [{"index": int(i), "class": loaded.labels[i],
                                              "probability": round(float(probs[i]), 6)} for i in top],
                     "target_probability": round(float(probs[target]), 6)})
    return rows


# -- the registry's entry: explain() and the Attention tab -----------------------------------------------------
def explain_logit_lens(loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    """(the target's logit per patch at `layer` (gh, gw), extra); the per-block table goes into the parameters
    (and so into the JSON written beside the array)."""
    reading = logit_lens(loaded, x, params.get("target"))
    params["target"] = reading.targets[0]
    params["blocks"] = block_table(loaded, reading)
    return reading.patch_logits[0, params["layer"]], {"probabilities": reading.probabilities[0]}


def lens_job(cancel, model: LoadedModel, image, target):
    """The lens of one image, once per (model, image, class) request; moving the layer reads it again."""
    return logit_lens(model, model.to_tensor(model.crop(image))[None], target)


def view_logit_lens(value: LensReading, params: dict, model) -> tuple[np.ndarray, str]:
    layer = params["layer"]
    probs = value.probabilities[0, layer]
    top = int(probs.argmax())
    target = value.targets[0]
    return value.patch_logits[0, layer], (
        f"Logit lens after block {layer} of {value.probabilities.shape[1]}: reads “{model.labels[top]}” "
        f"({probs[top]:.0%}); class “{model.labels[target]}” {probs[target]:.0%}, its logit per patch")
