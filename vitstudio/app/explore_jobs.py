"""The explorers' jobs (Attention, Embeddings, Model internals, Compare and its Layers page, Faithfulness):
module-level, every input passed explicitly, run by whichever runner the face gives (the window's workers, a
script's own thread). The core is imported inside each job: the app layer loads no torch until a job runs."""

from __future__ import annotations

import sys

from vitstudio.core.analysis import registry

# a CLIP-style second model takes the current model's class names (up to this many: 1,000 ImageNet names times 80
# prompt templates would keep the text tower busy for minutes on a CPU)
MAX_SHARED_CLASSES = 200


# -- Attention: the entries' own view jobs are in the core, named by the registry --------------------------------
# The shared per-(model, image) overview (every layer's head maps, rollout, distances from one forward): the head
# grid, the distance plot and the entries whose view job it is all read it.
OVERVIEW = "overview"


def drawn_over_image(analysis) -> bool:
    """Drawn over the image: an entry with a view of its own, or one with only a compute function that returns a
    map of the patch grid (explained once per request: `entry_job`)."""
    return analysis.view is not None or (analysis.renderer == "overlay" and analysis.needs_image
                                         and not analysis.folder and analysis.compute is not None)


def attention_methods() -> tuple[str, ...]:
    """The registered attention analyses the Attention tab draws over the image (head maps, rollout, …); the folder
    analysis (attention distance) has its own plot."""
    return tuple(n for n in registry.names("attention") if drawn_over_image(registry.get(n)))


def job_slot(analysis) -> str:
    """The job slot an entry's view reads, named by the entry: its own name, or the overview's for the entries
    drawn from the one forward they share (head maps, rollout, an attention toy). Read from the entry's reference,
    not by loading it: the App is built with the window's frame, before torch is imported (gui/startup.py)."""
    job = analysis.view_job
    module, _, name = registry.OVERVIEW_JOB.partition(":")
    if job == registry.OVERVIEW_JOB or (callable(job) and job is getattr(sys.modules.get(module), name, None)):
        return OVERVIEW
    return analysis.name


def job_keys(analysis) -> tuple[str, ...]:
    """The view fields an entry's job depends on (besides the model and image)."""
    return analysis.view_keys if analysis.view_job is not None else analysis.param_names


def overview_job(cancel, model, image, fusion: str, discard: float):
    """The shared overview of one image: (crop, AttentionOverview), or (crop, None) for windowed models."""
    from vitstudio.core.analysis.attention_views import overview_job as overview

    return overview(cancel, model, image, fusion, discard)


def entry_view(exp, params: dict, model):
    """(map, text) of an `entry_job` result: its (gh, gw) array, titled with the parameters it was made with."""
    analysis = registry.get(exp.method)
    if exp.array.ndim != 2:
        return None, f"{analysis.title} returned an array of shape {exp.array.shape}, not a map of the patch grid."
    shown = ", ".join(f"{p.title.lower()} {exp.params[p.name]}" for p in analysis.params
                      if exp.params.get(p.name) is not None)
    return exp.array, analysis.title + (f" ({shown})" if shown else "")


def registered_job(cancel, registers, job, model, *inputs):
    """`job(cancel, model, *inputs)` on the model with a test-time register on `registers`' neurons (the context holds
    the model's lock, so no other job's forward sees the register)."""
    import inspect

    from vitstudio.core.analysis.registers import test_time_register

    with test_time_register(model, registers):
        result = job(cancel, model, *inputs)
        if inspect.isgenerator(result):
            result = yield from result
    return result


def register_choice(with_register: bool, page) -> object:
    """The neurons the Attention tab's maps take a test-time register on: the Registers page's, while its toggle is
    on and the page found some for the current model and folder, else None."""
    result = page.result if page is not None and with_register else None
    return result if result is not None and result.neurons else None


def folder_distance_job(cancel, model, method: str, folder: str):
    from vitstudio.core.analysis.explain import explain_folder

    return explain_folder(model, method, [folder], cancel=cancel)


def entry_job(cancel, model, image, method: str, *values):
    """An entry with only a compute function: `explain()` with the view's values of its parameters."""
    from vitstudio.core.analysis.explain import explain

    return explain(model, method, image, **dict(zip(registry.get(method).param_names, values)))


def is_token_maps(value) -> bool:
    """A windowed model's token maps (each head's attention inside the patch's window), not an overview."""
    from vitstudio.core.analysis.capture import TokenMaps

    return isinstance(value, TokenMaps)


# -- Embeddings ---------------------------------------------------------------------------------------------------
def tokens_job(cancel, model, image):
    """The crop and {layer: LayerTokens} of one image."""
    import numpy as np

    from vitstudio.core.analysis.embeddings import layer_tokens

    crop = model.crop(image)
    return np.asarray(crop), layer_tokens(model, model.to_tensor(crop)[None])


def token_view_job(cancel, layer_tokens, mode: str, params: dict, basis, grid):
    """What the Embeddings tab shows for one layer: the registered entry's token view, on the model's patch grid
    `grid`."""
    return registry.load(registry.get(mode).view)(layer_tokens, params, grid, basis)


def no_token_view():
    """The token view shown before any result (no map, no text)."""
    from vitstudio.core.analysis.embeddings import TokenView

    return TokenView(None)


# -- Model internals ----------------------------------------------------------------------------------------------
def internals_job(cancel, model) -> dict:
    """The picture of every registered model-intrinsic analysis of `model`, or why one does not apply."""
    from vitstudio.core.analysis.explain import explain, render

    out = {"model": model.uid}
    for method in registry.names("model"):
        try:
            exp = explain(model, method)
            out[method] = (exp, render(exp))
        except ValueError as exc:  # no learned pos-embed / hybrid stem
            out[method] = str(exc)
    return out


# -- Compare ------------------------------------------------------------------------------------------------------
def _analyse(model, image, method: str):
    """(crop, map, top-1 text) for one model, the registered analysis with its defaults (gradient rollout explains
    each model's own top-1); a headless model has no top-1, only its map."""
    from vitstudio.core.analysis.explain import explain
    from vitstudio.core.inference import classify

    exp = explain(model, method, image)
    if not model.labels:
        return exp.crop, exp.array, "no classes (a headless model)"
    pred = classify(model, [image], topk=1, keep_crops=False)[0]
    return exp.crop, exp.array, f"{pred.labels[0]} ({pred.probs[0] * 100:.1f}%)"


def shared_classes(main) -> tuple[str, ...]:
    """The class names a CLIP-style second model is given: the current model's, when it has a few."""
    labels = tuple(main.labels) if main is not None else ()
    return labels if 2 <= len(labels) <= MAX_SHARED_CLASSES else ()


def load_second_model(cancel, spec: str, device: str, precision: str, classes: tuple[str, ...], prompt: str | None):
    """The second model; a CLIP-style one classifies into `classes` (the current model's, with its prompt), so
    both answer the same question (e.g. a fine-tuned run against zero-shot on its classes)."""
    from vitstudio.core.models.loading import load_model

    return with_shared_classes(cancel, load_model(spec, None, device, precision), classes, prompt)


def with_shared_classes(cancel, loaded, classes: tuple[str, ...], prompt: str | None):
    from vitstudio.core.models.openclip import is_clip_style
    from vitstudio.core.models.zeroshot import prompt_of, with_classes

    if classes and is_clip_style(loaded) and (tuple(loaded.labels), prompt_of(loaded)) != (classes, prompt):
        return with_classes(loaded, list(classes), prompt)
    return loaded


def compare_job(cancel, model, other, image, method: str) -> list:
    """The current model's map, and the second model's once there is one (the tab showed two blank panes before)."""
    return [_analyse(m, image, method) for m in (model, other) if m is not None]


# -- Compare → Layers ---------------------------------------------------------------------------------------------
def cka_job(cancel, model, other, paths: list[str]):
    from vitstudio.core.folder.layer_compare import compare_layers

    return (yield from compare_layers(model, other, paths, cancel=cancel))


def pca_pair_job(cancel, model, other, image, layers: tuple[int, int]) -> list:
    """(crop, PCA colours in [0, 1]) of the image at block layers[0] of `model` and layers[1] of `other`."""
    from vitstudio.core.analysis.explain import explain
    from vitstudio.core.analysis.overlays import normalise

    out = []
    for loaded, layer in zip((model, other), layers):
        exp = explain(loaded, "pca", image, layer=layer)
        out.append((exp.crop, normalise(exp.array)))
    return out


# -- Faithfulness -------------------------------------------------------------------------------------------------
def faithfulness_job(cancel, loaded, image, method: str, text: str | None = None):
    """One method's deletion/insertion curves and the baselines for one image (core/analysis/faithfulness.py)."""
    from vitstudio.core.analysis.faithfulness import faithfulness_job as curves

    return curves(cancel, loaded, image, method, text)


def sanity_job(cancel, loaded, image, method: str):
    """The model-randomisation cascade for one method on one image (core/analysis/faithfulness_sanity.py)."""
    from vitstudio.core.analysis.faithfulness_sanity import sanity_job as cascade

    return cascade(cancel, loaded, image, method)


def insensitive() -> float:
    """The mean Spearman ρ with the trained model's map, everything randomised, at or above which a method is said
    to be insensitive to what the model learned."""
    from vitstudio.core.analysis.faithfulness_sanity import INSENSITIVE

    return INSENSITIVE


def unmeasurable(method: str | None, text: str | None, sanity: bool = False) -> str | None:
    """Why the map of `method` cannot be measured here, or None. The curves follow the predicted class's
    probability, or, for the text map, the image's similarity to its text; the sanity check re-draws the
    classifier first, so it measures maps of a class only. A map of a clicked patch explains neither."""
    if method is None or not registry.is_registered(method):
        return None
    analysis = registry.get(method)
    needed = [p.name for p in analysis.params if p.required]
    title = analysis.title.lower()
    if not analysis.one_map:  # head maps: one per head; a PCA: three channels (the registry's declared output)
        return (f"Faithfulness ranks the patches of one map of the class; the {title} is not one (it gives "
                f"{analysis.output}). Pick Rollout or an attribution method (LRP, occlusion…) to measure it.")
    if not needed:
        return None
    if "patch" in needed:
        return f"The {title} explains the patch you picked: faithfulness measures maps of a class or a text."
    if needed != ["text"]:
        return (f"The {title} shows where it fires, not why the model predicts a class: faithfulness measures maps "
                f"of a class or a text.")
    if sanity:
        return (f"The sanity check re-draws the classifier, so it measures maps of the predicted class; the {title} "
                f"explains the text you typed.")
    return None if text else f"Type a text first: the {title}'s curves follow the image's similarity to it."
