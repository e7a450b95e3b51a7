"""Classes from words as the starting head: for a CLIP-style model (one with a text tower), while the
project cannot be taught yet (a class with fewer than two samples, or none at all) the head is the zero-shot
classifier of the card names — the model bar's Classes box (`models.zeroshot.with_classes`): the names as prompts
(the model's own templates, else OpenCLIP's 80 ImageNet ones), logits = logit_scale · cos(P·x + c, t_k) (+ the
SigLIP bias) on the pooled features x the fitted head reads. Once every class has its two samples the fitted head
takes over (session.refit). The head is not linear in x (the normalisation), so it is for the preview only: export
writes a fitted head."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.openclip import text_side
from vitstudio.core.models.zeroshot import templates_for, with_classes
from vitstudio.core.train.text_head import prompt_word

RECIPE = "words"


@dataclass(frozen=True, eq=False)
class WordsHead:
    """The zero-shot head of the card names on pooled features (N, D), float32 on the CPU as a FittedHead."""

    classes: tuple[str, ...]
    module: nn.Module  # zeroshot.ZeroShotHead: projection, L2-normalise, logit_scale · text embeddings (+ bias)
    templates: tuple[str, ...]
    recipe: str = RECIPE

    @property
    def sigmoid(self) -> bool:
        """SigLIP-style: each class a yes/no of its own (the bars need not sum to 1)."""
        return bool(self.module.sigmoid)

    def logits(self, features: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return self.module(torch.as_tensor(np.asarray(features, np.float32))).numpy()

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        logits = torch.as_tensor(self.logits(features))
        return (logits.sigmoid() if self.sigmoid else logits.softmax(-1)).numpy()

    @property
    def how(self) -> str:
        prompts = f"one prompt '{self.templates[0]}'" if len(self.templates) == 1 else \
            f"{len(self.templates)} prompt templates averaged"
        return f"classes from words: zero-shot on the card names ({prompts})"


def words_head(loaded: LoadedModel, classes: tuple[str, ...] | list[str]) -> WordsHead | None:
    """The zero-shot head of `classes` (folder names, as words: golden_retriever → golden retriever), or None when the
    model has no text tower or there are fewer than two classes."""
    if text_side(loaded.model) is None or len(classes) < 2:
        return None
    zero_shot = with_classes(loaded, [prompt_word(c) for c in classes])
    module = copy.deepcopy(zero_shot.model.head).float().cpu().eval()  # the projection is small: (E, D)
    return WordsHead(tuple(classes), module, templates_for(loaded, None))
