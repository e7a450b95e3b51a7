"""Token norms per layer: every patch's, the class token's, trained registers' and a test-time register's, each named;
the outliers above a threshold, and the maximum and median patch norm per layer, for an image and for a folder
(Darcet et al. 2023's high-norm artifacts; the reference notebook's metrics, test-time-registers'
register_neurons.ipynb: the maximum patch norm per layer averaged over images)."""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import dataclass

import numpy as np
import torch

from vitstudio.core.analysis.capture import grid_for, resolve_layers
from vitstudio.core.analysis.embeddings import layer_tokens, upsample_to
from vitstudio.core.analysis.registers import auto_threshold, register_index
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import is_class_attention, is_windowed, token_stages


def prefix_names(loaded: LoadedModel) -> tuple[str, ...]:
    """The prefix tokens in sequence order: 'class', 'distillation', 'register 0'…, 'test-time register'."""
    model = loaded.model
    if is_windowed(model) or is_class_attention(model):  # no prefix among the token layers' outputs
        return ()
    count = loaded.num_prefix_tokens
    extra = register_index(model)
    own = [name for name, attr in (("class", "cls_token"), ("distillation", "dist_token"))
           if getattr(model, attr, None) is not None]
    trained = count - len(own) - (extra is not None)
    names = own + [f"register {i}" for i in range(max(0, trained))]
    if extra is not None:
        names.insert(extra, "test-time register")
    return tuple(names[:count])


@dataclass(frozen=True)
class LayerNorms:
    """Norms of every token of a batch after each layer (block outputs, before the final norm)."""

    layers: tuple[int, ...]
    patches: np.ndarray  # (B, layers, gh, gw)
    prefix: np.ndarray  # (B, layers, prefix), named by `names`
    names: tuple[str, ...]

    @property
    def max_patch(self) -> np.ndarray:
        """(B, layers)"""
        return self.patches.reshape(*self.patches.shape[:2], -1).max(-1)

    @property
    def median_patch(self) -> np.ndarray:
        """(B, layers)"""
        return np.median(self.patches.reshape(*self.patches.shape[:2], -1), -1).astype(np.float32)


def layer_norms(loaded: LoadedModel, x: torch.Tensor, layers=None) -> LayerNorms:
    """Every token's L2 norm after each of `layers` (all by default), from timm's `forward_intermediates` (as
    `embeddings.layer_tokens` reads the tokens), each layer reduced to its norms on the device as it comes: a folder
    batch of DINOv2-L at 518 px would hold 2 GB of tokens. Swin's coarser stages are repeated up to the finest grid,
    so each cell still means the same patch."""
    model = loaded.model
    if is_windowed(model):
        return _stage_norms(loaded, x, layers)
    chosen = resolve_layers(model, layers, token_stages(model))
    gh, gw = grid_for(model, x)
    with_prefix = loaded.num_prefix_tokens > 0 and not is_class_attention(model)
    kwargs = {"return_prefix_tokens": True} if with_prefix else {}  # timm returns bare tensors without prefix
    with loaded.lock, torch.inference_mode(), loaded.autocast():
        out = model.forward_intermediates(x.to(loaded.device), indices=chosen, output_fmt="NLC",
                                          intermediates_only=True, **kwargs)
        patches = [(item[0] if with_prefix else item).float().norm(dim=-1) for item in out]  # (B, P) each
        prefix = [item[1].float().norm(dim=-1) if with_prefix else item.new_zeros(len(x), 0) for item in out]
    return LayerNorms(tuple(chosen), torch.stack(patches, 1).reshape(len(x), len(chosen), gh, gw).cpu().numpy(),
                      torch.stack(prefix, 1).float().cpu().numpy(), prefix_names(loaded))


def _stage_norms(loaded: LoadedModel, x: torch.Tensor, layers) -> LayerNorms:
    tokens = layer_tokens(loaded, x, layers)
    chosen = tuple(sorted(tokens))
    grid = max((tokens[i].patches.shape[1:3] for i in chosen), key=lambda hw: hw[0] * hw[1])
    patches = np.stack([upsample_to(np.linalg.norm(tokens[i].patches, axis=-1).transpose(1, 2, 0), grid)
                        .transpose(2, 0, 1) for i in chosen], 1).astype(np.float32)
    return LayerNorms(chosen, patches, np.zeros((len(x), len(chosen), 0), np.float32), ())


def outlier_counts(patches: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """(..., layers, gh, gw) norms and (layers,) thresholds -> (..., layers) patches strictly above."""
    flat = patches.reshape(*patches.shape[:-2], -1)
    return (flat > thresholds[:, None]).sum(-1)


def thresholds_for(patches: np.ndarray, threshold: float | str) -> tuple[np.ndarray, str]:
    """(layers,) thresholds for (images, layers, gh, gw) norms: the number given for every layer, or 'auto': each
    layer's own from its norms (`registers.auto_threshold`)."""
    layers = patches.shape[1]
    if threshold != "auto":
        return np.full(layers, float(threshold), np.float32), f"{float(threshold):g} (given)"
    values = np.array([auto_threshold(patches[:, i])[0] for i in range(layers)], np.float32)
    return values, "auto, per layer: Q3 + 3·IQR of its patch norms, at least twice their median"


def norms_summary(loaded: LoadedModel, norms: LayerNorms, layer: int, threshold: float | str = "auto") -> dict:
    """What `explain --method norms` records beside the map: per layer the maximum and median patch norm and the
    outliers; the prefix tokens' norms by name at `layer`."""
    at = norms.layers.index(layer)
    limits, rule = thresholds_for(norms.patches, threshold)
    return {"max_patch_norm": [round(float(v), 6) for v in norms.max_patch[0]],
            "median_patch_norm": [round(float(v), 6) for v in norms.median_patch[0]],
            "outliers": [int(v) for v in outlier_counts(norms.patches[0], limits)],
            "thresholds": [round(float(v), 6) for v in limits], "threshold_rule": rule,
            "prefix_norms": {name: round(float(v), 6) for name, v in zip(norms.names, norms.prefix[0, at])}}


def explain_norms(loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    """The registry's `norms`: the patch norms at the layer asked (gh, gw); every layer's figures into params."""
    norms = layer_norms(loaded, x)
    params.update(norms_summary(loaded, norms, params["layer"]))
    at = norms.layers.index(params["layer"])
    return upsample_to(norms.patches[0, at], loaded.grid_size), {"prefix_norms": norms.prefix[0, at]}


# -- a folder ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Artifacts:
    """High-norm patches over a folder: per image and layer the maximum and median patch norm and the outliers."""

    paths: tuple[str, ...]
    max_patch: np.ndarray  # (images, layers)
    median_patch: np.ndarray  # (images, layers)
    outliers: np.ndarray  # (images, layers) patches above the layer's threshold
    thresholds: np.ndarray  # (layers,)
    threshold_rule: str
    where: tuple[tuple[tuple[int, int], ...], ...]  # per image, the outlier patches (row, col) at `layer`
    on_object: tuple[int | None, ...]  # per image, how many of them lie inside the rollout's mask (None: no rollout)
    layer: int
    prefix_names: tuple[str, ...]
    prefix_max: np.ndarray  # (layers, prefix) the largest norm of each prefix token over the folder

    def to_json(self) -> dict:
        return {"images": len(self.paths), "layer": self.layer, "threshold_rule": self.threshold_rule,
                "layers": [{"layer": i, "threshold": float(self.thresholds[i]),
                            "mean_max_patch_norm": float(self.max_patch[:, i].mean()),
                            "max_patch_norm": float(self.max_patch[:, i].max()),
                            "median_patch_norm": float(np.median(self.median_patch[:, i])),
                            "outliers": int(self.outliers[:, i].sum()),
                            "prefix_max_norm": {n: float(v) for n, v in zip(self.prefix_names, self.prefix_max[i])}}
                           for i in range(self.max_patch.shape[1])],
                "per_image": [{"path": p, "outliers": [int(v) for v in self.outliers[k]],
                               "max_patch_norm": [round(float(v), 4) for v in self.max_patch[k]],
                               "where": [list(rc) for rc in self.where[k]], "on_object": self.on_object[k]}
                              for k, p in enumerate(self.paths)]}


def artifacts(loaded: LoadedModel, paths: Iterable[str], threshold: float | str = "auto", layer: int = -1,
              batch_size: int | None = 16, cancel: CancelToken | None = None, decoder: str = "auto"
              ) -> Generator[Progress, None, tuple[Artifacts, list[tuple[str, str]]]]:
    """Every readable image's token norms per layer, the outliers (thresholds: `thresholds_for`) and where the ones at
    `layer` sit: how many inside the attention rollout's object mask (60 % of its mass, `masks.mass_mask`), where
    rollout applies. Holds the patch norms of the folder (images × layers × patches, float16) for the thresholds."""
    from vitstudio.core.analysis.applicability import why_not
    from vitstudio.core.analysis.attention import rollout
    from vitstudio.core.analysis.masks import mass_mask
    from vitstudio.core.inference import decoded_batches

    depth = loaded.token_depth
    if not -depth <= layer < depth:
        raise ValueError(f"Layer {layer} is out of range: the model has {depth} layers (0..{depth - 1}).")
    layer %= depth
    with_rollout = why_not(loaded.model, "rollout") is None
    done, errors, names, patches, prefix, masks = [], [], (), [], [], []
    for batch in decoded_batches(loaded, paths, batch_size, cancel, decoder=decoder):
        errors += batch.errors
        if batch.tensor is None:
            continue
        norms = layer_norms(loaded, batch.tensor)
        names = norms.names
        patches.append(norms.patches.astype(np.float16))
        prefix.append(norms.prefix.max(0))
        if with_rollout:
            masks += [mass_mask(m, 0.6)[0].reshape(m.shape) for m in rollout(loaded, batch.tensor)]
        done += [p for p, _, err in batch.items if err is None]  # the tensor decoder keeps no crops
        yield Progress(len(done) + len(errors), 0, "token norms")
    if not done:
        raise ValueError("No readable images found.")
    norms = np.concatenate(patches).astype(np.float32)  # (images, layers, gh, gw)
    limits, rule = thresholds_for(norms, threshold)
    flat = norms.reshape(*norms.shape[:2], -1)
    where = tuple(tuple(tuple(int(v) for v in np.unravel_index(i, norms.shape[2:]))
                        for i in np.flatnonzero(flat[k, layer] > limits[layer])) for k in range(len(done)))
    on_object = tuple(sum(bool(masks[k][r, c]) for r, c in where[k]) if with_rollout else None
                      for k in range(len(done)))
    return Artifacts(tuple(done), flat.max(-1), np.median(flat, -1), outlier_counts(norms, limits), limits, rule,
                     where, on_object, layer, names, np.max(np.stack(prefix), 0) if names else
                     np.zeros((norms.shape[1], 0), np.float32)), errors
