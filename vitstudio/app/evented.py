"""Qt-free evented state, and results keyed by the request that made them: the one event system of the app's model.

As napari's EventedModel: a view's state is a class whose fields are annotations (type, default, and choices or
range from the core's field spec, `vitstudio.core.fields.FieldSpec`), and each field has its own event:

    class AttentionState(ViewState):
        layer: int = 0
        fusion: str = FieldSpec("mean", choices=FUSIONS)

    state = AttentionState()
    state.events.layer.connect(draw_layer)      # draw_layer(value), once per change

A change to several fields is applied at once and then announced field by field, so listeners never see a
half-updated state (e.g. a new model with the old model's layer). A value of the wrong type or out of range is
refused before anything changes. `with state.batch():` groups several writes into one update.

What a field accepts is state too: `state.redeclare("layer", range=Range(0, depth - 1))` changes its spec and
announces it on `state.spec_events.layer` (a bound control takes the new range or choices by itself); a value the
new spec refuses goes back to the default. Inside a batch the new spec applies to the batch's own writes, so a model
switch declares the new depth and sets the new layer in one update. A job receives a
frozen request (`state.request(...)`); its result travels as `Keyed(request, value)`; the view uses a result only
while `state.request(...)` still equals the result's request. Model switches, hidden tabs and late results are then
correct by construction. `ViewState(name=default_or_spec, ...)` makes a state of the given fields without a class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from vitstudio.core.fields import FieldSpec

Field = FieldSpec  # the name view code reads best with: `Field(None, int)`


@dataclass(frozen=True)
class Keyed:
    """A result and the request it answers."""

    request: tuple
    value: Any


_HINTS = {"int": int, "float": float, "str": str, "bool": bool, "tuple": tuple, "Path": Path}


def _kind_of(hint: str) -> type | None:
    """The type an annotation names ("int", "str | None", "tuple | None"); None (any value) for the others."""
    kinds = [h.strip() for h in str(hint).split("|") if h.strip() != "None"]
    return _HINTS.get(kinds[0]) if len(kinds) == 1 else None


def _as_field(spec, hint: str | None = None) -> FieldSpec:
    if isinstance(spec, FieldSpec):
        return spec if spec.kind is not None or hint is None else dataclasses.replace(spec, kind=_kind_of(hint))
    if hint is not None:
        return FieldSpec(spec, kind=_kind_of(hint))
    return FieldSpec(None) if spec is None else FieldSpec(spec, kind=type(spec))


class Emitter:
    """The listeners of one event, called in the order they connected with what it carries (a field's new value,
    once per update that changed it; an app event's arguments). Listeners are held strongly: a binding lives as
    long as the state it follows."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[Any], None]] = []

    def connect(self, listener: Callable[[Any], None]) -> Callable[[Any], None]:
        self._listeners.append(listener)
        return listener

    def disconnect(self, listener: Callable[[Any], None]) -> None:
        self._listeners.remove(listener)

    def emit(self, *args) -> None:
        for listener in list(self._listeners):
            listener(*args)


class Events:
    """`events.<name>`: the Emitter of each field (a ViewState's) or declared event (an EventedModel's)."""

    def __init__(self, names=(), emitters: dict[str, Emitter] | None = None) -> None:
        for name in names:
            setattr(self, name, Emitter())
        for name, emitter in (emitters or {}).items():
            setattr(self, name, emitter)

    def names(self) -> list[str]:
        return list(vars(self))


class Event:
    """A declared event of an app model (napari's EmitterGroup entries), written on the class beside what it
    carries:

        class FolderModel(EventedModel):
            busy = Event("True while a scan or review runs")

    Each instance has its own Emitter, reached as `model.busy` or `model.events.busy`; `Model.declared_events()`
    lists them, so what a model announces is read off its class, not found in its constructor."""

    def __init__(self, doc: str = "") -> None:
        self.doc = doc
        self.name = ""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        emitter = obj.__dict__.get(self.name)
        if emitter is None:  # made on first use, then found in the instance's dict (no descriptor call again)
            emitter = obj.__dict__[self.name] = Emitter()
        return emitter


class EventedModel:
    """An app model whose events are declared on its class (`Event`s) and whose nested models are named in
    `NESTED` (napari's ViewerModel holds its dims, camera and layers the same way): `model.events` is the group of
    its declared events; `model.nested()` the models it holds, for walking the app's tree of models."""

    NESTED: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def declared_events(cls) -> dict[str, Event]:
        found: dict[str, Event] = {}
        for klass in reversed(cls.__mro__):
            found.update({k: v for k, v in vars(klass).items() if isinstance(v, Event)})
        return found

    @property
    def events(self) -> Events:
        return Events(emitters={name: getattr(self, name) for name in self.declared_events()})

    def nested(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.NESTED}


class ViewState:
    _declared: ClassVar[dict[str, FieldSpec]] = {}
    # what every request is keyed by besides the fields a job names: the model and image shown, where the state has
    # them (a state whose results do not depend on them, like the Training tab's runs, declares CONTEXT = ())
    CONTEXT: ClassVar[tuple[str, ...]] = ("model", "image")

    def __init_subclass__(cls, **kwargs) -> None:
        """The annotated class attributes become the fields (a subclass adds to its parent's)."""
        super().__init_subclass__(**kwargs)
        declared = dict(cls._declared)
        for name, hint in cls.__dict__.get("__annotations__", {}).items():
            if name.startswith("_") or "ClassVar" in str(hint):
                continue
            declared[name] = _as_field(cls.__dict__.get(name), hint)
            if name in cls.__dict__:
                delattr(cls, name)  # the value lives in the instance, read through __getattr__
        cls._declared = declared

    def __init__(self, **fields) -> None:
        specs = {**self._declared, **{name: _as_field(spec) for name, spec in fields.items()}}
        object.__setattr__(self, "_fields", specs)
        object.__setattr__(self, "events", Events(specs))
        object.__setattr__(self, "spec_events", Events(specs))
        object.__setattr__(self, "_values", {name: spec.default for name, spec in specs.items()})
        object.__setattr__(self, "_listeners", [])
        object.__setattr__(self, "_batch", None)
        object.__setattr__(self, "_pending_specs", None)

    def __getattr__(self, name: str):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value) -> None:
        self.update(**{name: value})

    def fields(self) -> dict[str, FieldSpec]:
        return dict(self._fields)

    def redeclare(self, name: str, **spec) -> None:
        """Change what field `name` accepts (its range, choices, labels…) and announce the new spec on
        `spec_events.<name>`; its value stays when still accepted, else it goes back to the default. In a batch the
        new spec checks the batch's writes that follow, and everything applies at the batch's end."""
        with self.batch():
            self._pending_specs[name] = dataclasses.replace(self._spec(name), **spec)

    def _spec(self, name: str) -> FieldSpec:
        pending = self._pending_specs or {}
        return pending.get(name) or self._fields[name]

    def connect(self, listener: Callable[[str, Any], None]) -> None:
        """`listener(field, value)` is called once per changed field, after every field of the update is set and
        before any field's own event: for listeners that follow every field, like the job keys of a view."""
        self._listeners.append(listener)

    def disconnect(self, listener: Callable[[str, Any], None]) -> None:
        self._listeners.remove(listener)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Writes inside the block are validated at once, applied together at its end and announced once per
        field (nested blocks join the outer one); an exception in the block applies nothing."""
        if self._batch is not None:
            yield
            return
        object.__setattr__(self, "_batch", {})
        object.__setattr__(self, "_pending_specs", {})
        try:
            yield
            pending, specs = self._batch, self._pending_specs
        finally:
            object.__setattr__(self, "_batch", None)
            object.__setattr__(self, "_pending_specs", None)
        self._apply(pending, specs)

    def update(self, **changes) -> list[str]:
        unknown = set(changes) - set(self._values)
        if unknown:
            raise AttributeError(f"no such view field: {', '.join(sorted(unknown))}")
        checked = {name: self._spec(name).coerce(name, value) for name, value in changes.items()}
        if self._batch is not None:
            self._batch.update(checked)
            return []
        return self._apply(checked, {})

    def _apply(self, checked: dict, specs: dict) -> list[str]:
        """Set new specs and values, then announce: specs first (a control takes its new range before the value),
        then the listeners of the whole state (a view's job keys: results made stale are dropped), then each
        field's own event (the view reacting), so a reaction never finds a stale result still current."""
        self._fields.update(specs)
        for name in specs:  # a value the new spec refuses (set before it in the batch, or kept) becomes the default
            try:
                checked[name] = self._fields[name].coerce(name, checked.get(name, self._values[name]))
            except (TypeError, ValueError):
                checked[name] = self._fields[name].default
        changed = [k for k, v in checked.items() if self._values[k] != v or type(self._values[k]) is not type(v)]
        for name in changed:
            self._values[name] = checked[name]
        for name in specs:
            getattr(self.spec_events, name).emit(self._fields[name])
        for name in changed:
            for listener in list(self._listeners):
                listener(name, self._values[name])
        for name in changed:
            getattr(self.events, name).emit(self._values[name])
        return changed

    def request(self, *names: str, with_context: bool = True) -> tuple:
        """A frozen snapshot of `names` (with the CONTEXT fields unless `with_context` is False, e.g. for loading a
        model, which no image selection should cancel): what a job computes for."""
        context = tuple(k for k in self.CONTEXT if k in self._fields) if with_context else ()
        keys = (*context, *names)
        return tuple((k, _frozen(self._values.get(k))) for k in keys)

    def current(self, result: Keyed | None, *names: str, with_context: bool = True):
        """`result.value` if it answers the current request for `names`, else None."""
        if result is None or result.request != self.request(*names, with_context=with_context):
            return None
        return result.value

    def as_dict(self) -> dict:
        return dict(self._values)


def _frozen(value):
    return tuple(value) if isinstance(value, list) else value
