"""One field spec under every kind of setting, and the app's vocabularies, each written once (torch-free: the
command line builds its parser from them before torch loads, the GUI's forms and view states read them, the core
checks against them).

A `FieldSpec` says what a value may be: its type, default, choices or range, and a sentence of help. View fields
(`app/evented.py`) are FieldSpecs; an analysis parameter (`analysis/registry.Param`) gives its FieldSpec with
`.spec`, and so does a training setting (`train/schema.Setting`: the Training form's state is made of them). A
choice list or a range that two faces share is a name here (tests/core/test_field_spec.py fails on a second copy).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Range:
    """A closed, open or half-open interval; `hi=None` has no upper bound."""

    lo: float
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def __contains__(self, value) -> bool:
        above = value > self.lo if self.lo_open else value >= self.lo
        below = self.hi is None or (value < self.hi if self.hi_open else value <= self.hi)
        return above and below

    def __str__(self) -> str:
        hi = "∞)" if self.hi is None else f"{show(self.hi)}{')' if self.hi_open else ']'}"
        return f"{'(' if self.lo_open else '['}{show(self.lo)}, {hi}"

    def refusal(self, value) -> str:
        """What a value outside is told: 'must be at least 1, not 0', 'must be in [0, 1], not 2'."""
        if self.hi is None:
            return f"must be {'above' if self.lo_open else 'at least'} {show(self.lo)}, not {show(value)}"
        return f"must be in {self}, not {show(value)}"


# -- vocabularies ------------------------------------------------------------------------------------------------
PRECISIONS = ("auto", "fp32", "bf16", "fp16")  # 'auto' resolves per device (models/devices.resolve_precision)
DECODERS = ("auto", "tensor", "pil")  # 'auto': tensors on a GPU, PIL on a CPU (inference.use_tensor_decoder)
DEVICES = ("auto", "cpu", "cuda", "mps")  # what people pick; cuda:N names one GPU
FUSIONS = ("mean", "max", "min")  # how rollout combines the heads of a layer
DIRECTIONS = ("to", "by", "both")  # token maps: what the patch attends to, what attends to it, or both stacked
SHOWN_DIRECTIONS = DIRECTIONS[:2]  # the Attention panel draws one of the two; 'both' stacks them in a file
# One colour vocabulary for the GUI and the CLI's pictures (both draw through matplotlib's definitions).
COLORMAPS = ("inferno", "viridis", "magma", "plasma", "turbo", "cividis", "gray", "RdBu_r", "jet")

# The figures of an epoch, by name: metrics.csv's columns, TensorBoard's scalars, the curves drawn
EPOCH_CURVES = ("train_loss", "train_acc", "val_loss", "val_acc")
METRIC_FIELDS = ("epoch", *EPOCH_CURVES, "lr", "seconds")

# -- ranges shared by more than one face ---------------------------------------------------------------------------
# what "a block's feature" means wherever layers are compared (probes, CKA: core/folder/layer_cache.py)
LAYER_FEATURES = ("layer features: the prefix token after each block (the mean patch token for models without "
                  "one), before the final norm")
DISCARD = Range(0.0, 0.99)  # rollout: the share of the smallest attention weights dropped per layer
OPACITY = Range(0, 100)  # a map over the image, %
MASS_MASK = Range(0, 100, hi_open=True)  # the share of a map's mass kept, %; 0 = off
AT_LEAST_ONE = Range(1)  # a count of things: images per forward, classes listed, steps
NOT_NEGATIVE = Range(0)  # a count that may be none (mistakes listed, mutual matches)
POSITIVE = Range(0, lo_open=True)  # a length or a scale (a blur's sigma)
PROBABILITY = Range(0, 1)


@dataclass(frozen=True)
class FieldSpec:
    """A typed field. `kind` is the type its values must have (None is allowed when the default is None, or when
    `nullable`); `choices`, `range` and `valid` (value -> True when valid: a vocabulary that grows, like the
    registry's names, or a tuple's items) refuse the rest."""

    default: Any = None
    kind: type | tuple[type, ...] | None = None
    choices: tuple | None = None
    range: Range | None = None
    valid: Callable[[Any], bool] | None = None
    help: str = ""
    nullable: bool = False  # None means something ("off", "the model's") though the default is a value
    labels: tuple[str, ...] | None = None  # what people read for each of `choices` (the values are what is kept)

    def coerce(self, name: str, value):
        """`value` as the field holds it (numpy scalars as plain numbers, lists as tuples), or TypeError/ValueError
        naming the field."""
        if value is None and (self.default is None or self.nullable):
            return None
        if self.kind is not None:
            value = _plain(self.kind, value)
            if not isinstance(value, self.kind) or (self.kind is int and isinstance(value, bool)):
                raise TypeError(f"field {name!r} takes {_type_name(self.kind)}, not {type(value).__name__} "
                                f"({value!r})")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"field {name!r} takes one of {', '.join(map(repr, self.choices))}, not {value!r}")
        if self.range is not None and value not in self.range:
            raise ValueError(f"field {name!r}: {value!r} is outside {self.range}")
        if self.valid is not None and not self.valid(value):
            hint = f" ({self.help})" if self.help else ""
            raise ValueError(f"field {name!r}: {value!r} is not valid{hint}")
        return value


def _plain(kind, value):
    # numpy scalars from arrays and sliders are the plain numbers they hold
    if kind is float and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if kind is tuple and isinstance(value, list):
        return tuple(value)
    if getattr(kind, "__name__", "") == "Path" and isinstance(value, str):  # pathlib.Path (torch-free import aside)
        return kind(value)
    return value


def _type_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def show(value) -> str:
    """A number as people write it: 3 rather than 3.0, 1e-05 rather than 0.00001000."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}" if math.isfinite(value) else str(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(show(v) for v in value) + ")"
    return repr(value) if isinstance(value, str) else str(value)
