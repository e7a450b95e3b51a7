"""What a loaded model is and says, asked by the views: whether it is CLIP-style (a text tower turns typed classes
into its head) and with which prompt, whether its attention runs in windows or it has a class token, its model card,
the memory it holds, and whether images are like its training data, in words. The core's torch-heavy modules are
imported when a view first asks (PEP 562's module `__getattr__`): this module imports without torch, as the whole
app layer does."""

from __future__ import annotations

import html

from vitstudio.core.models.fit_words import UNRELIABLE, most_flagged, unlike_sentence

# and, imported when first asked: has_class_token, is_clip_style, is_windowed, may_have_text_tower, memory_in_use,
# model_card, parse_classes, prompt_of, text_side, with_classes, without_classes
__all__ = ["UNRELIABLE", "fit_line", "most_flagged", "no_classes_text", "unlike_sentence", "unlike_words",
           "why_no_predictions"]


def __getattr__(name: str):
    if name in ("is_clip_style", "text_side"):
        from vitstudio.core.models import openclip

        return getattr(openclip, name)
    if name in ("prompt_of", "with_classes", "parse_classes", "without_classes"):
        from vitstudio.core.models import zeroshot

        return getattr(zeroshot, name)
    if name == "is_windowed":
        from vitstudio.core.models.structure import is_windowed

        return is_windowed
    if name == "has_class_token":
        from vitstudio.core.analysis.capture import has_class_token

        return has_class_token
    if name == "may_have_text_tower":
        from vitstudio.core.models.loading import may_have_text_tower

        return may_have_text_tower
    if name == "model_card":
        from vitstudio.core.models.modelcard import model_card

        return model_card
    if name == "memory_in_use":
        from vitstudio.core.models.devices import memory_in_use  # torch's (GPU memory)

        return memory_in_use
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def fit_line(model, pred) -> str:
    """Whether this image is like the model's training data, in words, with its score (HTML)."""
    from vitstudio.core.models import ood

    if not pred.ood_calibrated:
        return (f"Out-of-distribution score {pred.ood_score:.2f} (1 − top probability, uncalibrated): this model "
                f"keeps no record of its training data, so whether the image fits it is unknown.")
    bank = ood.bank_for(model)
    trained_on = f" ({bank.description})" if bank is not None and bank.description else ""
    limit = f"{bank.threshold:.2f}" if bank is not None else "?"
    if pred.ood_verdict == "cannot tell":
        return (f"Cannot tell whether this is like the model's training data{trained_on}: "
                f"{html.escape(ood.why_cannot_tell(pred.ood_auroc))} (score {pred.ood_score:.2f}).")
    if pred.ood:
        return (f"<b>⚠ Not like what this model was trained on{trained_on}</b>: out-of-distribution score "
                f"{pred.ood_score:.2f} &gt; {limit}; the prediction is a guess.")
    return f"Like the model's training data{trained_on}: out-of-distribution score {pred.ood_score:.2f} ≤ {limit}."


def unlike_words(model) -> str:
    """What the model's out-of-distribution check compares an image with, in words (the banner's share line)."""
    from vitstudio.core.models import ood

    return ood.describe(model)


def why_no_predictions(model) -> str | None:
    """None when `model` has classes to predict, else why not in one sentence (a headless model: features only)."""
    from vitstudio.core.inference import NoClassifierHead, require_classifier

    try:
        require_classifier(model)
    except NoClassifierHead as exc:
        return str(exc)
    return None


def no_classes_text(model) -> str:
    """Why a model predicts nothing, and what to do (HTML)."""
    if __getattr__("is_clip_style")(model):
        return ("No classes yet: type them in the <b>Classes</b> box under the model bar (e.g. <i>ant, bee, "
                "wasp</i>, or <i>From folder…</i>); the text tower turns them into a classifier, no training.")
    return ("This model has no classifier head (features only): the Attention, Embeddings and Folder views work; "
            "fine-tune a head on your classes (Training tab) for predictions.")
