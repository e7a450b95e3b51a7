"""What the app says when a model does not fit the images it is shown, written once for every face: the window's
banner (Predictions and Folder tabs) and the folder commands' warning line (embed, sort, audit, scores) say the same
sentence. Torch-free: the window imports it before torch loads."""

from __future__ import annotations

UNRELIABLE = ("Most of these images don't look like what this model was trained on, so these results are "
              "unreliable.")


def most_flagged(flagged: int, total: int) -> bool:
    """More than half of the calibrated images flagged (core/models/ood.py): the model does not fit these images."""
    return total > 0 and flagged * 2 > total


def unlike_sentence(flagged: int, total: int, description: str = "") -> str:
    """'Most of these images (151 of 153) don't look like what this model was trained on (32×32 grey digits): its
    predictions for them mean little.'"""
    trained_on = f" ({description})" if description else ""
    return (f"Most of these images ({flagged} of {total}) don't look like what this model was trained on"
            f"{trained_on}: its predictions for them mean little.")


def not_its_classes(unknown: str, labels: str, every: bool) -> str:
    """The folders (named, as `ood.name_classes` names them) that are not the model's classes (`labels`)."""
    if every:
        return f"Your folders ({unknown}) are not this model's classes ({labels}): fine-tune it to learn them."
    return (f"Some of your folders ({unknown}) are not this model's classes ({labels}): their images are neither "
            f"correct nor mistakes; fine-tune the model to learn them.")
