"""A model's numbers checked before torch and timm load (~5 s): a `custom:` spec, or a model folder's
`config.json` (its shape, its preprocessing fields, its size against this process's memory). An absurd or damaged
config is refused in milliseconds with one line naming the file and the field."""

from __future__ import annotations

import json
import os
from numbers import Real
from pathlib import Path

from vitstudio.core.errors import UserFacingError
from vitstudio.core.models.sizing import LIMITS, check_vit_args
from vitstudio.core.records import read_json_value

MAX_CONFIG_BYTES = 8 << 20  # timm's and transformers' configs are a few KB; with label names, at most a few hundred


class ConfigError(ValueError, UserFacingError):
    """A config that cannot describe a model; the message names the file and the field."""


CUSTOM_KEYS = {"img": "img_size", "patch": "patch_size", "width": "embed_dim", "depth": "depth",
               "heads": "num_heads", "classes": "num_classes"}


def parse_custom(spec: str) -> dict:
    """`custom:img=224,patch=16,width=192,depth=12,heads=3,classes=10` -> timm VisionTransformer kwargs."""
    kwargs = dict(img_size=224, patch_size=16, embed_dim=192, depth=12, num_heads=3, num_classes=1000)
    body = spec.split(":", 1)[1]
    for item in filter(None, (part.strip() for part in body.split(","))):
        key, _, value = item.partition("=")
        if key not in CUSTOM_KEYS or not value.isdigit():
            raise ConfigError(f"Bad custom ViT field {item!r}; use {custom_ranges()}.")
        kwargs[CUSTOM_KEYS[key]] = int(value)
    try:
        check_vit_args(kwargs, "Custom ViT")
    except ValueError as exc:
        raise ConfigError(f"{exc} Valid fields: {custom_ranges()}.") from None
    return kwargs


def custom_ranges() -> str:
    return ", ".join(f"{k}={LIMITS[v][0]}..{LIMITS[v][1]}" for k, v in CUSTOM_KEYS.items())


def _numbers(value, count: tuple[int, ...]) -> bool:
    return (isinstance(value, (list, tuple)) and len(value) in count
            and all(isinstance(v, Real) and not isinstance(v, bool) for v in value))


# field -> (what it must be, test); checked at the top level and inside pretrained_cfg, where timm reads them
_FIELDS = {
    "architecture": ("a timm architecture name", lambda v: isinstance(v, str) and v != ""),
    "model_args": ("an object of timm model arguments", lambda v: isinstance(v, dict)),
    "pretrained_cfg": ("an object", lambda v: isinstance(v, dict)),
    "num_classes": ("a whole number >= 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    "mean": ("1 or 3 numbers", lambda v: _numbers(v, (1, 3))),
    "std": ("1 or 3 positive numbers", lambda v: _numbers(v, (1, 3)) and all(x > 0 for x in v)),
    "input_size": ("[channels, height, width]",
                   lambda v: _numbers(v, (3,)) and all(isinstance(x, int) and x > 0 for x in v)),
    "crop_pct": ("a number in (0, 2]", lambda v: isinstance(v, Real) and 0 < v <= 2),
    "interpolation": ("a name such as bicubic", lambda v: isinstance(v, str)),
    "label_names": ("a list of names", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
}


def has_config(folder: Path) -> bool:
    """Something named config.json is in the folder (a regular file or not: read_model_config refuses the rest)."""
    return os.path.lexists(folder / "config.json")


def read_model_config(path: Path):
    """A model folder's config file parsed, or ConfigError naming the file: not a regular file (a link to /dev/zero
    is refused, never read), larger than any config, nested too deeply for the parser, not UTF-8 JSON."""
    try:
        return read_json_value(Path(path), "a model folder's config", "model config", MAX_CONFIG_BYTES)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def validate_timm_config(config, path: Path | str) -> dict:
    """The config as timm will read it, or ConfigError naming the file and the first wrong field."""
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a JSON object with 'architecture' and 'model_args', "
                          f"found {type(config).__name__}.")
    if "architecture" not in config:
        raise ConfigError(f"{path}: no 'architecture' (a timm model folder's config.json names one).")
    for where, fields in (("", config), ("pretrained_cfg.", config.get("pretrained_cfg"))):
        if not isinstance(fields, dict):
            continue
        for key, (meaning, valid) in _FIELDS.items():
            if key in fields and not valid(fields[key]):
                raise ConfigError(f"{path}: '{where}{key}' must be {meaning}, not {json.dumps(fields[key])[:60]}.")
        most = LIMITS["num_classes"][1]  # timm takes the head's size from here too: refused before it allocates
        if fields.get("num_classes", 0) > most:
            raise ConfigError(f"{path}: '{where}num_classes'={fields['num_classes']} is outside the valid range "
                              f"0..{most}.")
    return config


def precheck_spec(spec: str) -> None:
    """The checks that need no torch: for a `custom:` spec or a model folder; other specs pass through (the loader
    checks them). Raises ConfigError / ModelTooLarge (both ValueError) with one line."""
    if spec.startswith("custom:"):
        parse_custom(spec)
        return
    folder = Path(spec.split(":", 1)[1]) if spec.startswith("local-dir:") else Path(spec)
    config_path = folder / "config.json"
    if not has_config(folder):
        return
    config = read_model_config(config_path)
    if isinstance(config, dict) and "model_type" in config and "architecture" not in config:
        return  # a transformers folder: its converter checks its own fields
    config = validate_timm_config(config, config_path)
    architecture = str(config["architecture"])
    hierarchical = architecture.startswith("swin")
    check_vit_args(config.get("model_args") or {}, str(config_path), flat=not hierarchical, architecture=architecture)
