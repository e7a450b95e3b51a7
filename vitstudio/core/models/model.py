"""LoadedModel: a timm ViT ready for inference, with its preprocessing, labels and provenance."""

from __future__ import annotations

import itertools
import threading
import weakref
from dataclasses import dataclass, field
from functools import cached_property

import timm
import torch
from PIL import Image
from torch import nn

from vitstudio.core.models.devices import autocast
from vitstudio.core.models.structure import heads_of, patch_embedding, token_stages, trunk_blocks


def eval_transform(data_config: dict):
    """timm's eval transform for a data config, or the exact steps of a transformers image processor when the
    config carries one (`hf_size`, see hf_preprocessing)."""
    if data_config.get("hf_size"):
        from vitstudio.core.models.hf_preprocessing import processor_transform

        return processor_transform(data_config)
    return timm.data.create_transform(**data_config, is_training=False)


def split_eval_transform(transform) -> tuple[list, list]:
    """(PIL steps up to the crop, tensor steps after it) of a timm eval transform, so the crop the model sees
    can be shown or cached."""
    steps = list(transform.transforms)
    cut = next(i for i, t in enumerate(steps) if "ToTensor" in type(t).__name__)
    return steps[:cut], steps[cut:]


_uids = itertools.count(1)
_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_locks_guard = threading.Lock()


def model_lock(module: nn.Module) -> threading.RLock:
    """One re-entrant lock per model. Capturing attention installs hooks and flips flags on the shared module,
    so every forward (prediction, capture, tokens) holds it: two threads never run the same model at once."""
    with _locks_guard:
        lock = _locks.get(module)
        if lock is None:
            lock = _locks[module] = threading.RLock()
        return lock


def share_lock(module: nn.Module, like: nn.Module) -> None:
    """`module` shares weights with `like` (e.g. the same trunk under another head): one lock for both, since
    capture's hooks and flags sit on the shared blocks."""
    lock = model_lock(like)
    with _locks_guard:
        _locks[module] = lock


# What a loader builds: every LoadedModel field but where it runs (load_model adds the device and precision and
# builds the LoadedModel once). A dict, so a loader can add to what a shared step (`loading._finish`) made.
ModelParts = dict


@dataclass(eq=False, frozen=True)  # complete at construction: nothing finishes it afterwards
class LoadedModel:
    model: nn.Module
    name: str  # what the user asked for
    architecture: str
    kind: str  # 'timm', 'seed', 'custom' or 'random'
    data_config: dict  # input_size, interpolation, mean, std, crop_pct, crop_mode
    labels: list[str]
    label_set: str  # where the labels came from
    weights_source: str  # where the weights came from
    device: torch.device
    precision: str
    notes: tuple[str, ...] = ()  # what the user must know about these weights (a run that did not finish)
    # Unique for the life of the process (unlike id(), never reused after a model is freed): results and
    # requests are keyed by it, so a result computed for one model can never be shown for another.
    uid: int = field(default_factory=lambda: next(_uids), repr=False)

    @property
    def lock(self) -> threading.RLock:
        return model_lock(self.model)

    @property
    def display_name(self) -> str:
        """The name people read (the bundled demo by its title, not an absolute path)."""
        from vitstudio.core.models.demo import friendly_name

        return friendly_name(self.name)

    @property
    def depth(self) -> int:
        """Attention layers (every trunk block: CaiT's class-attention blocks and all of Swin's stages count)."""
        return len(trunk_blocks(self.model))

    @property
    def num_heads(self) -> int:
        """Attention heads per block, summed over parallel attention branches (ParallelThingsBlock has several,
        whose maps capture concatenates); the most of any block where stages differ (Swin)."""
        return max((heads_of(t.block) for t in trunk_blocks(self.model)), default=1)

    def heads_at(self, layer: int) -> int:
        return heads_of(trunk_blocks(self.model)[layer].block)

    @property
    def token_depth(self) -> int:
        """Token layers the embedding views offer: blocks (CaiT: its self-attention blocks) or Swin's stages."""
        return token_stages(self.model)

    @property
    def num_classes(self) -> int:
        return len(self.labels)

    @property
    def num_prefix_tokens(self) -> int:
        return int(getattr(self.model, "num_prefix_tokens", 0))  # Swin has no prefix tokens

    @property
    def input_hw(self) -> tuple[int, int]:
        return tuple(self.data_config["input_size"][1:])

    @property
    def grid_size(self) -> tuple[int, int]:
        """Patch-token grid (rows, cols) at the model's input size."""
        embed = patch_embedding(self.model)
        if hasattr(embed, "dynamic_feat_size"):
            return tuple(embed.dynamic_feat_size(self.input_hw))
        return tuple(embed.grid_size)

    @property
    def patch_size(self) -> tuple[int, int]:
        """Input pixels per token (the stem's stride for hybrid models)."""
        (h, w), (gh, gw) = self.input_hw, self.grid_size
        return h // gh, w // gw

    @cached_property
    def transform(self):
        """timm's eval transform for this model, exactly as timm builds it (a transformers processor's own steps
        for a converted transformers model)."""
        return eval_transform(self.data_config)

    @cached_property
    def _split_transform(self):
        return split_eval_transform(self.transform)

    def crop(self, image: Image.Image) -> Image.Image:
        """The exact image the model sees, before tensor conversion and normalisation."""
        for step in self._split_transform[0]:
            image = step(image)
        return image

    def crop_box(self, image_hw: tuple[int, int]) -> tuple[int, int, int, int]:
        """Where `crop` takes its pixels from in an image of `image_hw`: (top, left, height, width), read off the
        eval transform (resize the short side, centre crop, as timm builds it); the whole image for anything else."""
        from torchvision import transforms

        h, w = image_hw
        side, crop = None, None
        for step in self._split_transform[0]:
            if isinstance(step, transforms.Resize):
                side = step.size if isinstance(step.size, int) else (step.size[0] if len(step.size) == 1 else None)
            elif isinstance(step, transforms.CenterCrop):
                crop = step.size
        if side is None or crop is None:
            return 0, 0, h, w
        # torchvision: the short side to `side`, the long one int(side * long / short); then the crop's corner at
        # int(round((resized - crop) / 2)); both back in the image's pixels
        rh, rw = (side, int(side * w / h)) if h <= w else (int(side * h / w), side)
        top, left = int(round((rh - crop[0]) / 2)), int(round((rw - crop[1]) / 2))
        sy, sx = h / rh, w / rw  # the image's pixels per resized pixel
        ch, cw = min(h, round(crop[0] * sy)), min(w, round(crop[1] * sx))
        return min(round(top * sy), h - ch), min(round(left * sx), w - cw), ch, cw

    def to_tensor(self, crop: Image.Image) -> torch.Tensor:
        """(3, H, W) normalised tensor from a crop returned by `crop`."""
        out = crop
        for step in self._split_transform[1]:
            out = step(out)
        return out

    def autocast(self):
        return autocast(self.device, self.precision)
