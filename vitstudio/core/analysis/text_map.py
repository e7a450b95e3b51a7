"""Where does a CLIP-style model see a word? The text-conditioned map of the registry's "text" entry.

The rule is the app's gradient rollout (Chefer et al. 2021, generic rule: Ā_l = mean_h relu(∂s/∂A_l ⊙ A_l),
R ← R + Ā_l·R, the class token's row), run with the image–text similarity as its target:
s = cos(image embedding, text embedding) for any typed text, not only the classes. We reuse `gradient_rollout`
itself by giving the image tower, for the length of one forward, a one-output head whose output is that cosine
(a `ZeroShotHead` with the text as its only class, scale 1, no bias); the model's own head is restored after.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import torch

from vitstudio.core.analysis.attention import gradient_rollout
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.openclip import encode_prompts, text_side
from vitstudio.core.models.zeroshot import ZeroShotHead, image_projection


@contextlib.contextmanager
def similarity_head(loaded: LoadedModel, text: str) -> Iterator[None]:
    """Within the context the model's single output is cos(image, text); its head is restored afterwards."""
    embedding = encode_prompts(loaded, (text,)).float()  # (1, D), normalised
    model = loaded.model
    with loaded.lock:
        saved = model.head
        model.head = ZeroShotHead(image_projection(saved), embedding, 1.0, None).to(embedding.device).eval()
        try:
            yield
        finally:
            model.head = saved


def text_relevance(loaded: LoadedModel, x: torch.Tensor, text: str) -> np.ndarray:
    """(B, gh, gw): gradient-weighted relevance of each patch for the similarity of the image to `text`."""
    text = text.strip()
    if not text:
        raise ValueError("Type a text to look for (e.g. 'a bee').")
    with similarity_head(loaded, text):
        return gradient_rollout(loaded, x, target=0).maps


def similarity(loaded: LoadedModel, x: torch.Tensor, text: str) -> np.ndarray:
    """(B,) cosine similarity of each image to `text` (said beside the map)."""
    with similarity_head(loaded, text.strip()), loaded.lock, torch.inference_mode(), loaded.autocast():
        return loaded.model(x.to(loaded.device)).float()[:, 0].cpu().numpy()


def has_text_tower(model, analysis) -> str | None:
    """Applicability: a CLIP-style model loaded with its text tower."""
    if text_side(model) is None:
        return (f"{analysis.title.lower()} compares the image with a text, and this {type(model).__name__} has no "
                f"text tower: load a CLIP-style model through OpenCLIP (open_clip:ARCH:TAG).")
    return None


def explain_text(loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    params["similarity"] = round(float(similarity(loaded, x, params["text"])[0]), 4)
    return text_relevance(loaded, x, params["text"])[0], {}


# -- the Attention tab's view of the entry (see registry.Analysis.view / view_job) ------------------------------------
def text_job(cancel, model: LoadedModel, image, text: str | None):
    """(map (gh, gw), cosine) of `image` for `text`, run once per (model, image, text) request."""
    x = model.to_tensor(model.crop(image))[None]
    return text_relevance(model, x, text)[0], float(similarity(model, x, text)[0])


def view_text(value, params: dict, model) -> tuple[np.ndarray | None, str]:
    relevance, cosine = value
    return relevance, f"Where the model sees “{params.get('text')}” (image–text cosine {cosine:.3f})"
