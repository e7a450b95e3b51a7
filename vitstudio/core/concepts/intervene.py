"""A concept switched off or scaled inside the model, and the class logit attributed to concepts.

At the SAE's block, every patch token t becomes

    x = (t − mean) / scale,  z = encode(x),  x̂ = decode(z),  ε = x − x̂        (the SAE's error is kept)
    t' = (decode(z ⊙ s) + ε) · scale + mean                                   s_c: the factor of concept c

so with every factor 1 the block's output is the model's own (up to float rounding), and switching concept c off
(s_c = 0) removes exactly its part z_c · D_c. Prefix tokens pass unchanged: the SAE never saw them.

Attribution ("which concepts drive this class"): with z a leaf of the same rewrite (ε held constant), the class
logit's gradient times each activation, summed over the patches (activation × gradient).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import numpy as np
import torch

from vitstudio.core.concepts.sae import Concepts
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import trunk_blocks


def parse_scales(ablate: str | None = None, scale: list[str] | None = None) -> dict[int, float]:
    """--ablate 3,17 and --scale 5=2.5 as {concept: factor}."""
    out: dict[int, float] = {}
    try:
        for item in (ablate or "").replace(" ", "").split(","):
            if item:
                out[int(item)] = 0.0
        for item in scale or []:
            index, _, factor = item.partition("=")
            out[int(index)] = float(factor)
    except ValueError:
        raise ValueError(f"--ablate takes concept numbers (3,17) and --scale N=F (5=2.5), not {ablate or scale!r}.") \
            from None
    if ablate is not None and not ablate.replace(" ", "").strip(","):  # ",,": no concept named, none switched off
        raise ValueError(f"--ablate takes concept numbers (3,17), not {ablate!r}.")
    wrong = next((f for f in out.values() if not math.isfinite(f)), None)
    if wrong is not None:
        raise ValueError(f"--scale takes finite factors (5=2.5), not {wrong}.")
    return out


def _rewrite(concepts: Concepts, patches: torch.Tensor, factors: torch.Tensor | None, leaf: list | None):
    x = concepts.norm.apply(patches.float())
    sae = concepts.sae
    z = sae.encode(x)
    error = (x - sae.decode(z)).detach()
    if leaf is not None:  # attribution: the codes as a leaf, the error constant
        z = z.detach().requires_grad_(True)
        leaf.append(z)
    if factors is not None:
        z = z * factors
    return concepts.norm.undo(sae.decode(z) + error).to(patches.dtype)


@contextlib.contextmanager
def intervening(loaded: LoadedModel, concepts: Concepts, scales: dict[int, float] | None = None,
                leaf: list | None = None) -> Iterator[None]:
    """Within the context every forward of `loaded` goes through the rewrite at the concepts' block."""
    for index in scales or {}:
        concepts.check_index(index)
    factors = None
    if scales:
        factors = torch.ones(concepts.size)
        for index, factor in scales.items():
            factors[index] = factor
    prefix = loaded.num_prefix_tokens
    block = trunk_blocks(loaded.model)[concepts.layer].block

    def hook(_module, _inputs, out):
        rewritten = _rewrite(concepts, out[:, prefix:], None if factors is None else factors.to(out.device), leaf)
        return torch.cat([out[:, :prefix], rewritten], 1)

    concepts.sae.to(loaded.device)
    with loaded.lock:
        handle = block.register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()


def logits_with(loaded: LoadedModel, concepts: Concepts, x: torch.Tensor, scales: dict[int, float] | None = None
                ) -> np.ndarray:
    """(B, classes) logits with the concepts given scaled (none: the SAE's rewrite with every factor 1)."""
    with intervening(loaded, concepts, scales), torch.inference_mode(), loaded.autocast():
        return loaded.model(x.to(loaded.device)).float().cpu().numpy()


def attribute(loaded: LoadedModel, concepts: Concepts, x: torch.Tensor, target: int) -> tuple[np.ndarray, np.ndarray]:
    """((n,) activation × gradient of class `target`'s logit per concept, (gh, gw, n) that product per patch) for
    one image x (1, 3, H, W)."""
    leaf: list = []
    with intervening(loaded, concepts, leaf=leaf), torch.enable_grad():
        logits = loaded.model(x.to(loaded.device))
        (grad,) = torch.autograd.grad(logits[0, int(target)], leaf[0])  # no .grad left on the weights
    per_patch = (leaf[0] * grad)[0].detach().float().cpu().numpy()  # (P, n)
    gh, gw = concepts.meta["grid"]
    return per_patch.sum(0), per_patch.reshape(gh, gw, -1)
