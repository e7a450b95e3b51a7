"""The CPU stage of a folder pass on a Ray cluster (core/folder/ray_jobs.py), in a module that imports no torch.

Ray Data runs it in worker processes it starts on each node; a function travels by reference, so its module is
what the worker imports. Here that is Pillow and numpy (`PlainPreprocess`, core/data/preprocess.py): ~5 CPU-s of
torch, timm and torchvision imports fewer a decode worker, on the cores the model actors start on. Only a model
whose transform has no plain form arrives as the model itself (and brings torch with it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from vitstudio.core.data.preprocess import decode_and_crop


def decode_stage(batch: dict, prep, also: Callable | None) -> dict:
    """Paths -> the model's normalised input as float32 numpy (zeros with an error for an unreadable file, read as
    in one process: `decode_and_crop`), and `also(image)` where the driver asked for it. `prep`: a PlainPreprocess,
    or the LoadedModel (its structure only) where there is none."""
    paths, wanted = [str(p) for p in batch["path"]], batch["also"]
    decoded = [decode_and_crop(prep, p, (lambda _p, image: also(image)) if also is not None and w else None)
               for p, w in zip(paths, wanted)]
    shape = next((tuple(t.shape) for _, _, t, _, _ in decoded if t is not None), (3, *prep.input_hw))
    out = {"path": np.asarray(paths, object),
           "error": np.asarray([err or "" for _, _, _, err, _ in decoded], object),
           "image": np.stack([np.asarray(t, np.float32) if t is not None else np.zeros(shape, np.float32)
                              for _, _, t, _, _ in decoded])}
    extras = [extra for *_, extra in decoded]
    parts = next((e for e in extras if e is not None), None)
    out["has_also"] = np.asarray([e is not None for e in extras])
    if parts is not None:  # a rider's tuple of arrays, a column per part (zeros where it has none)
        for j, part in enumerate(parts):
            part = np.asarray(part)
            out[f"also_{j}"] = np.stack([np.asarray(e[j]) if e is not None else np.zeros_like(part)
                                         for e in extras])
    return out

