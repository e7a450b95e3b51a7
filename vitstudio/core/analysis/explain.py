"""One entry point over the registered analyses: method name + parameters -> array (+ the crop it explains).

The parameters are resolved and checked by `registry.resolve`, so the CLI, the GUI and exports agree on names,
defaults and ranges. `render` draws a raw picture (grids, overlays); `render_figure` a readable one for files,
with a title and a colour bar.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from vitstudio.core.analysis import attention, overlays, registry
from vitstudio.core.analysis.applicability import why_not
from vitstudio.core.analysis.capture import resolve_layers
from vitstudio.core.files import shown_path
from vitstudio.core.inference import decoded_batches
from vitstudio.core.jobs import CancelToken
from vitstudio.core.models.model import LoadedModel


@dataclass(frozen=True)
class Explanation:
    method: str
    array: np.ndarray  # float32, exactly what the analysis returned (batch dimension dropped)
    params: dict  # every parameter used, resolved (e.g. layer -1 -> 11)
    crop: np.ndarray | None = None  # (H, W, 3) uint8: what the model saw
    extra: dict = field(default_factory=dict)  # secondary arrays (e.g. entropy beside distance)

    @property
    def title(self) -> str:
        return registry.get(self.method).title


def _check_head(loaded: LoadedModel, head: int | None) -> None:
    if head is not None and not 0 <= head < loaded.num_heads:
        raise ValueError(f"Head {head} is out of range: the model has {loaded.num_heads} heads "
                         f"(0..{loaded.num_heads - 1}).")


def _check_patch(loaded: LoadedModel, patch: tuple[int, int] | None) -> None:
    gh, gw = loaded.grid_size
    if patch is not None and not (0 <= patch[0] < gh and 0 <= patch[1] < gw):
        raise ValueError(f"Patch {tuple(patch)} is outside the {gh}×{gw} patch grid (rows 0..{gh - 1}, "
                         f"columns 0..{gw - 1}).")


def validate(loaded: LoadedModel, method: str, **given) -> dict:
    """The resolved parameters of `method` for this model (layer -1 -> its index), or a ValueError saying which
    value is out of range. Cheap: callers check everything before any image is read."""
    reason = why_not(loaded.model, method)  # first: a method that does not apply needs no parameters either
    if reason is not None:
        raise ValueError(f"'{method}' does not apply to this model: {reason}")
    params = registry.resolve(method, **given)
    if "layer" in params:  # attention layers, or token layers (blocks; Swin's stages) for the embedding views
        depth = loaded.token_depth if registry.get(method).group == "embeddings" else loaded.depth
        params["layer"] = resolve_layers(loaded.model, params["layer"], depth)[0]
    _check_head(loaded, params.get("head"))
    _check_patch(loaded, params.get("patch"))
    if params.get("target") is not None and not 0 <= params["target"] < loaded.num_classes:
        raise ValueError(f"Class {params['target']} is out of range: the model has {loaded.num_classes} classes.")
    if registry.get(method).check is not None:
        registry.load(registry.get(method).check)(loaded, params)
    return params


def explain(loaded: LoadedModel, method: str, image: Image.Image | None = None, **given) -> Explanation:
    """Run one registered analysis on one image (or on the model alone for the model-intrinsic ones).

    `given` may hold any registry parameter (layer, head, patch, direction, fusion, discard, target); those the
    method does not take are ignored. What runs is the entry's own `compute`."""
    analysis = registry.get(method)
    params = validate(loaded, method, **given)
    if not analysis.needs_image:
        arr, extra = analysis.run(loaded, None, params)
        return Explanation(method, np.asarray(arr, dtype=np.float32), params, None, extra)
    if image is None:
        raise ValueError(f"The '{method}' method needs an image.")
    crop = loaded.crop(image)
    x = loaded.to_tensor(crop)[None]
    arr, extra = analysis.run(loaded, x, params)
    return Explanation(method, np.asarray(arr, dtype=np.float32), params, np.asarray(crop, dtype=np.uint8), extra)


def explain_folder(loaded: LoadedModel, method: str, paths: Iterable[str], batch_size: int = 16,
                   cancel: CancelToken | None = None, decoder: str = "auto"
                   ) -> tuple[Explanation, list[tuple[str, str]]]:
    """A folder analysis (the entry's `over_folder`) averaged over every readable image under `paths`, with the
    (path, reason) of each image that could not be read."""
    analysis = registry.get(method)
    if analysis.over_folder is None:
        raise ValueError(f"The '{method}' method explains one image at a time, not a folder.")
    validate(loaded, method)
    return registry.load(analysis.over_folder)(loaded, paths, batch_size, cancel, decoder)


def distance_over(loaded: LoadedModel, paths: Iterable[str], batch_size: int = 16,
                  cancel: CancelToken | None = None, decoder: str = "auto"
                  ) -> tuple[Explanation, list[tuple[str, str]]]:
    """Mean attention distance and entropy averaged over every readable image under `paths`."""
    dist_sum = ent_sum = None
    count, errors = 0, []
    for batch in decoded_batches(loaded, paths, batch_size, cancel, decoder=decoder):
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


def _map_mosaic(exp: Explanation, cmap: str, alpha: float) -> np.ndarray:
    """(gh, gw, gh, gw): one small map per patch, laid out on the patch grid."""
    gh, gw = exp.array.shape[:2]
    return overlays.enlarge(overlays.mosaic(exp.array.reshape(gh * gw, gh, gw), columns=gw, cmap="viridis"), 4)


def _rgb_mosaic(exp: Explanation, cmap: str, alpha: float) -> np.ndarray:
    """(k, p, p, 3): colour tiles, seven to a row."""
    return overlays.enlarge(overlays.mosaic(exp.array, columns=7), 4)


def _rgb_beside_crop(exp: Explanation, cmap: str, alpha: float) -> np.ndarray:
    rgb = (overlays.normalise(exp.array) * 255 + 0.5).astype(np.uint8)
    big = np.asarray(Image.fromarray(rgb).resize(exp.crop.shape[1::-1], Image.NEAREST))
    return np.concatenate([exp.crop, big], axis=1)


def _overlays(exp: Explanation, cmap: str, alpha: float) -> np.ndarray:
    arr = exp.array
    maps = arr.reshape(-1, *arr.shape[-2:])  # one overlay per map (heads, to/by, ...)
    tiles = [overlays.overlay(m, exp.crop, cmap, alpha) for m in maps]
    columns = arr.shape[-3] if arr.ndim == 4 else None  # token maps: a row of heads for "to", one for "by"
    return overlays.mosaic_rgb(tiles, columns)


# the registry's renderer kinds -> a raw picture of an Explanation
RENDERERS = {"plot": lambda exp, cmap, alpha: distance_plot(exp.array), "map-mosaic": _map_mosaic,
             "mosaic": _rgb_mosaic, "rgb": _rgb_beside_crop, "overlay": _overlays}
MOSAICS = ("mosaic", "map-mosaic")  # pictures enlarged cell by cell for files


def render(exp: Explanation, cmap: str = "inferno", alpha: float = 0.5) -> np.ndarray:
    """A raw picture of the explanation, as its entry's renderer draws it: overlays on the crop, grids for
    model-intrinsic views, a plot for distance."""
    return RENDERERS[registry.get(exp.method).renderer](exp, cmap, alpha)


def describe(exp: Explanation, model_name: str = "", image_name: str = "") -> str:
    """A one-line title: method, its parameters, the model and the image."""
    shown = {k: v for k, v in exp.params.items() if k not in ("unit", "components") and v is not None}
    bits = ", ".join(f"{k} {tuple(v) if isinstance(v, list) else v}" for k, v in shown.items())
    where = " · ".join(s for s in (image_name, model_name) if s)
    return f"{exp.title}" + (f" ({bits})" if bits else "") + (f"\n{where}" if where else "")


def render_figure(exp: Explanation, cmap: str = "inferno", alpha: float = 0.5, title: str = "",
                  min_side: int = 320) -> np.ndarray:
    """A picture for a file: the maps at a readable size, bilinear over the crop, one shared colour bar, a title."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    title = shown_path(title or exp.title)  # an image name that is not UTF-8 cannot be drawn by matplotlib's fonts
    renderer = registry.get(exp.method).renderer
    if renderer == "plot":
        return distance_plot(exp.array, title)
    if renderer in MOSAICS or renderer == "rgb":
        picture = render(exp, cmap, alpha)
        scale = max(1, int(np.ceil(min_side / max(1, min(picture.shape[:2])))))
        picture = overlays.enlarge(picture, scale) if renderer in MOSAICS else picture
        fig = Figure(figsize=(6, 6 * picture.shape[0] / picture.shape[1] + 0.6), dpi=100)
        ax = fig.add_subplot()
        ax.imshow(picture, interpolation="nearest")
        ax.set_axis_off()
        ax.set_title(title, fontsize=9)
        FigureCanvasAgg(fig).draw()
        return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    maps = exp.array.reshape(-1, *exp.array.shape[-2:])
    n = len(maps)
    columns = exp.array.shape[-3] if exp.array.ndim == 4 else min(n, 4)
    rows = int(np.ceil(n / columns))
    lo, hi = float(maps.min()), float(maps.max())
    hi = hi if hi > lo else lo + 1e-12
    side = 3.2 if n == 1 else 2.2
    fig = Figure(figsize=(side * columns + 1.0, side * rows + 0.7), dpi=110)
    axes = fig.subplots(rows, columns, squeeze=False)
    h, w = exp.crop.shape[:2]
    image = None
    for i, ax in enumerate(axes.flat):
        ax.set_axis_off()
        if i >= n:
            continue
        ax.imshow(exp.crop)
        image = ax.imshow(overlays.upsample(maps[i], (h, w)), cmap=cmap, alpha=alpha, vmin=lo, vmax=hi)
        if n > 1:
            ax.set_title(_tile_name(exp, i), fontsize=8)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8)
    fig.suptitle(title, fontsize=9)
    FigureCanvasAgg(fig).draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()


def _tile_name(exp: Explanation, i: int) -> str:
    both = exp.params.get("direction") == "both"
    if both and exp.params.get("head") is not None:
        return ("attends to", "attended by")[i]
    if both:  # token maps, both directions: a row of heads each
        heads = exp.array.shape[1]
        return f"{('attends to', 'attended by')[i // heads]}, head {i % heads}"
    return f"head {i}"


def distance_plot(distance: np.ndarray, title: str = "") -> np.ndarray:
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
    ax.set_title(shown_path(title or "Mean attention distance per head"), fontsize=9)
    if heads <= 16:
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()
