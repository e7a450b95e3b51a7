"""One entry point over the analyses for the CLI and for exports: method name + parameters -> array + picture."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from vitstudio.core.analysis import attention, embeddings, intrinsic, overlays
from vitstudio.core.analysis.capture import resolve_layers
from vitstudio.core.analysis.methods import EXPLAIN_METHODS, IMAGE_FREE_METHODS
from vitstudio.core.inference import decoded_batches
from vitstudio.core.jobs import CancelToken
from vitstudio.core.models.model import LoadedModel

METHODS, IMAGE_FREE = EXPLAIN_METHODS, IMAGE_FREE_METHODS


@dataclass(frozen=True)
class Explanation:
    method: str
    array: np.ndarray  # float32, exactly what the analysis returned (batch dimension dropped)
    params: dict  # every parameter used, resolved (e.g. layer -1 -> 11)
    crop: np.ndarray | None = None  # (H, W, 3) uint8: what the model saw
    extra: dict = field(default_factory=dict)  # secondary arrays (e.g. entropy beside distance)


def _needs(value, name: str, method: str):
    if value is None:
        raise ValueError(f"--{name} is required for the '{method}' method.")
    return value


def explain(loaded: LoadedModel, method: str, image: Image.Image | None = None, *, layer: int = -1,
            head: int | None = None, patch: tuple[int, int] | None = None, fusion: str = "mean",
            discard: float = 0.0, target: int | None = None) -> Explanation:
    """Run one analysis on one image (or on the model alone for pos-embed / filters)."""
    if method not in METHODS:
        raise ValueError(f"Unknown method '{method}'; use one of {', '.join(METHODS)}.")
    model = loaded.model
    if method == "pos-embed":
        return Explanation(method, intrinsic.pos_embed_similarity(model), {})
    if method == "filters":
        return Explanation(method, intrinsic.filter_components(model), {"components": 28})
    image = _needs(image, "image", method)
    crop = loaded.crop(image)
    x = loaded.to_tensor(crop)[None]
    crop_arr = np.asarray(crop, dtype=np.uint8)
    needs_layer = method in ("heads", "token", "pca", "similarity")
    params: dict = {"layer": resolve_layers(model, layer)[0]} if needs_layer else {}
    if head is not None:
        heads = int(getattr(model.blocks[0].attn, "num_heads", 0) or 0)
        if heads and not 0 <= head < heads:
            raise ValueError(f"Head {head} is out of range: the model has {heads} heads (0..{heads - 1}).")
    if method == "heads":
        arr = attention.head_maps(loaded, x, layer)[0]
        arr, params = (arr[head], {**params, "head": head}) if head is not None else (arr, params)
    elif method == "token":
        patch = _needs(patch, "patch", method)
        maps = attention.token_maps(loaded, x, patch, [layer])
        arr = np.stack([maps.attends_to[0, 0], maps.attended_by[0, 0]])  # (2, heads, gh, gw): to, by
        arr = arr[:, head] if head is not None else arr
        params.update(patch=list(patch), head=head, order=["attends_to", "attended_by"])
    elif method == "rollout":
        arr = attention.rollout(loaded, x, fusion, discard)[0]
        params.update(fusion=fusion, discard=discard)
    elif method == "gradient-rollout":
        result = attention.gradient_rollout(loaded, x, target)
        arr = result.maps[0]
        params.update(target=result.targets[0], target_label=loaded.labels[result.targets[0]])
    elif method == "distance":
        stats = attention.attention_stats(loaded, x)
        return Explanation(method, stats.distance.astype(np.float32), {"images": 1, "unit": "input pixels"},
                           crop_arr, {"entropy": stats.entropy.astype(np.float32)})
    elif method == "pca":
        tokens = embeddings.layer_tokens(loaded, x, [layer])[params["layer"]]
        arr = embeddings.pca_rgb(tokens.patches)[0][0]
    else:  # similarity
        patch = _needs(patch, "patch", method)
        tokens = embeddings.layer_tokens(loaded, x, [layer])[params["layer"]]
        arr = embeddings.cosine_similarity_to(tokens.patches, patch)[0]
        params["patch"] = list(patch)
    return Explanation(method, np.asarray(arr, dtype=np.float32), params, crop_arr)


def distance_over(loaded: LoadedModel, paths: Iterable[str], batch_size: int = 16,
                  cancel: CancelToken | None = None) -> tuple[Explanation, list[tuple[str, str]]]:
    """Mean attention distance and entropy averaged over every readable image under `paths`."""
    dist_sum = ent_sum = None
    count, errors = 0, []
    for batch in decoded_batches(loaded, paths, batch_size, cancel):
        errors += batch.errors
        if batch.tensor is not None:
            d, e = attention.attention_stat_sums(loaded, batch.tensor)
            dist_sum = d if dist_sum is None else dist_sum + d
            ent_sum = e if ent_sum is None else ent_sum + e
            count += len(batch.tensor)
    if not count:
        raise ValueError("No readable images found.")
    return Explanation("distance", (dist_sum / count).astype(np.float32), {"images": count, "unit": "input pixels"},
                       None, {"entropy": (ent_sum / count).astype(np.float32)}), errors


def render(exp: Explanation, cmap: str = "inferno", alpha: float = 0.5) -> np.ndarray:
    """A picture of the explanation: overlays on the crop, grids for model-intrinsic views, a plot for distance."""
    arr = exp.array
    if exp.method == "distance":
        return distance_plot(arr)
    if exp.method == "pos-embed":
        gh, gw = arr.shape[:2]
        return overlays.enlarge(overlays.mosaic(arr.reshape(gh * gw, gh, gw), columns=gw, cmap="viridis"), 4)
    if exp.method == "filters":
        return overlays.enlarge(overlays.mosaic(arr, columns=7), 4)
    if exp.method == "pca":
        rgb = (overlays.normalise(arr) * 255 + 0.5).astype(np.uint8)
        big = np.asarray(Image.fromarray(rgb).resize(exp.crop.shape[1::-1], Image.NEAREST))
        return np.concatenate([exp.crop, big], axis=1)
    maps = arr.reshape(-1, *arr.shape[-2:])  # one overlay per map (heads, to/by, ...)
    tiles = [overlays.overlay(m, exp.crop, cmap, alpha) for m in maps]
    columns = arr.shape[-3] if arr.ndim == 4 else None  # token maps: a row of heads for "to", one for "by"
    return overlays.mosaic_rgb(tiles, columns)


def distance_plot(distance: np.ndarray) -> np.ndarray:
    """The ViT paper's Fig. 7 (right): mean attention distance of every head against layer depth."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 4), dpi=100)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    layers, heads = distance.shape
    for h in range(heads):
        ax.scatter(np.arange(layers), distance[:, h], s=12, label=f"head {h}" if heads <= 16 else None)
    ax.set_xlabel("layer")
    ax.set_ylabel("mean attention distance (pixels)")
    ax.set_title("Mean attention distance per head")
    if heads <= 16:
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()
