"""Class names for a model's outputs: its own names when it has them, ImageNet's when it is an ImageNet head."""

from __future__ import annotations

from timm.data import ImageNetInfo, infer_imagenet_subset
from torch import nn


def label_names_problem(model: nn.Module) -> str | None:
    """A model config's label_names that cannot name the outputs (one name for ten classes): said on load, since the
    classes are then shown otherwise (numbered, or ImageNet's names)."""
    num_classes = int(getattr(model, "num_classes", 0) or 0)
    names = (getattr(model, "pretrained_cfg", None) or {}).get("label_names")
    if not num_classes or not names or len(names) == num_classes:
        return None
    plural = "s" if len(names) != 1 else ""
    return (f"The model config's label_names lists {len(names)} name{plural} for {num_classes} outputs; they were "
            f"not used.")


def resolve_labels(model: nn.Module, class_indices: list[str] | None, guess_imagenet: bool = True
                   ) -> tuple[list[str], str]:
    """(one label per output, where the labels came from)."""
    num_classes = int(getattr(model, "num_classes", 0) or 0)
    if num_classes == 0:  # a headless model (features only): no outputs to name, whatever its config says
        return [], "none (no classifier head)"
    if class_indices is not None:
        if len(class_indices) != num_classes:
            raise ValueError(f"class_indices.json names {len(class_indices)} classes but the model has "
                             f"{num_classes} outputs.")
        return class_indices, "class_indices.json"
    cfg = dict(getattr(model, "pretrained_cfg", None) or {})
    names = cfg.get("label_names")
    if names:
        if isinstance(names, dict):
            names = [names.get(str(i), names.get(i, f"class {i}")) for i in range(num_classes)]
        descriptions = cfg.get("label_descriptions") or {}
        labels = [str(descriptions.get(n, n)) for n in names]
        if len(labels) == num_classes:
            return labels, "model config (label_names)"
    subset = infer_imagenet_subset(model) if guess_imagenet else None  # label_names of another length: not used
    if subset:
        info = ImageNetInfo(subset)
        return [info.index_to_description(i) for i in range(num_classes)], subset
    return [f"class {i}" for i in range(num_classes)], "none (class indices)"
