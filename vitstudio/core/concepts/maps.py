"""A concept on one image: the registry's "concept" entry (its map over the patch grid, in the Attention tab's
vocabulary and `explain --method concept`), and everything the Concepts panel reads off one image at once."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vitstudio.core.concepts.concepts_file import load_concepts, weights_path
from vitstudio.core.concepts.intervene import attribute, logits_with
from vitstudio.core.concepts.sae import Concepts
from vitstudio.core.concepts.tokens import concept_layers_refusal, patch_tokens
from vitstudio.core.folder.embedcache import model_fingerprint
from vitstudio.core.models.model import LoadedModel

_files: dict[tuple[str, int], Concepts] = {}  # (path, mtime) -> Concepts: a file is read once while unchanged
_fingerprints: dict[int, str] = {}  # LoadedModel.uid -> its fingerprint
_lock = threading.Lock()


def open_concepts(path: str | Path) -> Concepts:
    target = weights_path(path)
    try:
        key = (str(target.resolve()), target.stat().st_mtime_ns)
    except OSError:
        return load_concepts(target)  # says what is missing
    with _lock:
        if key not in _files:
            if len(_files) > 8:
                _files.clear()
            _files[key] = load_concepts(target)
        return _files[key]


def fingerprint_of(loaded: LoadedModel) -> str:
    with _lock:
        fingerprint = _fingerprints.get(loaded.uid)
    if fingerprint is None:
        fingerprint = model_fingerprint(loaded)
        with _lock:
            _fingerprints[loaded.uid] = fingerprint
    return fingerprint


def learned_before(loaded: LoadedModel, folder: str | Path) -> Path | None:
    """The newest concepts file the Concepts tab learned on `folder` for this model (its records in the data
    folder: `learn.default_output`), or None: what a restart, or a switch back, opens again."""
    import json

    from vitstudio.core.files import dataset_dir

    fingerprint = fingerprint_of(loaded)
    found = sorted((dataset_dir(folder) / "concepts").glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for sidecar in found:
        try:
            meta = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if meta.get("fingerprint") == fingerprint and weights_path(sidecar).is_file():
            return weights_path(sidecar)
    return None


def concepts_for(loaded: LoadedModel, path: str | Path) -> Concepts:
    """The concepts file at `path`, or a ValueError when it was learned on another model's tokens."""
    concepts = open_concepts(path)
    if concepts.meta.get("fingerprint") != fingerprint_of(loaded):
        learned = concepts.meta.get("model"), concepts.meta.get("weights")
        raise ValueError(f"{weights_path(path).name} was learned on the tokens of {learned[0]} ({learned[1]}), not "
                         f"of this model ({loaded.display_name}, {loaded.weights_source}): load that model, or "
                         f"learn concepts for this one.")
    misfit = _misfit(loaded, concepts)
    if misfit:
        raise ValueError(f"{weights_path(path).name} does not fit {loaded.display_name}: {misfit}; learn concepts "
                         f"for this model.")
    return concepts


def _misfit(loaded: LoadedModel, concepts: Concepts) -> str | None:
    """What in the file the model cannot take (a file naming this model's fingerprint may still be edited)."""
    width = getattr(loaded.model, "embed_dim", None)
    if concepts.layer >= loaded.token_depth:
        return f"it reads block {concepts.layer}, the model has blocks 0 to {loaded.token_depth - 1}"
    if list(concepts.meta["grid"]) != list(loaded.grid_size):
        return f"it reads a {concepts.meta['grid']} patch grid, the model's is {list(loaded.grid_size)}"
    if isinstance(width, int) and width != concepts.sae.width:
        return f"its concepts are {concepts.sae.width} wide, the model's tokens {width}"
    return None


def concept_maps(loaded: LoadedModel, concepts: Concepts, x: torch.Tensor) -> np.ndarray:
    """(gh, gw, n) every concept's activation on every patch of one image."""
    tokens = patch_tokens(loaded, x, concepts.layer)[0]
    return concepts.codes(tokens)


# -- the registry's entry -------------------------------------------------------------------------------------------
def has_concept_blocks(model, analysis) -> str | None:
    return concept_layers_refusal(model)


def check_concept(loaded: LoadedModel, params: dict) -> None:
    """The file exists, was learned on this model, and has the concept asked for."""
    concepts_for(loaded, params["concepts"]).check_index(params["concept"])


def explain_concept(loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    concepts = concepts_for(loaded, params["concepts"])
    index = concepts.check_index(params["concept"])
    maps = concept_maps(loaded, concepts, x)
    params["layer"] = concepts.layer
    return maps[..., index], {}


def concept_job(cancel, model: LoadedModel, image, concepts: str | None, concept: int):
    """(map (gh, gw), concept, its strongest activation) of `image`, once per (model, image, file, concept)."""
    found = concepts_for(model, concepts)
    index = found.check_index(concept)
    maps = concept_maps(model, found, model.to_tensor(model.crop(image))[None])
    return maps[..., index], index, float(maps[..., index].max())


def view_concept(value, params: dict, model) -> tuple[np.ndarray | None, str]:
    values, index, strongest = value
    return values, (f"Concept {index} on this image (strongest {strongest:.3g})" if strongest > 0
                    else f"Concept {index} does not fire on this image")


# -- the Concepts panel's reading of one image ---------------------------------------------------------------------
@dataclass(frozen=True)
class ImageConcepts:
    """One image through the SAE: every concept's map, the prediction with and without the factors given, and the
    class logit attributed to concepts."""

    maps: np.ndarray  # (gh, gw, n)
    scales: dict  # {concept: factor} the `after` logits were made with
    before: np.ndarray | None  # (classes,) probabilities of the model itself (None: a model without classes)
    after: np.ndarray | None  # (classes,) with the factors (None without any)
    target: int | None  # the class attributed (the top-1 before)
    drivers: np.ndarray | None  # (n,) activation × gradient of the target's logit

    def top_at(self, patch: tuple[int, int], count: int = 8) -> list[tuple[int, float]]:
        values = self.maps[patch[0], patch[1]]
        order = np.argsort(-values)[:count]
        return [(int(c), float(values[c])) for c in order if values[c] > 0]

    def top_overall(self, count: int = 8) -> list[tuple[int, float]]:
        strongest = self.maps.max((0, 1))
        order = np.argsort(-strongest)[:count]
        return [(int(c), float(strongest[c])) for c in order if strongest[c] > 0]


def read_image(cancel, model: LoadedModel, image, concepts: str, scales: tuple = ()) -> ImageConcepts:
    """Everything the panel shows of one image (`scales`: ((concept, factor), …), hashable for the job's key)."""
    found = concepts_for(model, concepts)
    x = model.to_tensor(model.crop(image))[None]
    maps = concept_maps(model, found, x)
    if model.num_classes == 0:  # features only: no prediction to change or attribute
        return ImageConcepts(maps, dict(scales), None, None, None, None)
    with model.lock, torch.inference_mode(), model.autocast():
        before = torch.softmax(model.model(x.to(model.device)).float(), -1)[0].cpu().numpy()
    after = None
    if scales:
        after = torch.softmax(torch.from_numpy(logits_with(model, found, x, dict(scales))), -1)[0].numpy()
    target = int(before.argmax())
    drivers, _ = attribute(model, found, x, target)
    return ImageConcepts(maps, dict(scales), before, after, target, drivers)
