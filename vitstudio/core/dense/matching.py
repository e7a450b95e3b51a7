"""Click a point, find it in another image: the cosine similarity of one patch of image A to every patch of image B,
its best match, and the mutual nearest neighbours of the two images, from one block's patch features — the block's
output tokens, or the keys or queries of its attention, the facets Amir et al. compare ("Deep ViT Features as Dense
Visual Descriptors", `ShirAmir/dino-vit-features`: `extractor.py` hooks the qkv projection and keeps the keys of
every head side by side).

Points are in the image's own pixels (x to the right, y down, pixel centres at integers). A point is mapped into the
crop the model sees (`LoadedModel.crop_box`) and to the patch under it; a match goes back to the image through the
same box. With `refine`, the similarity map (values at patch centres) is upsampled bilinearly to the crop's pixels and
the match is its highest pixel, not the best patch's centre: sub-patch precision where neighbouring patches both
resemble the point.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from vitstudio.core.analysis.embeddings import layer_tokens
from vitstudio.core.concepts.tokens import check_layer
from vitstudio.core.dense.retrieval import unit_rows
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import attention_modules, trunk_blocks

FACETS = ("token", "key", "query")


@dataclass(frozen=True)
class Placed:
    """One image as the model sees it: its patch features and where its crop lies in it."""

    features: np.ndarray  # (gh, gw, D)
    image_hw: tuple[int, int]
    box: tuple[int, int, int, int]  # (top, left, height, width) of the crop in the image
    input_hw: tuple[int, int]

    @property
    def grid(self) -> tuple[int, int]:
        return self.features.shape[:2]

    def to_patch(self, x: float, y: float) -> tuple[int, int]:
        """The (row, col) of the patch under the image pixel (x, y); ValueError outside the crop."""
        top, left, h, w = self.box
        u, v = (x + 0.5 - left) * self.input_hw[1] / w, (y + 0.5 - top) * self.input_hw[0] / h  # crop pixels
        if not (0 <= u < self.input_hw[1] and 0 <= v < self.input_hw[0]):
            raise ValueError(f"the point {x:g},{y:g} lies outside the part of the image the model sees (x "
                             f"{left}..{left + w - 1}, y {top}..{top + h - 1})")
        gh, gw = self.grid
        return int(v * gh // self.input_hw[0]), int(u * gw // self.input_hw[1])

    def to_image(self, u: float, v: float) -> tuple[float, float]:
        """Crop pixel coordinates (u right, v down, continuous) -> the image's (x, y)."""
        top, left, h, w = self.box
        return float(left + u * w / self.input_hw[1] - 0.5), float(top + v * h / self.input_hw[0] - 0.5)


def facet_refusal(loaded: LoadedModel, layer: int, facet: str) -> str | None:
    """None when block `layer` gives `facet`; else why not, in one sentence."""
    if facet not in FACETS:
        return f"the facet is one of {', '.join(FACETS)}, not '{facet}'"
    if facet == "token":
        return None
    modules = attention_modules(trunk_blocks(loaded.model)[layer].block)
    if len(modules) != 1 or not hasattr(modules[0], f"{facet[0]}_norm"):
        return (f"{type(loaded.model).__name__}'s block {layer} has no separate {facet}s ViT Studio can read (timm's "
                f"Attention and EVA's expose them); use --facet token")
    return None


@contextlib.contextmanager
def _facet_hook(loaded: LoadedModel, layer: int, facet: str, sink: list):
    """Keeps block `layer`'s keys or queries, (B, heads, N, head_dim) after their norm (before any RoPE), in `sink`."""
    module = attention_modules(trunk_blocks(loaded.model)[layer].block)[0]
    handle = getattr(module, f"{facet[0]}_norm").register_forward_hook(lambda _m, _i, out: sink.append(out))
    try:
        yield
    finally:
        handle.remove()


def facet_features(loaded: LoadedModel, images: list[Image.Image], layer: int | None = None,
                   facet: str = "token") -> list[Placed]:
    """Each image's patch features of block `layer` (the last by default) in `facet`, with where its crop lies."""
    layer = check_layer(loaded, loaded.token_depth - 1 if layer is None else layer)
    refusal = facet_refusal(loaded, layer, facet)
    if refusal:
        raise ValueError(refusal)
    x = torch.stack([loaded.to_tensor(loaded.crop(im)) for im in images])
    sink: list[torch.Tensor] = []
    with _facet_hook(loaded, layer, facet, sink) if facet != "token" else contextlib.nullcontext():
        tokens = layer_tokens(loaded, x, [layer])[layer].patches  # (B, gh, gw, C)
    if facet != "token":
        b, heads, n, d = sink[0].shape
        gh, gw = tokens.shape[1:3]
        per_token = sink[0].float().permute(0, 2, 1, 3).reshape(b, n, heads * d)[:, n - gh * gw:]  # prefix first
        tokens = per_token.reshape(b, gh, gw, heads * d).cpu().numpy()
    return [Placed(t, (im.height, im.width), loaded.crop_box((im.height, im.width)), loaded.input_hw)
            for t, im in zip(tokens, images)]


def similarity_map(a: Placed, b: Placed, patch: tuple[int, int]) -> np.ndarray:
    """(gh_b, gw_b) cosine similarity of A's patch (row, col) to every patch of B."""
    query = unit_rows(a.features[patch])
    return unit_rows(b.features) @ query


def best_match(sim: np.ndarray, b: Placed, refine: bool = False) -> tuple[tuple[float, float], float]:
    """((x, y) in B's image pixels, similarity) of the map's highest patch, or with `refine` of its highest pixel
    once bilinearly upsampled to the crop (the map's values sit at patch centres)."""
    if not refine:
        r, c = np.unravel_index(int(np.argmax(sim)), sim.shape)
        gh, gw = sim.shape
        u, v = (c + 0.5) * b.input_hw[1] / gw, (r + 0.5) * b.input_hw[0] / gh
        return b.to_image(u, v), float(sim[r, c])
    up = F.interpolate(torch.from_numpy(np.ascontiguousarray(sim, np.float32))[None, None], size=b.input_hw,
                       mode="bilinear", align_corners=False)[0, 0].numpy()
    v, u = np.unravel_index(int(np.argmax(up)), up.shape)
    return b.to_image(u + 0.5, v + 0.5), float(up[v, u])


def mutual_matches(a: Placed, b: Placed, top: int = 10) -> list[dict]:
    """The patch pairs that are each other's nearest neighbour (cosine), the `top` most similar first."""
    fa, fb = unit_rows(a.features.reshape(-1, a.features.shape[-1])), unit_rows(b.features.reshape(-1,
                                                                                                   b.features.shape[-1]))
    sim = fa @ fb.T  # (Pa, Pb)
    ab, ba = sim.argmax(1), sim.argmax(0)
    mutual = np.flatnonzero(ba[ab] == np.arange(len(fa)))
    order = mutual[np.argsort(-sim[mutual, ab[mutual]], kind="stable")][:top]
    return [{"a": _centre(a, int(i)), "b": _centre(b, int(ab[i])), "similarity": round(float(sim[i, ab[i]]), 6)}
            for i in order]


def _centre(p: Placed, index: int) -> list[float]:
    gh, gw = p.grid
    r, c = divmod(index, gw)
    x, y = p.to_image((c + 0.5) * p.input_hw[1] / gw, (r + 0.5) * p.input_hw[0] / gh)
    return [round(x, 2), round(y, 2)]


def match_points(a: Placed, b: Placed, points: list[tuple[float, float]], refine: bool = False) -> list[dict]:
    """Per point of A (its image's pixels): the best match in B's pixels and its similarity."""
    rows = []
    for x, y in points:
        patch = a.to_patch(x, y)
        (mx, my), value = best_match(similarity_map(a, b, patch), b, refine)
        rows.append({"point": [x, y], "match": [round(mx, 2), round(my, 2)], "similarity": round(value, 6),
                     "patch_a": list(patch)})
    return rows
