"""Class attributions at the model's patch grid: integrated gradients and occlusion (through Captum) and a
relevance propagation for transformers (LRP family). Each explains one class (default: the top-1 prediction).

- Integrated gradients (Sundararajan et al. 2017): (x − x₀)·∫₀¹ ∂y_c/∂x(x₀ + α(x − x₀)) dα of the class logit,
  x₀ = 0 (the mean colour after normalisation), Gauss–Legendre quadrature with `IG_STEPS` points (Captum's
  default rule), summed over the channels and pixels of each patch.
- Occlusion (Zeiler & Fergus 2014): for each patch, the drop of the class's softmax probability when that patch
  alone of the input tensor is set to 0 — the single-patch effect the deletion curve accumulates.
- Conservative relevance propagation, CP-LRP (Ali et al., ICML 2022, "XAI for Transformers: Better Explanations
  through Conservative Propagation"; the LRP-family rule AttnLRP builds on): the attention weights and every
  LayerNorm's scale are held constant (detached), so relevance flows only through the value path and gradient ×
  input becomes a conserving LRP pass; relevance of a patch = Σ_channels (h ⊙ ∂y_c/∂h) at the tokens entering the
  first block. It needs softmax attention that can be read and LayerNorms (`lrp_rules` says why not otherwise).

Every function returns an `Attribution` (maps (B, gh, gw), the classes explained), like gradient rollout.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import attention_modules, trunk_blocks

IG_STEPS = 32
OCCLUSIONS_PER_BATCH = 32


@dataclass(frozen=True)
class Attribution:
    maps: np.ndarray  # (B, gh, gw)
    targets: tuple[int, ...]  # the class explained for each image


def _top1(loaded: LoadedModel, x: torch.Tensor, target: int | None) -> torch.Tensor:
    """The class to explain per image: `target`, or the top-1 prediction (one forward)."""
    if target is None:
        with torch.inference_mode():
            return loaded.model(x).argmax(-1).clone()
    if not 0 <= target < loaded.num_classes:
        raise ValueError(f"Target class must be in 0..{loaded.num_classes - 1}.")
    return torch.full((x.shape[0],), int(target), device=x.device)


def patch_sums(loaded: LoadedModel, pixels: torch.Tensor) -> np.ndarray:
    """(B, H, W) per-pixel values -> (B, gh, gw) sums over each patch's pixels."""
    (gh, gw), (ph, pw) = loaded.grid_size, loaded.patch_size
    b = pixels.shape[0]
    return pixels[:, :gh * ph, :gw * pw].reshape(b, gh, ph, gw, pw).sum((2, 4)).detach().float().cpu().numpy()


def integrated_gradients(loaded: LoadedModel, x: torch.Tensor, target: int | None = None,
                         steps: int = IG_STEPS) -> Attribution:
    from captum.attr import IntegratedGradients

    x = x.to(loaded.device).float()
    with loaded.lock, loaded.autocast():
        targets = _top1(loaded, x, target)
        with torch.enable_grad():
            attr = IntegratedGradients(loaded.model).attribute(
                x, baselines=torch.zeros_like(x), target=targets, n_steps=steps, internal_batch_size=steps)
    return Attribution(patch_sums(loaded, attr.sum(1)), tuple(targets.tolist()))


def occlusion(loaded: LoadedModel, x: torch.Tensor, target: int | None = None) -> Attribution:
    from captum.attr import Occlusion

    def probabilities(inputs):
        return loaded.model(inputs).float().softmax(-1)

    x = x.to(loaded.device).float()
    ph, pw = loaded.patch_size
    with loaded.lock, loaded.autocast(), torch.inference_mode():
        targets = _top1(loaded, x, target)
        attr = Occlusion(probabilities).attribute(x, sliding_window_shapes=(x.shape[1], ph, pw), strides=(
            x.shape[1], ph, pw), baselines=0.0, target=targets, perturbations_per_eval=OCCLUSIONS_PER_BATCH)
    # non-overlapping windows: every pixel of a patch holds that patch's drop
    return Attribution(attr[:, 0, ::ph, ::pw].float().cpu().numpy(), tuple(targets.tolist()))


# -- conservative propagation (CP-LRP) --------------------------------------------------------------------------
def _layer_norm_held(module: nn.LayerNorm, inputs, output):
    """LayerNorm with its scale 1/σ treated as a constant (the conservative LN rule)."""
    x = inputs[0]
    centred = x - x.mean(-1, keepdim=True)
    y = centred / (x.var(-1, keepdim=True, unbiased=False) + module.eps).sqrt().detach()
    if module.weight is not None:
        y = y * module.weight
    return y + module.bias if module.bias is not None else y


def _attention_held(_drop, _inputs, output):
    return output.detach()  # the attention weights as constants: relevance flows through the values only


@contextlib.contextmanager
def conservative_rules(model: nn.Module):
    """Within the context the forward computes the same values with the CP-LRP rules in its backward."""
    handles, saved = [], []
    try:
        for t in trunk_blocks(model):
            for module in attention_modules(t.block):
                if hasattr(module, "fused_attn"):  # the fused kernel never shows its weights
                    saved.append((module, module.fused_attn))
                    module.fused_attn = False
                handles.append(module.attn_drop.register_forward_hook(_attention_held))
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                handles.append(module.register_forward_hook(_layer_norm_held))
        yield
    finally:
        for handle in handles:
            handle.remove()
        for module, flag in saved:
            module.fused_attn = flag


def relevance(loaded: LoadedModel, x: torch.Tensor, target: int | None = None) -> Attribution:
    """CP-LRP relevance of each patch token entering the first block, for class `target` (default top-1)."""
    model = loaded.model
    first = trunk_blocks(model)[0].block
    entering = {}

    def hold_input(_block, args):
        h = args[0].detach().requires_grad_(True)  # a leaf, so frozen weights still give a gradient here
        entering["h"] = h
        return (h, *args[1:])

    handle = first.register_forward_pre_hook(hold_input)
    try:
        with loaded.lock, conservative_rules(model), torch.enable_grad(), loaded.autocast():
            logits = model(x.to(loaded.device)).float()
            targets = logits.argmax(-1) if target is None else _top1(loaded, x, target).to(logits.device)
            h = entering["h"]
            (grad,) = torch.autograd.grad(logits.gather(1, targets[:, None]).sum(), h)
    finally:
        handle.remove()
    patches = int(np.prod(loaded.grid_size))
    tokens = (h * grad).float().sum(-1)[:, -patches:]  # (B, P): patch tokens come after the prefix tokens
    gh, gw = loaded.grid_size
    return Attribution(tokens.reshape(-1, gh, gw).detach().cpu().numpy(), tuple(targets.tolist()))


def lrp_rules(model: nn.Module, analysis) -> str | None:
    """Applicability: every normalisation in the blocks is a LayerNorm over the channels (the rule holds its scale
    constant); others (RMSNorm, channel-first LayerNorm2d, batch norm) have no conservative rule here."""
    for t in trunk_blocks(model):
        for module in t.block.modules():
            name = type(module).__name__
            if "Norm" in name and (not isinstance(module, nn.LayerNorm) or "2d" in name.lower()):
                return (f"{analysis.title} holds each LayerNorm's scale constant; {type(model).__name__} normalises "
                        f"with {name}, which that rule does not cover.")
    return None


# -- what the registry's entries compute and show -----------------------------------------------------------------
def _explained(result: Attribution, loaded: LoadedModel, params: dict) -> tuple[np.ndarray, dict]:
    params.update(target=result.targets[0], target_label=loaded.labels[result.targets[0]])
    return result.maps[0], {}


def explain_integrated_gradients(loaded, x, params):
    return _explained(integrated_gradients(loaded, x, params["target"]), loaded, params)


def explain_occlusion(loaded, x, params):
    return _explained(occlusion(loaded, x, params["target"]), loaded, params)


def explain_relevance(loaded, x, params):
    return _explained(relevance(loaded, x, params["target"]), loaded, params)


def _x(model, image):
    return model.to_tensor(model.crop(image))[None]


def integrated_gradients_job(cancel, model, image, target):
    return integrated_gradients(model, _x(model, image), target)


def occlusion_job(cancel, model, image, target):
    return occlusion(model, _x(model, image), target)


def relevance_job(cancel, model, image, target):
    return relevance(model, _x(model, image), target)


def _view(value: Attribution, model, title: str):
    cls = value.targets[0]
    return value.maps[0], f"{title} for class {cls}: {model.labels[cls]}"


def view_integrated_gradients(value, params, model):
    return _view(value, model, "Integrated gradients")


def view_occlusion(value, params, model):
    return _view(value, model, "Occlusion (drop in probability)")


def view_relevance(value, params, model):
    return _view(value, model, "Relevance (CP-LRP)")
