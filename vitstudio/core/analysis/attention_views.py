"""How the GUI shows the registry's attention entries: the jobs that compute what a view reads (run in a worker,
inputs passed explicitly) and the functions that read one map out of a job's result.

Head maps and rollout read the same per-(model, image) overview (`attention.overview`: every layer's head maps,
rollout and distances from one forward), so switching between them, moving the layer or the head costs nothing.
A view function takes (job result, params, loaded) and returns (map (gh, gw) or None, description)."""

from __future__ import annotations

import numpy as np

from vitstudio.core.analysis import attention
from vitstudio.core.files import counted
from vitstudio.core.models.structure import is_windowed


def _x(model, image):
    return model.to_tensor(model.crop(image))[None]


# -- jobs: fn(cancel, loaded, image, *the entry's view_keys values) -----------------------------------------
def overview_job(cancel, model, image, fusion: str, discard: float):
    """(crop, AttentionOverview), or (crop, None) for windowed models (only token maps apply inside windows)."""
    crop = model.crop(image)
    if is_windowed(model.model):
        return np.asarray(crop), None
    return np.asarray(crop), attention.overview(model, model.to_tensor(crop)[None], fusion, discard)


def gradient_job(cancel, model, image, target):
    return attention.gradient_rollout(model, _x(model, image), target)


def token_job(cancel, model, image, patch):
    return attention.token_maps(model, _x(model, image), patch)


# -- views: fn(job result, params, loaded) -> (map or None, text) ---------------------------------------------
def view_heads(value, params: dict, model):
    overview = value[1]
    if overview is None:  # windowed models have no overview
        return None, ""
    layer, head = params["layer"], params["head"]
    return overview.head_maps[layer, head], f"{attention.head_map_title(model, layer)}, layer {layer}, head {head}"


def view_rollout(value, params: dict, model):
    overview = value[1]
    if overview is None:
        return None, ""
    return overview.rollout, f"Attention rollout ({overview.fusion}, discard {overview.discard:.2f})"


def view_gradient_rollout(value, params: dict, model):
    cls = value.targets[0]
    return value.maps[0], f"Gradient rollout for class {cls}: {model.labels[cls]}"


def view_token(value, params: dict, model):
    layer, head = params["layer"], params["head"]
    heads = model.heads_at(layer)
    if head >= heads:  # Swin's early stages have fewer heads than its last
        return None, f"Layer {layer} has {counted(heads, 'head')} (0..{heads - 1}); pick one of them."
    to = params["direction"] == "to"
    arr = (value.attends_to if to else value.attended_by)[0, layer, head]
    text = f"Patch {params['patch']} {'attends to' if to else 'is attended by'}, layer {layer}, head {head}"
    if is_windowed(model.model):
        text += " — inside its window only (Swin attends within local windows; the rest has no attention)"
    return arr, text
