"""Qt-free evented state of one view, and results keyed by the request that made them.

In the spirit of napari's EventedModel: a view keeps its whole state (model, image, method, layer, head, patch,
...) in one `ViewState`; widgets write into it and mirror it; a change to several fields is applied at once and
then announced field by field, so listeners never see a half-updated state (e.g. a new model with the old
model's layer). A job receives a frozen request (`state.request(...)`); its result travels as `Keyed(request,
value)`; the view uses a result only while `state.request(...)` still equals the result's request. Model
switches, hidden tabs and late results are then correct by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Keyed:
    """A result and the request it answers."""

    request: tuple
    value: Any


class ViewState:
    def __init__(self, **fields) -> None:
        object.__setattr__(self, "_values", dict(fields))
        object.__setattr__(self, "_listeners", [])

    def __getattr__(self, name: str):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value) -> None:
        self.update(**{name: value})

    def connect(self, listener: Callable[[str, Any], None]) -> None:
        """`listener(field, value)` is called once per changed field, after every field of the update is set."""
        self._listeners.append(listener)

    def update(self, **changes) -> list[str]:
        unknown = set(changes) - set(self._values)
        if unknown:
            raise AttributeError(f"no such view field: {', '.join(sorted(unknown))}")
        changed = [k for k, v in changes.items() if self._values[k] != v or type(self._values[k]) is not type(v)]
        for name in changed:
            self._values[name] = changes[name]
        for name in changed:
            for listener in list(self._listeners):
                listener(name, self._values[name])
        return changed

    def request(self, *names: str) -> tuple:
        """A frozen snapshot of `names` (always with the model and image): what a job computes for."""
        keys = ("model", "image", *names)
        return tuple((k, _frozen(self._values.get(k))) for k in keys)

    def current(self, result: Keyed | None, *names: str):
        """`result.value` if it answers the current request for `names`, else None."""
        if result is None or result.request != self.request(*names):
            return None
        return result.value

    def as_dict(self) -> dict:
        return dict(self._values)


def _frozen(value):
    return tuple(value) if isinstance(value, list) else value
