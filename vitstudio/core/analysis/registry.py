"""One registry naming every analysis once (in the spirit of timm's `register_model`).

Each entry IS the analysis: what it is called (a key for files and the CLI, a title for people), which parameters
it takes (defaults, choices, ranges, help), whether it needs an image, the shape of what it returns, how it is
drawn, what computes it (`compute`), when it applies (`applies`) and how the GUI shows it (`view`). `explain()`,
the CLI's `--method` choices and help, the GUI's method lists, the Compare panel and every exported parameter file
read it, so the app has one vocabulary and one parameter-file format; nothing outside the registry and the modules
its entries point at branches on an analysis name.

Importable without torch: the CLI builds its parser from it. So the code an entry runs is named by a
"module:function" path (or given as a callable, e.g. by a test) and imported only when the entry is run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from vitstudio.core.fields import DIRECTIONS, DISCARD, FUSIONS, FieldSpec, Range

TEXT_KIND = "text"  # a Param typed as words (the text map's text) rather than picked or clicked
FILE_KIND = "file"  # a Param naming a file (the concept map's concepts file)
_SPEC_KINDS = {"layer": int, "head": int, "class": int, "patch": tuple, "choice": str, "float": float, "text": str,
               "file": str, "index": int}


Ref = str | Callable | None  # "package.module:function", or the function itself


ONE_MAP = "(gh, gw)"  # an entry's `output` when its result is one value per patch


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # 'layer' | 'head' | 'patch' | 'class' | 'choice' | 'float' | 'text' | 'file' | 'index'
    default: object
    help: str
    choices: tuple = ()
    range: Range | None = None  # for floats; layers/heads/classes depend on the model
    required: bool = False  # no default makes sense (a patch must be picked)
    label: str = ""  # what a form calls it (default: the name, capitalised)
    flag: str = ""  # the command line's option (default: --name)

    @property
    def title(self) -> str:
        return self.label or self.name.replace("_", " ").capitalize()

    @property
    def option(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def spec(self) -> FieldSpec:
        """The parameter as a field (a view state's control of it takes this spec)."""
        return FieldSpec(self.default, _SPEC_KINDS[self.kind], self.choices or None, self.range, help=self.help)


@dataclass(frozen=True)
class Analysis:
    name: str  # key: CLI --method, file names, parameter files
    title: str  # what people read in menus and titles
    group: str  # 'attention' | 'embeddings' | 'model'
    help: str
    output: str  # the returned array's shape, in words
    renderer: str  # 'overlay' (maps over the crop) | 'rgb' (a colour image per patch) | 'plot' | 'mosaic'
    params: tuple[Param, ...] = ()
    needs_image: bool = True
    compare: bool = False  # offered side by side in the Compare panel
    # -- what runs (each a "module:function" path, imported when used, or a callable) ------------------------
    compute: Ref = None  # fn(loaded, x (1, 3, H, W) or None, params) -> (array, extra dict); may add to params
    applies: tuple[Ref, ...] = ()  # checks fn(model, analysis) -> None or why not; the first reason wins
    over_folder: Ref = None  # folder analyses: fn(loaded, paths, batch_size, cancel, decoder) -> (result, errors)
    # GUI, by group: embeddings: fn(LayerTokens, params, grid, basis) -> embeddings.TokenView; attention: the entry's
    # `view_job` fn(cancel, loaded, image, *view_keys values) is run once per request (entries with the same job share
    # its result: the per-(model, image) overview) and fn(job result, params, loaded) -> (map or None, text) reads it
    view: Ref = None
    view_job: Ref = None
    view_keys: tuple[str, ...] = ()  # the view-state fields the view job depends on (besides model and image)
    caption: str = ""  # what a model-intrinsic picture shows, in a sentence
    options: tuple[str, ...] = ()  # GUI-only options the view offers (e.g. 'fixed-basis')
    check: Ref = None  # fn(loaded, params) raising ValueError: parameters only the model can check (a file's model)

    def run(self, loaded, x, params: dict):
        """(array, extra): the analysis of the preprocessed batch `x` (None for model-only analyses)."""
        return load(self.compute)(loaded, x, params)

    def why_not(self, model) -> str | None:
        """None when the analysis applies to `model` (an nn.Module), else one sentence saying why not."""
        for check in self.applies:
            reason = load(check)(model, self)
            if reason is not None:
                return reason
        return None

    @property
    def folder(self) -> bool:
        """A folder means "averaged over its images" rather than "each image": the entry says how (over_folder)."""
        return self.over_folder is not None

    @property
    def one_map(self) -> bool:
        """Its result is one map on the patch grid (what faithfulness ranks, what a mask cuts), as `output` says."""
        return self.output == ONE_MAP

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)


REGISTRY: dict[str, Analysis] = {}


def load(ref: Ref) -> Callable:
    """The function an entry names: a callable as it is, or "package.module:function" imported now."""
    if ref is None or callable(ref):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def register(analysis: Analysis) -> Analysis:
    if analysis.name in REGISTRY:
        raise ValueError(f"Analysis '{analysis.name}' is registered twice.")
    REGISTRY[analysis.name] = analysis
    return analysis


def get(name: str) -> Analysis:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"Unknown method '{name}'; use one of {', '.join(REGISTRY)}.") from None


def is_registered(name: str) -> bool:
    return name in REGISTRY


def unregister(name: str) -> None:
    """Remove an entry (tests that register a toy analysis clean up with it)."""
    REGISTRY.pop(name, None)


def names(group: str | None = None, *, compare: bool | None = None, folder: bool | None = None,
          viewed: bool | None = None, param: str | None = None) -> tuple[str, ...]:
    """Registered names, in registration order, filtered by group, Compare, folder averages, whether the GUI has a
    view of them, and a parameter they take."""
    return tuple(a.name for a in REGISTRY.values()
                 if (group is None or a.group == group) and (compare is None or a.compare == compare)
                 and (folder is None or a.folder == folder) and (viewed is None or (a.view is not None) == viewed)
                 and (param is None or param in a.param_names))


def resolve(name: str, **given) -> dict:
    """The parameters `name` takes, defaults filled in and checked (choices, float ranges, required ones).
    Parameters the analysis does not take are dropped, so a caller can pass everything it knows."""
    analysis = get(name)
    out = {}
    for p in analysis.params:
        value = given.get(p.name)
        value = p.default if value is None else value
        if value is None and p.required:
            raise ValueError(f"--{p.name} is required for the '{name}' method ({p.help}).")
        if p.choices and value not in p.choices:
            raise ValueError(f"{p.name} must be one of {', '.join(map(str, p.choices))}, not '{value}'.")
        if p.range is not None and value is not None and float(value) not in p.range:
            raise ValueError(f"{p.name} must be in {p.range}, not {value}.")
        out[p.name] = tuple(value) if p.kind == "patch" and value is not None else value
    return out


def record(name: str, params: dict, *, model: str | None = None, image: str | None = None, **extra) -> dict:
    """The parameter file written beside every exported array, by the CLI and the GUI alike."""
    analysis = get(name)
    doc = {"method": name, "title": analysis.title, "model": model, "image": image}
    doc.update({k: list(v) if isinstance(v, tuple) else v for k, v in params.items()})
    doc.update(extra)
    return doc


# -- the analyses ------------------------------------------------------------------------------------
_LAYER = Param("layer", "layer", -1, "0-based block index; negative counts from the end")
_HEAD_OR_ALL = Param("head", "head", None, "one head (0-based); all heads when not given")
_HEAD = Param("head", "head", 0, "attention head (0-based)")
_PATCH = Param("patch", "patch", None, "ROW,COL of the patch", required=True)
_ATT = "vitstudio.core.analysis.attention:"
_VIEW = "vitstudio.core.analysis.attention_views:"
_EMB = "vitstudio.core.analysis.embeddings:"
_INT = "vitstudio.core.analysis.intrinsic:"
_CHECK = "vitstudio.core.analysis.applicability:"
_GLOBAL = (_CHECK + "global_attention", _CHECK + "readable_attention")  # not inside windows, readable blocks
OVERVIEW_KEYS = ("fusion", "discard")  # what the shared attention overview (one forward, several views) depends on
OVERVIEW_JOB = _VIEW + "overview_job"  # the shared overview's job, named: entries name it, none imports it
_OVERVIEW = dict(view_job=OVERVIEW_JOB, view_keys=OVERVIEW_KEYS)

register(Analysis(
    "heads", "Head map", "attention", "CLS attention of each head of one layer (mean attention received when the "
    "model has no class token)", "(heads, gh, gw), or (gh, gw) for one head", "overlay", (_LAYER, _HEAD_OR_ALL),
    compute=_ATT + "explain_heads", applies=_GLOBAL, view=_VIEW + "view_heads", **_OVERVIEW))
register(Analysis(
    "token", "Token map", "attention", "what one patch attends to, or what attends to it, in one layer",
    "(heads, gh, gw) for 'to'/'by'; (2, heads, gh, gw) for 'both'; without the heads axis for one head", "overlay",
    (_LAYER, _HEAD_OR_ALL, _PATCH,
     Param("direction", "choice", "both", "token maps: what the patch attends to, what attends to it, or both",
           DIRECTIONS, label="Token map")),
    compute=_ATT + "explain_token", applies=(_CHECK + "readable_attention",), view=_VIEW + "view_token",
    view_job=_VIEW + "token_job", view_keys=("patch",)))
register(Analysis(
    "rollout", "Rollout", "attention", "attention rollout (Abnar & Zuidema 2020): fused heads, +I, renormalised, "
    "multiplied through the layers", ONE_MAP, "overlay",
    (Param("fusion", "choice", "mean", "how the heads of a layer are combined", FUSIONS, label="Rollout fusion"),
     Param("discard", "float", 0.0, "fraction of the smallest attention weights dropped per layer",
           range=DISCARD, label="Discard ratio")), compare=True,
    compute=_ATT + "explain_rollout", applies=_GLOBAL, view=_VIEW + "view_rollout", **_OVERVIEW))
register(Analysis(
    "gradient-rollout", "Gradient rollout", "attention", "class-specific rollout with gradient-weighted attention "
    "(Chefer et al. 2021)", ONE_MAP, "overlay", (Param("target", "class", None, "class to explain (default: "
                                                          "the top-1 prediction)", label="Class", flag="--class"),),
    compare=True,
    compute=_ATT + "explain_gradient_rollout",
    applies=(*_GLOBAL, _CHECK + "has_classifier", _CHECK + "plain_attention"),
    view=_VIEW + "view_gradient_rollout", view_job=_VIEW + "gradient_job", view_keys=("target",)))
register(Analysis(
    "distance", "Attention distance", "attention", "mean attention distance of every head against depth (ViT paper "
    "Fig. 7 right); a folder averages over its images", "(layers, heads), pixels", "plot",
    compute=_ATT + "explain_distance", applies=_GLOBAL,
    over_folder="vitstudio.core.analysis.explain:distance_over"))
register(Analysis(
    "pca", "PCA → RGB", "embeddings", "first three principal components of the patch tokens as colours",
    "(gh, gw, 3)", "rgb", (_LAYER,), compute=_EMB + "explain_pca", view=_EMB + "pca_view", options=("fixed-basis",)))
register(Analysis(
    "similarity", "Similarity to patch", "embeddings", "cosine similarity of every patch token to one patch's",
    ONE_MAP, "overlay", (_LAYER, _PATCH), compute=_EMB + "explain_similarity", view=_EMB + "similarity_view"))
register(Analysis(
    "norms", "Token norms", "embeddings", "L2 norm of every patch token (high-norm artifact tokens stand out); "
    "every layer's maximum and median patch norm, outliers and the class/register tokens' norms beside it",
    ONE_MAP, "overlay", (_LAYER,), compute="vitstudio.core.analysis.token_norms:explain_norms",
    view=_EMB + "norms_view"))
register(Analysis(
    "pos-embed", "Position-embedding similarity", "model", "cosine similarity of each patch's position "
    "embedding to every other's (ViT paper Fig. 7 centre)", "(gh, gw, gh, gw)", "map-mosaic", needs_image=False,
    compute=_INT + "explain_pos_embed", applies=(_CHECK + "fixed_position_table",),
    caption="Position-embedding similarity: tile (r, c) shows the cosine similarity of patch (r, c)'s position "
    "embedding to every other patch's."))
register(Analysis(
    "filters", "Patch-embedding filters", "model", "first 28 principal components of the patch-embedding filters "
    "(ViT paper Fig. 7 left)", "(28, p, p, 3)", "mosaic", needs_image=False,
    compute=_INT + "explain_filters", applies=(_CHECK + "rgb_convolution_stem",),
    caption="First 28 principal components of the patch-embedding filters (RGB)."))

# class attributions at the patch grid (attribution.py): each explains the top-1 class unless given one
_ATTR = "vitstudio.core.analysis.attribution:"
_TARGET = Param("target", "class", None, "class to explain (default: the top-1 prediction)", label="Class",
                flag="--class")
register(Analysis(
    "integrated-gradients", "Integrated gradients", "attention", "integrated gradients of the class logit from a "
    "zero (mean-colour) input, 32 Gauss-Legendre steps (Captum), summed over each patch", ONE_MAP, "overlay",
    (_TARGET,), compare=True, compute=_ATTR + "explain_integrated_gradients", applies=(_CHECK + "has_classifier",),
    view=_ATTR + "view_integrated_gradients", view_job=_ATTR + "integrated_gradients_job", view_keys=("target",)))
register(Analysis(
    "occlusion", "Occlusion", "attention", "drop of the class probability when each patch alone is set to 0 "
    "(Captum's occlusion, one window per patch)", ONE_MAP, "overlay", (_TARGET,), compare=True,
    compute=_ATTR + "explain_occlusion", applies=(_CHECK + "has_classifier",), view=_ATTR + "view_occlusion",
    view_job=_ATTR + "occlusion_job", view_keys=("target",)))
register(Analysis(
    "lrp", "Relevance (CP-LRP)", "attention", "conservative relevance propagation for transformers (Ali et al. "
    "2022): attention and LayerNorm scales held constant, gradient x input at the patch tokens", ONE_MAP,
    "overlay", (_TARGET,), compare=True, compute=_ATTR + "explain_relevance",
    applies=(*_GLOBAL, _CHECK + "has_classifier", _CHECK + "plain_attention", _ATTR + "lrp_rules"),
    view=_ATTR + "view_relevance", view_job=_ATTR + "relevance_job", view_keys=("target",)))

# a CLIP-style model's text tower (models/openclip.py): where the image tower finds a typed text
_TEXT = "vitstudio.core.analysis.text_map:"
register(Analysis(
    "text", "Text map", "attention", "where a CLIP-style model sees a typed text: gradient rollout (Chefer et al. "
    "2021) of the image-text cosine similarity", ONE_MAP, "overlay",
    (Param("text", "text", None, "the text to look for, e.g. 'a bee'", required=True),),
    compute=_TEXT + "explain_text", applies=(*_GLOBAL, _CHECK + "plain_attention", _TEXT + "has_text_tower"),
    view=_TEXT + "view_text", view_job=_TEXT + "text_job", view_keys=("text",)))


# the logit lens (logit_lens.py): every block's tokens read through the final norm and head
_LENS = "vitstudio.core.analysis.logit_lens:"
register(Analysis(
    "logit-lens", "Logit lens", "attention", "every block's tokens read through the model's own final norm and "
    "head: the classes after each block, and one class's logit per patch at the layer chosen", ONE_MAP, "overlay",
    (_LAYER, _TARGET), compare=True, compute=_LENS + "explain_logit_lens", applies=(_CHECK + "has_classifier", _LENS +
                                                                        "lens_readable"),
    view=_LENS + "view_logit_lens", view_job=_LENS + "lens_job", view_keys=("target",)))
# concepts (core/concepts): one concept of a sparse autoencoder learned on a folder's tokens
_CONCEPT = "vitstudio.core.concepts.maps:"
register(Analysis(
    "concept", "Concept map", "attention", "one concept of a sparse autoencoder learned on a folder's patch tokens "
    "(vitstudio concepts): its activation on every patch", ONE_MAP, "overlay",
    (Param("concepts", FILE_KIND, None, "a concepts file (FILE.safetensors, from `vitstudio concepts` or the Concepts "
           "tab)", required=True, label="Concepts file"),
     Param("concept", "index", 0, "the concept's number", label="Concept")),
    compute=_CONCEPT + "explain_concept", applies=(_CONCEPT + "has_concept_blocks",),
    view=_CONCEPT + "view_concept", view_job=_CONCEPT + "concept_job", view_keys=("concepts", "concept"),
    check=_CONCEPT + "check_concept"))

# a patch's key or query against the same image's (core/dense/matching.py: the facets `vitstudio match` compares)
_DENSE = "vitstudio.core.dense.matching:"
register(Analysis(
    "facet-similarity", "Key/query similarity", "attention", "cosine similarity of one patch's key (or query) to "
    "every patch's of the same image in one block (Amir et al.'s facets; the token's: Similarity to patch)", ONE_MAP,
    "overlay", (_LAYER, _PATCH, Param("facet", "choice", "key", "the attention's keys or queries of the block",
                                      ("key", "query"), label="Facet")),
    compute=_DENSE + "explain_facet_similarity", applies=(*_GLOBAL, _DENSE + "separate_facets")))


def all_params() -> dict[str, Param]:
    """Every parameter name any entry takes, with the first entry's Param (for forms and options: one per name)."""
    out: dict[str, Param] = {}
    for a in REGISTRY.values():
        for p in a.params:
            out.setdefault(p.name, p)
    return out


def unused_params(methods: list[str], given: dict) -> list[Param]:
    """The parameters given a value (not None) that none of `methods` takes: a face that names them refuses them
    rather than running without them (`resolve` drops what a method does not take)."""
    taken = {name for m in methods for name in get(m).param_names}
    params = all_params()
    return [params[name] for name, value in given.items() if value is not None and name not in taken]


def params_help() -> dict[str, str]:
    """For the CLI: which methods use each parameter, e.g. {'layer': 'heads, token, pca, …'}."""
    used: dict[str, list[str]] = {}
    for a in REGISTRY.values():
        for p in a.params:
            used.setdefault(p.name, []).append(a.name)
    return {k: ", ".join(v) for k, v in used.items()}
