"""Click a point, find it in another image: the cosine similarity of one patch of image A to every patch of image B,
its best match, and the mutual nearest neighbours of the two images, from one block's patch features — the block's
output tokens, or the keys or queries of its attention, the facets Amir et al. compare ("Deep ViT Features as Dense
Visual Descriptors", `ShirAmir/dino-vit-features`: `extractor.py` `_get_hook` recomputes the block's qkv projection
and `extract_descriptors` lays every head's keys side by side; their default is the key of block 11 of 12, ours the
token of the last block).

Points are in the image's own pixels (x to the right, y down, pixel centres at integers). A point is mapped into the
crop the model sees (`LoadedModel.crop_box`) and to the patch under it; a match goes back to the image through the
same box. With `refine`, the features are interpolated bilinearly between patch centres, as DIFT upsamples its
feature maps (Tang et al., "Emergent Correspondence from Image Diffusion", NeurIPS 2023): the point's own feature in A
against every pixel around the best patch in B, for a match between patch centres.
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
from vitstudio.core.dense.settings import FACETS
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import attention_modules, trunk_blocks

TOKENS = FACETS[0]  # the block's output tokens (a facet, not the token-map analysis of the registry)


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

    def to_crop(self, x: float, y: float) -> tuple[float, float]:
        """The image pixel (x, y) in the crop's continuous coordinates (u, v); ValueError outside the crop."""
        top, left, h, w = self.box
        u, v = (x + 0.5 - left) * self.input_hw[1] / w, (y + 0.5 - top) * self.input_hw[0] / h
        if not (0 <= u < self.input_hw[1] and 0 <= v < self.input_hw[0]):
            raise ValueError(f"the point {x:g},{y:g} lies outside the part of the image the model sees (x "
                             f"{left}..{left + w - 1}, y {top}..{top + h - 1})")
        return u, v

    def to_patch(self, x: float, y: float) -> tuple[int, int]:
        """The (row, col) of the patch under the image pixel (x, y); ValueError outside the crop."""
        u, v = self.to_crop(x, y)
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
    if facet == TOKENS:
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
    tokens = facet_tokens(loaded, torch.stack([loaded.to_tensor(loaded.crop(im)) for im in images]), layer, facet)
    return [Placed(t, (im.height, im.width), loaded.crop_box((im.height, im.width)), loaded.input_hw)
            for t, im in zip(tokens, images)]


def facet_tokens(loaded: LoadedModel, x: torch.Tensor, layer: int, facet: str) -> np.ndarray:
    """(B, gh, gw, D) patch features of the batch `x` at block `layer` in `facet` (checked by the caller); keys and
    queries lay every head's side by side (D = heads × head_dim), as Amir et al.'s `extract_descriptors`."""
    sink: list[torch.Tensor] = []
    # the hook sits on the shared module: under the model's lock, or another thread's forward fills the sink first
    with loaded.lock, _facet_hook(loaded, layer, facet, sink) if facet != TOKENS else contextlib.nullcontext():
        tokens = layer_tokens(loaded, x, [layer])[layer].patches  # (B, gh, gw, C)
    if facet == TOKENS:
        return tokens
    b, heads, n, d = sink[0].shape
    gh, gw = tokens.shape[1:3]
    per_token = sink[0].float().permute(0, 2, 1, 3).reshape(b, n, heads * d)[:, n - gh * gw:]  # prefix first
    return per_token.reshape(b, gh, gw, heads * d).cpu().numpy()


def separate_facets(model, analysis) -> str | None:
    """The registry's check: None when every block's attention gives its keys and queries apart."""
    for i, trunk in enumerate(trunk_blocks(model)):
        modules = attention_modules(trunk.block)
        if len(modules) != 1 or not hasattr(modules[0], "k_norm"):
            return (f"{type(model).__name__}'s block {i} has no separate keys and queries ViT Studio can read "
                    f"(timm's Attention and EVA's expose them), so {analysis.title.lower()} is not defined for it; "
                    f"Similarity to patch (Embeddings) compares its tokens.")
    return None


def explain_facet_similarity(loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    """The registry's compute: (gh, gw) cosine similarity of one patch's key (or query) to every patch's key (or
    query) of the same image at block `layer` (Amir et al.'s facets within one image)."""
    features = facet_tokens(loaded, x[:1], params["layer"], params["facet"])[0]  # (gh, gw, D)
    return unit_rows(features) @ unit_rows(features[tuple(params["patch"])]), {}  # explain() checked the patch


def similarity_map(a: Placed, b: Placed, patch: tuple[int, int]) -> np.ndarray:
    """(gh_b, gw_b) cosine similarity of A's patch (row, col) to every patch of B."""
    query = unit_rows(a.features[patch])
    return unit_rows(b.features) @ query


def best_match(sim: np.ndarray, b: Placed) -> tuple[tuple[float, float], float]:
    """((x, y) in B's image pixels, similarity) of the map's highest patch, at its centre."""
    r, c = np.unravel_index(int(np.argmax(sim)), sim.shape)
    (gh, gw), (ih, iw) = sim.shape, b.input_hw
    return b.to_image((c + 0.5) * iw / gw, (r + 0.5) * ih / gh), float(sim[r, c])


def sample(features: np.ndarray, uv: np.ndarray, input_hw: tuple[int, int]) -> torch.Tensor:
    """(n, D) features at crop pixel positions (n, 2) = (u, v), bilinear between patch centres (a patch's feature
    sits at its centre; beyond the outer centres the edge's), as DIFT upsamples its feature maps."""
    t = torch.from_numpy(np.ascontiguousarray(features, np.float32)).permute(2, 0, 1)[None]  # (1, D, gh, gw)
    where = torch.from_numpy(np.asarray(uv, np.float32) / np.asarray(input_hw[::-1], np.float32) * 2 - 1)
    return F.grid_sample(t, where[None, None], mode="bilinear", padding_mode="border", align_corners=False)[0, :, 0].T


def refined_match(a: Placed, b: Placed, uv: tuple[float, float], sim: np.ndarray
                  ) -> tuple[tuple[float, float], float]:
    """Sub-patch precision: the point's own feature (A's features interpolated at the point) compared with B's
    features interpolated at every pixel of the best patch and its eight neighbours; the most similar pixel.
    Interpolating the similarity map itself would not do: a bilinear surface peaks only at the patch centres."""
    r, c = np.unravel_index(int(np.argmax(sim)), sim.shape)
    (gh, gw), (ih, iw) = b.grid, b.input_hw
    vs = np.arange(int(max(0, (r - 1) * ih / gh)), int(min(ih, (r + 2) * ih / gh))) + 0.5
    us = np.arange(int(max(0, (c - 1) * iw / gw)), int(min(iw, (c + 2) * iw / gw))) + 0.5
    grid = np.stack(np.meshgrid(us, vs), -1).reshape(-1, 2)  # (n, 2) pixel centres as (u, v)
    query = F.normalize(sample(a.features, np.asarray([uv]), a.input_hw), dim=-1)[0]
    values = F.normalize(sample(b.features, grid, b.input_hw), dim=-1) @ query
    best = int(values.argmax())
    return b.to_image(*grid[best]), float(values[best])


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
        sim = similarity_map(a, b, patch)
        (mx, my), value = refined_match(a, b, a.to_crop(x, y), sim) if refine else best_match(sim, b)
        rows.append({"point": [x, y], "match": [round(mx, 2), round(my, 2)], "similarity": round(value, 6),
                     "patch_a": list(patch)})
    return rows
