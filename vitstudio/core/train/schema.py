"""The schema of training settings: each TrainConfig field carries its label, help, range or choices and command-line
flag (as transformers' HfArgumentParser reads dataclass fields). The CLI's options, the Training form's controls and
the range checks of `TrainConfig.validate()` are all generated from it, so a new field appears in all three at once.

    lr: float = setting(3e-4, label="Learning rate", help="peak learning rate", range=Range(0, 10, lo_open=True))
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from vitstudio.core.fields import FieldSpec, Range
from vitstudio.core.fields import show as _show

RUN, OPTIMISER, REGULARISATION, DATA, AUGMENTATION, PERFORMANCE = (
    "run", "optimiser and schedule", "regularisation", "data", "augmentation", "performance")
SECTIONS = (RUN, OPTIMISER, REGULARISATION, DATA, AUGMENTATION, PERFORMANCE)
_KINDS = {"int": int, "float": float, "str": str, "bool": bool}


@dataclass(frozen=True)
class Setting:
    """One training setting as the CLI, the form and validate() see it."""

    name: str
    label: str
    help: str
    kind: type  # int, float, str or bool: of the value, or of each item of a tuple
    default: Any  # dataclasses.MISSING for the required ones (dataset, model, output folder)
    optional: bool = False  # None is allowed; `none_text` says what it means
    length: int = 0  # 0: a single value; N: a tuple of N; -1: a tuple of any length
    range: Range | None = None  # of the value, or of each item
    choices: tuple | None = None
    suggestions: tuple = ()  # common values of a free-form text (an editable list in the form)
    flag: str = ""  # the long option, --field-name
    aliases: tuple[str, ...] = ()  # earlier option names, still accepted
    advanced: bool = True  # under the form's Advanced settings
    section: str = RUN
    parts: tuple[str, ...] = ()  # names of a tuple's items (the form's spin boxes, the option's metavar)
    ordered: bool = False  # a tuple's items ascend (min, max)
    decimals: int = 3  # shown in the form
    none_text: str = ""  # what None (or a number's minimum, 0) means, e.g. "off", "the model's"
    panel: bool = False  # set by the Training panel's own widgets (dataset, base model, run name, probe image)

    def check(self, value) -> None:
        """A ValueError naming the field and its range or choices when `value` falls outside them."""
        if value is None:
            return
        items = value if self.length else (value,)
        if self.choices is not None and any(v not in self.choices for v in items):
            raise ValueError(f"{self.title} must be one of {', '.join(map(str, self.choices))}, not {_show(value)}.")
        if self.ordered and self.range is not None and (any(v not in self.range for v in items)
                                                        or list(items) != sorted(items)):
            r = self.range
            bounds = (f"{_show(r.lo)} {'<' if r.lo_open else '<='} {' <= '.join(self.parts)}"
                      + ("" if r.hi is None else f" {'<' if r.hi_open else '<='} {_show(r.hi)}"))
            raise ValueError(f"{self.title} must satisfy {bounds}, not {_show(value)}.")
        if self.range is not None and any(v not in self.range for v in items):
            each = " (each value)" if self.length else ""
            raise ValueError(f"{self.title} must be in {self.range}{each}, not {_show(value)}.")

    @property
    def spec(self) -> FieldSpec:
        """The setting as a field (the Training form's state holds it): a single value's choices and range as the
        spec's own, a tuple's items checked by `check`."""
        default = None if self.default is dataclasses.MISSING else self.default
        kind = tuple if self.length else self.kind
        whole = self.length == 0
        return FieldSpec(default, kind, self.choices if whole else None, self.range if whole else None,
                         valid=None if whole and not self.ordered else self.is_valid, help=self.help,
                         nullable=self.optional)

    def is_valid(self, value) -> bool:
        try:
            self.check(value)
        except (TypeError, ValueError):
            return False
        return True

    @property
    def title(self) -> str:
        """How messages name the field: "lr (learning rate)"."""
        label = self.label[0].lower() + self.label[1:] if self.label[1:2].islower() else self.label
        return self.name if label == self.name.replace("_", " ") else f"{self.name} ({label})"


def setting(default=dataclasses.MISSING, *, label: str, help: str, **meta) -> Any:
    """A dataclass field that carries its Setting (every keyword of Setting but name, kind and default)."""
    return dataclasses.field(default=default, metadata={"setting": dict(label=label, help=help, **meta)})


def settings_of(cls) -> tuple[Setting, ...]:
    """The Settings of a dataclass's fields, in field order (fields without one, like `extra`, are left out)."""
    out = []
    for f in dataclasses.fields(cls):
        meta = f.metadata.get("setting")
        if meta is None:
            continue
        kind, optional, length = _parse_type(f.type if isinstance(f.type, str) else _type_name(f.type))
        out.append(Setting(name=f.name, kind=kind, default=f.default, optional=optional, length=length,
                           flag=meta.get("flag") or "--" + f.name.replace("_", "-"),
                           **{k: v for k, v in meta.items() if k != "flag"}))
    return tuple(out)


def check_settings(config) -> None:
    """Every field of `config` within its range and choices (the first one outside raises)."""
    for s in settings_of(type(config)):
        s.check(getattr(config, s.name))


def describe_default(s: Setting, presets: dict | None = None) -> str:
    """The default as the help shows it: the presets' when some preset sets it."""
    if s.default is dataclasses.MISSING or s.default is None:
        own = "none" if s.default is dataclasses.MISSING else s.none_text
    else:
        own = s.default if isinstance(s.default, str) else _show(s.default)
    if presets and any(s.name in values for values in presets.values()):
        return f"the preset's, else {own}"
    return own or "none"


def _parse_type(annotation: str) -> tuple[type, bool, int]:
    """(item kind, None allowed, tuple length) of an annotation as written: "float | None", "tuple[float, float]",
    "tuple[str, ...]"."""
    options = annotation.replace(" ", "").split("|")
    optional = "None" in options
    base = next(o for o in options if o != "None")
    if base.startswith("tuple["):
        items = base[len("tuple["):-1].split(",")
        return _KINDS[items[0]], optional, -1 if items[-1] == "..." else len(items)
    return _KINDS[base], optional, 0


def _type_name(tp) -> str:
    return getattr(tp, "__name__", str(tp))
