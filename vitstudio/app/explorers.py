"""The explorers' models, Qt-free, built and owned by the App (napari keeps a layer's model apart from its Qt
view the same way): each holds its view state (keyed to the current model and image, every control a field) and its
keyed jobs over the App's runner, and follows the app state itself — a model loaded redeclares what follows it
(layer and head ranges, the class list) and sets the new model in the same update, so no result of the previous
model is ever read with a field of the new one. The tabs in gui/explore/ draw them and start the jobs they need when
they are on screen (`context_changed` tells them what they drew is stale).

    app = App(ScriptRunner())
    attention = app.explorers["attention"]
    attention.state.layer = 2; attention.jobs.current(...)
"""

from __future__ import annotations

from vitstudio.core.fields import Range

from .analyses import registry, why_not
from .evented import Event, EventedModel
from .explore_jobs import OVERVIEW, attention_methods, job_keys, job_slot
from .explore_states import (
    TOP_1,
    TOP_1_LABEL,
    AttentionState,
    CompareState,
    EmbeddingsState,
    ExplorerState,
    registry_fields,
)
from .jobs import KeyedJobs, Runner


class Explorer(EventedModel):
    """One explorer: `state` and `jobs`; subclasses name the state class, the job slots and what a new model
    changes."""

    context_changed = Event("the model or the image shown changed: what the view drew answers an old request")

    STATE: type[ExplorerState] = ExplorerState
    FOLLOWS_IMAGE = True  # False: its results depend on the model only (selecting an image costs nothing)

    def __init__(self, app_state, runner: Runner) -> None:
        self.app_state = app_state
        self.state = self.STATE(**self.extra_fields())
        self.jobs = KeyedJobs(self.state, self.slots(), runner, **self.job_options())
        app_state.model_loaded.connect(self._on_model_loaded)
        if self.FOLLOWS_IMAGE:
            app_state.image_selected.connect(self._on_image_selected)

    def extra_fields(self) -> dict:
        """Fields beyond the state class's (e.g. the registry's parameters of the explorer's analyses)."""
        return {}

    def slots(self) -> dict[str, tuple[str, ...]]:
        """Each job slot and the fields its result depends on besides the model and image."""
        return {}

    def job_options(self) -> dict:
        return {}

    def fields_for_model(self, model) -> dict:
        """Fields that change with the model (ranges and choices by `state.redeclare`), set in its update."""
        return {}

    def _on_model_loaded(self, model) -> None:
        with self.state.batch():
            self.state.update(model=model.uid, **self.fields_for_model(model))
        self.context_changed.emit()

    def _on_image_selected(self, entry) -> None:
        self.state.update(image=entry.uid if entry is not None else None)
        self.context_changed.emit()


class AttentionExplorer(Explorer):
    """The Attention tab: a registered attention analysis of the current image, per layer and head."""

    STATE = AttentionState

    def __init__(self, app_state, runner: Runner) -> None:
        self.methods = attention_methods()  # drawn over the image (head maps, rollout, …)
        self.method_slots = {m: job_slot(registry.get(m)) for m in self.methods}  # head maps and rollout share one
        self._grid = None  # the patch grid of the model shown: a patch picked stays where the grid does
        super().__init__(app_state, runner)
        self.state.update(method=self.methods[0])

    def extra_fields(self) -> dict:
        return registry_fields(self.methods, AttentionState().fields())

    def slots(self) -> dict[str, tuple[str, ...]]:
        keys = {OVERVIEW: registry.OVERVIEW_KEYS,
                **{self.method_slots[m]: job_keys(registry.get(m)) for m in self.methods}}
        keys = {slot: (*fields, "registers") for slot, fields in keys.items()}  # a map with or without the register
        keys["folder"] = ("folder",)
        return keys

    def job_options(self) -> dict:
        return {"long": ("folder",)}

    def available(self, model) -> str | None:
        """The first drawn analysis that applies to `model` (to fall back on), or None."""
        return next((m for m in self.methods if why_not(model.model, m) is None), None)

    def fields_for_model(self, model) -> dict:
        state = self.state
        classes = range(len(model.labels))
        state.redeclare("target", choices=TOP_1 + tuple(classes),
                        labels=TOP_1_LABEL + tuple(f"{i}: {label}" for i, label in zip(classes, model.labels)))
        state.redeclare("layer", range=Range(0, model.depth - 1))
        state.redeclare("head", range=Range(0, model.num_heads - 1))
        same_grid = state.model is not None and self._grid == tuple(model.grid_size)
        self._grid = tuple(model.grid_size)
        applies = state.method in self.methods and why_not(model.model, state.method) is None
        method = state.method if applies else self.available(model)  # e.g. no gradient rollout on parallel blocks
        return dict(layer=model.depth - 1, method=method or state.method, head=min(state.head, model.num_heads - 1),
                    target=None, patch=state.patch if same_grid else None)


def embedding_views() -> tuple[str, ...]:
    return registry.names("embeddings", viewed=True)  # pca, similarity, norms, …


class EmbeddingsExplorer(Explorer):
    """The Embeddings tab: a registered token view of one token layer (a block, or a Swin stage)."""

    STATE = EmbeddingsState

    def __init__(self, app_state, runner: Runner) -> None:
        super().__init__(app_state, runner)
        self.state.update(mode=embedding_views()[0])

    def extra_fields(self) -> dict:
        return registry_fields(embedding_views(), EmbeddingsState().fields())

    def slots(self) -> dict[str, tuple[str, ...]]:
        return {"tokens": (), "view": ("mode", "fixed", *registry_fields(embedding_views(), {}))}

    def fields_for_model(self, model) -> dict:
        # the depth (the slider's range) changes in the model's update: no old result is read with a new layer
        self.state.redeclare("layer", range=Range(0, model.token_depth - 1))
        return dict(layer=model.token_depth - 1, patch=None)


class InternalsExplorer(Explorer):
    """Model internals: pictures of the model's own weights, keyed by the model only."""

    FOLLOWS_IMAGE = False

    def slots(self) -> dict[str, tuple[str, ...]]:
        return {"internals": ()}


class CompareExplorer(Explorer):
    """Compare: the same analysis on the current model and a second one."""

    STATE = CompareState

    def __init__(self, app_state, runner: Runner) -> None:
        super().__init__(app_state, runner)
        self.state.update(method=registry.names(compare=True)[0])

    def slots(self) -> dict[str, tuple[str, ...]]:
        # "load": the second model asked for (latest wins); "compare": both maps for the current request
        return {"load": ("other_request",), "compare": ("other", "method")}

    def job_options(self) -> dict:
        return {"without_context": ("load",)}


EXPLORERS = {"attention": AttentionExplorer, "embeddings": EmbeddingsExplorer, "internals": InternalsExplorer,
             "compare": CompareExplorer}
