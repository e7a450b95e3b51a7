"""How faithful a patch map is to the model: deletion and insertion curves (Petsiuk et al., RISE 2018).

The protocol, exactly, so scores are comparable between methods, models and runs:

- target: the model's top-1 class on the original input;
- ranking: patches by the map's value, highest first, ties by the lower patch index (row-major);
- deletion: at step i = 0…S the first round(i·P/S) ranked patches of the model's INPUT tensor are set to 0 (the mean
  colour after normalisation); the curve is the target's softmax probability at each step; the score is the
  trapezoid area under it over [0, 1] (lower = more faithful). round() is Python's (halves to even).
- insertion: the same ranking, starting from a blurred copy of the input tensor (a Gaussian blur of `sigma` input
  pixels, by default one patch side, kernel 2·⌈3σ⌉+1 but at most 2·side−1, reflect padding: torchvision's
  `gaussian_blur`) and restoring the original patches in ranked order; area under the curve (higher = more
  faithful). Half a patch side left the bundled digits model 88 % sure of a blurred digit (98 % of its confidence
  on the original), so insertion could not tell maps apart; one patch side brings that to 43 %.
- a map of a typed text (the text map, or any map measured with `text=`): the curves follow the cosine
  similarity of the image to the text (the model's output under `text_map.similarity_head`) instead of a class
  probability; every map and the baselines are measured against that same score.
- baselines: a random ranking (the mean over seeds 0…4 of numpy's `default_rng(seed).permutation(P)`) and the
  map's own ranking reversed (lowest first), for reference.

The S+1 inputs of a curve go through the model as batches. Maps come from the analysis registry: any entry whose
result is one map on the patch grid can be measured (`--methods`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field

import numpy as np
import torch

from vitstudio.core.analysis import registry
from vitstudio.core.models.model import LoadedModel

RANDOM_SEEDS = 5


@dataclass(frozen=True)
class Protocol:
    steps: int = 16  # S: the curves have S + 1 points
    blur_sigma: float | None = None  # insertion's start, in input pixels; None: one patch side
    random_seeds: int = RANDOM_SEEDS
    batch_size: int = 64

    def sigma(self, loaded: LoadedModel) -> float:
        return float(self.blur_sigma) if self.blur_sigma is not None else float(max(loaded.patch_size))


@dataclass(frozen=True)
class Curves:
    deletion: np.ndarray  # (S + 1,) target probability as ranked patches are zeroed
    insertion: np.ndarray  # (S + 1,) target probability as ranked patches are restored into the blurred input

    @property
    def deletion_auc(self) -> float:
        return area(self.deletion)

    @property
    def insertion_auc(self) -> float:
        return area(self.insertion)


@dataclass(frozen=True)
class ImageFaithfulness:
    image: str
    target: int
    methods: dict[str, Curves]  # method -> its curves
    reversed: dict[str, Curves]  # method -> the curves of its ranking reversed
    random: Curves  # mean curves of the random rankings (same areas as the mean of their areas: area is linear)
    errors: dict[str, str] = field(default_factory=dict)  # method -> why it could not be measured on this image
    score: str = "probability"  # what the curves follow: the target class's probability, or "similarity to 'TEXT'"


def area(curve: np.ndarray) -> float:
    """Trapezoid area of a curve sampled at S + 1 equally spaced points of [0, 1]."""
    c = np.asarray(curve, dtype=np.float64)
    return float((c[:-1] + c[1:]).sum() / (2 * (len(c) - 1)))


def ranking(values: np.ndarray) -> np.ndarray:
    """Patch indices, highest value first, ties by the lower index; NaN ranks last."""
    flat = np.nan_to_num(np.asarray(values, dtype=np.float64).ravel(), nan=-np.inf)
    return np.lexsort((np.arange(flat.size), -flat))


def random_rankings(patches: int, seeds: int = RANDOM_SEEDS) -> list[np.ndarray]:
    return [np.random.default_rng(seed).permutation(patches) for seed in range(seeds)]


def step_masks(order: np.ndarray, grid: tuple[int, int], patch_px: tuple[int, int], steps: int) -> torch.Tensor:
    """(S + 1, 1, H, W) bool: True where step i has replaced a pixel (the first round(i·P/S) ranked patches)."""
    gh, gw = grid
    ph, pw = patch_px
    position = np.empty(gh * gw, dtype=np.int64)
    position[np.asarray(order)] = np.arange(gh * gw)  # patch index -> its place in the ranking
    place = np.repeat(np.repeat(position.reshape(gh, gw), ph, 0), pw, 1)  # (H, W)
    counts = np.array([round(i * gh * gw / steps) for i in range(steps + 1)])
    return torch.from_numpy(place[None] < counts[:, None, None])[:, None]


def blurred(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """The insertion start: x (1, 3, H, W) under a Gaussian blur of `sigma` pixels."""
    from torchvision.transforms.functional import gaussian_blur

    side = min(x.shape[-2:])
    k = min(2 * int(np.ceil(3 * sigma)) + 1, 2 * side - 1)  # reflect padding must stay inside the image
    return gaussian_blur(x, [k, k], [sigma, sigma])


def probabilities(loaded: LoadedModel, inputs: torch.Tensor, target: int, batch_size: int,
                  raw: bool = False) -> np.ndarray:
    """(n,) softmax probability of `target` for each input (its raw output with `raw`: a similarity), forwarded
    in batches."""
    out = []
    with loaded.lock, torch.inference_mode(), loaded.autocast():
        for start in range(0, len(inputs), batch_size):
            logits = loaded.model(inputs[start:start + batch_size].to(loaded.device)).float()
            out.append((logits if raw else logits.softmax(-1))[:, target].cpu())
    return torch.cat(out).double().numpy()


def top1(loaded: LoadedModel, x: torch.Tensor) -> int:
    """The model's top-1 class for one preprocessed image x (1, 3, H, W): the class every curve follows."""
    with loaded.lock, torch.inference_mode(), loaded.autocast():
        return int(loaded.model(x.to(loaded.device)).float().argmax(-1)[0])


def curves(loaded: LoadedModel, x: torch.Tensor, order: np.ndarray, target: int, protocol: Protocol,
           start: torch.Tensor | None = None, raw: bool = False) -> Curves:
    """Deletion and insertion curves of one ranking of the patches of x (1, 3, H, W); `start` is the blurred
    copy (computed when not given)."""
    masks = step_masks(order, loaded.grid_size, loaded.patch_size, protocol.steps)
    x = x.cpu().float()
    start = blurred(x, protocol.sigma(loaded)) if start is None else start
    deleted = x * ~masks  # (S + 1, 3, H, W)
    inserted = torch.where(masks, x, start)
    probs = probabilities(loaded, torch.cat([deleted, inserted]), target, protocol.batch_size, raw)
    return Curves(probs[:protocol.steps + 1], probs[protocol.steps + 1:])


def method_map(loaded: LoadedModel, x: torch.Tensor, method: str, target: int, **given) -> np.ndarray:
    """The registered analysis `method` on x, checked to be one map on the patch grid. Methods that explain a
    class explain the faithfulness target."""
    from vitstudio.core.analysis.explain import validate

    params = validate(loaded, method, **{**given, "target": target})
    arr, _ = registry.get(method).run(loaded, x, params)
    arr = np.asarray(arr, dtype=np.float64)
    if arr.shape != tuple(loaded.grid_size):
        raise ValueError(f"'{method}' gives an array of shape {arr.shape}, not one map on the "
                         f"{loaded.grid_size[0]}×{loaded.grid_size[1]} patch grid, so it ranks no patches.")
    return arr


def _mean_curves(all_curves: list[Curves]) -> Curves:
    return Curves(np.mean([c.deletion for c in all_curves], 0), np.mean([c.insertion for c in all_curves], 0))


def image_faithfulness(loaded: LoadedModel, x: torch.Tensor, methods: Iterable[str], protocol: Protocol = Protocol(),
                       image: str = "", maps: dict[str, np.ndarray] | None = None, **given) -> ImageFaithfulness:
    """Every method's curves, its reversed ranking's and the random baseline's, for one preprocessed image
    x (1, 3, H, W). `maps` may supply precomputed maps (method -> (gh, gw)); the others are computed. With a
    `text` (CLIP-style models), the curves follow the image's similarity to it."""
    text = str(given.get("text") or "").strip()
    if text:
        from vitstudio.core.analysis.text_map import similarity_head

        with similarity_head(loaded, text):  # the model's one output is cos(image, text) meanwhile
            found = _image_faithfulness(loaded, x, methods, protocol, image, maps, raw=True, **given)
        return dataclasses.replace(found, score=f"similarity to '{text}'")
    return _image_faithfulness(loaded, x, methods, protocol, image, maps, **given)


def _image_faithfulness(loaded: LoadedModel, x: torch.Tensor, methods: Iterable[str], protocol: Protocol,
                        image: str, maps: dict[str, np.ndarray] | None, raw: bool = False,
                        **given) -> ImageFaithfulness:
    target = top1(loaded, x)
    start = blurred(x.cpu().float(), protocol.sigma(loaded))
    patches = int(np.prod(loaded.grid_size))
    random = _mean_curves([curves(loaded, x, order, target, protocol, start, raw)
                           for order in random_rankings(patches, protocol.random_seeds)])
    found, flipped, errors = {}, {}, {}
    for method in methods:
        try:
            values = (maps or {}).get(method)
            values = method_map(loaded, x, method, target, **given) if values is None else values
        except (ValueError, RuntimeError) as exc:  # one method that cannot run never stops the others
            errors[method] = str(exc)
            continue
        order = ranking(values)
        found[method] = curves(loaded, x, order, target, protocol, start, raw)
        flipped[method] = curves(loaded, x, order[::-1], target, protocol, start, raw)
    return ImageFaithfulness(image, target, found, flipped, random, errors)


# -- a folder -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MethodSummary:
    method: str
    images: int
    deletion_mean: float
    deletion_std: float
    insertion_mean: float
    insertion_std: float
    beats_random_deletion: float  # share of images where its deletion area is below the random one
    beats_random_insertion: float  # share of images where its insertion area is above the random one
    reversed_deletion_mean: float
    reversed_insertion_mean: float


def summarise(results: list[ImageFaithfulness]) -> dict[str, MethodSummary]:
    """Per method (and the random baseline, as 'random'): mean and spread (population std) of both areas over
    the images where it ran, and the share of those images where it beats random."""
    out = {}
    methods = list(dict.fromkeys(m for r in results for m in r.methods))
    for method in methods:
        rows = [r for r in results if method in r.methods]
        dele = np.array([r.methods[method].deletion_auc for r in rows])
        ins = np.array([r.methods[method].insertion_auc for r in rows])
        rdel = np.array([r.random.deletion_auc for r in rows])
        rins = np.array([r.random.insertion_auc for r in rows])
        out[method] = MethodSummary(
            method, len(rows), dele.mean(), dele.std(), ins.mean(), ins.std(), float((dele < rdel).mean()),
            float((ins > rins).mean()), float(np.mean([r.reversed[method].deletion_auc for r in rows])),
            float(np.mean([r.reversed[method].insertion_auc for r in rows])))
    if results:
        rdel = np.array([r.random.deletion_auc for r in results])
        rins = np.array([r.random.insertion_auc for r in results])
        out["random"] = MethodSummary("random", len(results), rdel.mean(), rdel.std(), rins.mean(), rins.std(),
                                      float("nan"), float("nan"), float("nan"), float("nan"))
    return out


@dataclass(frozen=True)
class FolderProgress:
    done: int
    total: int
    image: str


def faithfulness_over(loaded: LoadedModel, paths: list[str], methods: list[str], protocol: Protocol = Protocol(),
                      cancel=None, **given
                      ) -> Generator[FolderProgress, None, tuple[list[ImageFaithfulness], list[tuple[str, str]]]]:
    """Each readable image's faithfulness, yielding progress after each; returns (results, (path, reason) of the
    images that could not be read). Stops early, keeping what is done, when `cancel` is set."""
    from vitstudio.core.data.images import ImageReadError, read_image

    results, errors = [], []
    for i, path in enumerate(paths):
        if cancel is not None and cancel.cancelled:
            break
        try:
            x = loaded.to_tensor(loaded.crop(read_image(path)))[None]
        except ImageReadError as exc:
            errors.append((exc.path, exc.reason))
            continue
        results.append(image_faithfulness(loaded, x, methods, protocol, str(path), **given))
        yield FolderProgress(i + 1, len(paths), str(path))
    return results, errors


def faithfulness_job(cancel, loaded: LoadedModel, image, method: str, text: str | None = None) -> ImageFaithfulness:
    """The GUI's view job: one method's curves and the baselines for one PIL image (for the text map, against
    the similarity to its text)."""
    given = {"text": text} if text else {}
    return image_faithfulness(loaded, loaded.to_tensor(loaded.crop(image))[None], [method], **given)
