"""The window's jobs: the predictions of the strip's images, and the model given its classes in words (a CLIP-style
model's zero-shot head from the Classes box). Module-level, every input passed explicitly, run by whichever runner
the face gives; the core is imported inside each, so the app layer (and the window built on it) loads no torch until
a job runs."""

from __future__ import annotations

CLASSIFY_BATCH = 8


def classify_job(cancel, loaded, todo: list):
    """Predictions for `todo` in batches, the first batch (the image on screen first) as soon as it is ready."""
    from vitstudio.core.inference import classify

    for start in range(0, len(todo), CLASSIFY_BATCH):
        cancel.raise_if_cancelled()
        chunk = todo[start:start + CLASSIFY_BATCH]
        preds = classify(loaded, [e.image for e in chunk], [e.path for e in chunk])
        yield list(zip(chunk, preds))


def zero_shot_job(cancel, loaded, names: list[str], prompt: str | None):
    """`loaded` with a zero-shot head of `names` (each put in `prompt`, or the model's own templates)."""
    from vitstudio.core.models.zeroshot import with_classes

    return with_classes(loaded, names, prompt)
