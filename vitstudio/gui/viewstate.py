"""Qt-free evented state of one view, and results keyed by the request that made them.

In the spirit of napari's EventedModel: a view keeps its whole state (model, image, method, layer, head, patch,
...) in one `ViewState` of typed, validated fields; widgets write into it and mirror it; a change to several
fields is applied at once and then announced field by field, so listeners never see a half-updated state (e.g. a
new model with the old model's layer). A value of the wrong type or out of range is refused before anything
changes. `with state.batch():` groups several writes into one update. A job receives a frozen request
(`state.request(...)`); its result travels as `Keyed(request, value)`; the view uses a result only while
`state.request(...)` still equals the result's request. Model switches, hidden tabs and late results are then
correct by construction.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Keyed:
    """A result and the request it answers."""

    request: tuple
    value: Any


@dataclass(frozen=True)
class Field:
    """A typed view field. `kind` is the type its values must have (None is allowed when the default is None);
    `choices` and `check` (value -> True when valid) refuse the rest. A plain default in `ViewState(...)` makes a
    field of its own type (int, float, bool, str, tuple; a None default accepts any value)."""

    default: Any = None
    kind: type | tuple[type, ...] | None = None
    choices: tuple | None = None
    check: Callable[[Any], bool] | None = None
    help: str = ""

    def coerce(self, name: str, value):
        if value is None and self.default is None:
            return None
        if self.kind is not None:
            # numpy scalars from arrays and sliders are the plain numbers they hold
            if self.kind is float and isinstance(value, numbers.Real) and not isinstance(value, bool):
                value = float(value)
            elif self.kind is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
                value = int(value)
            elif self.kind is tuple and isinstance(value, list):
                value = tuple(value)
            if not isinstance(value, self.kind) or (self.kind is int and isinstance(value, bool)):
                raise TypeError(f"view field {name!r} takes {_type_name(self.kind)}, not {type(value).__name__} "
                                f"({value!r})")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"view field {name!r} takes one of {', '.join(map(repr, self.choices))}, not {value!r}")
        if self.check is not None and not self.check(value):
            hint = f" ({self.help})" if self.help else ""
            raise ValueError(f"view field {name!r}: {value!r} is out of range{hint}")
        return value


def _type_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _as_field(spec) -> Field:
    if isinstance(spec, Field):
        return spec
    if spec is None:
        return Field(None)
    kind = type(spec)
    return Field(spec, kind=list if kind is list else kind)


class ViewState:
    def __init__(self, **fields) -> None:
        specs = {name: _as_field(spec) for name, spec in fields.items()}
        object.__setattr__(self, "_fields", specs)
        object.__setattr__(self, "_values", {name: spec.default for name, spec in specs.items()})
        object.__setattr__(self, "_listeners", [])
        object.__setattr__(self, "_batch", None)

    def __getattr__(self, name: str):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value) -> None:
        self.update(**{name: value})

    def fields(self) -> dict[str, Field]:
        return dict(self._fields)

    def connect(self, listener: Callable[[str, Any], None]) -> None:
        """`listener(field, value)` is called once per changed field, after every field of the update is set."""
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
        try:
            yield
            pending = self._batch
        finally:
            object.__setattr__(self, "_batch", None)
        self.update(**pending)

    def update(self, **changes) -> list[str]:
        unknown = set(changes) - set(self._values)
        if unknown:
            raise AttributeError(f"no such view field: {', '.join(sorted(unknown))}")
        checked = {name: self._fields[name].coerce(name, value) for name, value in changes.items()}
        if self._batch is not None:
            self._batch.update(checked)
            return []
        changed = [k for k, v in checked.items() if self._values[k] != v or type(self._values[k]) is not type(v)]
        for name in changed:
            self._values[name] = checked[name]
        for name in changed:
            for listener in list(self._listeners):
                listener(name, self._values[name])
        return changed

    def request(self, *names: str, with_context: bool = True) -> tuple:
        """A frozen snapshot of `names` (with the model and image unless `with_context` is False, e.g. for loading a
        model, which no image selection should cancel): what a job computes for."""
        keys = ("model", "image", *names) if with_context else names
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
