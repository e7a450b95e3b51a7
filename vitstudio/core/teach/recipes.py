"""What a Teach refit costs under each head recipe, torch-free (the Teach tab's recipe list says it before a refit
is asked for): the quick head's L-BFGS is well under a second at any project size, Teachable Machine's recipe runs
50 epochs of batches of 16 (heads.py), so its time grows with the training samples (augmentation adds `COPIES`
views of each)."""

from __future__ import annotations

import math

from vitstudio.core.teach.split import VALIDATION_FRACTION

TM_EPOCHS, TM_BATCH = 50, 16  # Teachable Machine's training (heads.py cites the library)
COPIES = 2  # augmented views per training sample (augment.py)
# One Adam step of Teachable Machine's two-layer head on a batch of 16, on a 2-core CPU (192-768 features: 0.6-0.9
# ms); the quick head's 100 full-batch L-BFGS steps (0.03-0.06 s for 40-200 samples there)
TM_STEP_S, QUICK_S = 0.8e-3, 0.1


def expected_seconds(recipe: str, samples: int, augment: bool = False) -> float:
    """About how long one refit of `samples` (the project's, before the validation share) takes under `recipe`."""
    if recipe != "teachable-machine":
        return QUICK_S
    train = math.ceil(samples * (1 - VALIDATION_FRACTION)) * (1 + COPIES * augment)
    return TM_EPOCHS * math.ceil(train / TM_BATCH) * TM_STEP_S


def duration(seconds: float) -> str:
    """'<1 s', '~3 s', '~2 min'."""
    if seconds < 1:
        return "<1 s"
    return f"~{seconds:.0f} s" if seconds < 90 else f"~{seconds / 60:.0f} min"
