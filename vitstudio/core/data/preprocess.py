"""Reading a file into what a model sees, without torch where it can be: `decode_and_crop` for one file, and
`PlainPreprocess`, timm's usual eval transform as Pillow calls and numpy arithmetic.

Why a torch-free copy of a transform torchvision already runs: a folder pass on a Ray cluster decodes in fresh
worker processes on every node, and each one that unpickles a model or a torchvision transform first imports torch,
timm and torchvision — ~5 CPU-s measured, before its first image, on the cores the model actors start on. Pillow
does the resampling either way; what is copied here is only torchvision's arithmetic around it (the resized size,
the crop's corner, the padding, the scale and normalisation), and `tests/core/test_plain_preprocess.py` checks it
equal to torchvision's own output, bit for bit. A transform of any other shape (a transformers processor's steps,
timm's border mode) has no plain form: its model travels instead and is decoded as in one process.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from vitstudio.core.data.images import ImageReadError, read_image


@dataclass(frozen=True)
class PlainPreprocess:
    """Resize (torchvision's `Resize(size, max_size)` on a PIL image), centre crop (`CenterCrop`, padding with black
    where the image is smaller), to float32 in [0, 1] (`ToTensor`), normalise (`Normalize`): the same methods as
    `LoadedModel`'s, `to_tensor` giving a (3, H, W) numpy array."""

    resize: tuple[int, ...] | None  # (short side,) or (height, width); None: no resize step
    max_size: int | None
    resample: int  # Pillow's filter
    crop_hw: tuple[int, int] | None  # (height, width)
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    input_hw: tuple[int, int]  # the model's, as LoadedModel.input_hw

    def resized_hw(self, height: int, width: int) -> tuple[int, int]:
        """torchvision's `_compute_resized_output_size`: the short side to `resize[0]`, the long one truncated."""
        if len(self.resize) == 2:
            return self.resize
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = self.resize[0], int(self.resize[0] * long / short)
        if self.max_size is not None and new_long > self.max_size:
            new_short, new_long = int(self.max_size * new_short / new_long), self.max_size
        return (new_long, new_short) if width <= height else (new_short, new_long)

    def crop(self, image: Image.Image) -> Image.Image:
        if self.resize is not None:
            h, w = self.resized_hw(image.height, image.width)
            if (h, w) != (image.height, image.width):
                image = image.resize((w, h), self.resample)
        if self.crop_hw is None:
            return image
        ch, cw = self.crop_hw
        if cw > image.width or ch > image.height:  # padded with black on both sides, the odd pixel after
            left, top = max(0, (cw - image.width) // 2), max(0, (ch - image.height) // 2)
            padded = Image.new(image.mode, (max(cw, image.width), max(ch, image.height)))
            padded.paste(image, (left, top))
            image = padded
            if (image.height, image.width) == (ch, cw):
                return image
        top, left = int(round((image.height - ch) / 2.0)), int(round((image.width - cw) / 2.0))
        return image.crop((left, top, left + cw, top + ch))

    def to_tensor(self, crop: Image.Image) -> np.ndarray:
        """(3, H, W) float32, as ToTensor then Normalize compute it: divide by 255, subtract the mean, divide."""
        x = np.asarray(crop, dtype=np.uint8).transpose(2, 0, 1).astype(np.float32) / np.float32(255)
        mean = np.asarray(self.mean, np.float32)[:, None, None]
        std = np.asarray(self.std, np.float32)[:, None, None]
        return (x - mean) / std


def decode_and_crop(prep, path, also=None) -> tuple:
    """(path, the crop the model sees, its normalised tensor, None, also(path, image)) or (path, None, None, why it
    failed, None). `prep`: a LoadedModel (torch tensors) or a PlainPreprocess (numpy arrays). Runs on reader
    threads, so the tensor conversion is spread over them too rather than done by the consumer."""
    try:
        image = read_image(path)
        crop = prep.crop(image)
        tensor = prep.to_tensor(crop)
    except ImageReadError as exc:
        return str(path), None, None, exc.reason, None
    except (MemoryError, RuntimeError, ValueError, OSError) as exc:  # one file never takes the batch down
        return str(path), None, None, f"could not be preprocessed ({type(exc).__name__}: {str(exc)[:200]})", None
    try:
        extra = also(str(path), image) if also is not None else None
    except (MemoryError, RuntimeError, ValueError, OSError):  # the rider's failure is not the model's: it redoes it
        extra = None
    return str(path), crop, tensor, None, extra
