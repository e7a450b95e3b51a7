"""Classification: images -> top-k Prediction records, exactly timm's forward on timm's preprocessing."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from PIL import Image

from vitstudio.core.data.images import expand_paths
from vitstudio.core.data.preprocess import decode_and_crop
from vitstudio.core.fields import DECODERS
from vitstudio.core.files import SafeCsvWriter
from vitstudio.core.jobs import CancelToken, prefetched
from vitstudio.core.models import cuda_graphs, ood, openclip, zeroshot
from vitstudio.core.models.devices import explain_out_of_memory, stack_for, to_device
from vitstudio.core.models.model import LoadedModel


@dataclass(frozen=True)
class Prediction:
    """Top-k result for one input, or the reason it failed (`error`)."""

    path: str
    indices: tuple[int, ...] = ()
    labels: tuple[str, ...] = ()
    probs: tuple[float, ...] = ()
    crop: np.ndarray | None = None  # (H, W, 3) uint8: what the model saw
    error: str | None = None
    ood: bool = False  # unlike the model's training data (see core/models/ood.py); never set when uncalibrated
    ood_score: float = 0.0  # higher = less like the training data
    ood_calibrated: bool = False  # False: the model keeps no record of its training data, the score is 1 - top prob
    ood_auroc: float | None = None  # how well the score separates outside images (ood.OODBank.auroc); None: unmeasured

    @property
    def ood_verdict(self) -> str:
        """'like', 'unlike', 'cannot tell' (a score that does not separate) or 'uncalibrated' (ood.verdict)."""
        return ood.verdict(self.ood_calibrated, self.ood, self.ood_auroc)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict:
        if self.error is not None:
            return {"path": self.path, "error": self.error}
        top = [{"index": i, "label": lab, "prob": p} for i, lab, p in zip(self.indices, self.labels, self.probs)]
        # null, not false, where the bank gives no verdict: a reader filtering on `ood` must not take it for "like"
        ood_flag = None if self.ood_verdict == "cannot tell" else self.ood
        return {"path": self.path, "top": top, "ood": ood_flag, "ood_score": self.ood_score,
                "ood_calibrated": self.ood_calibrated, "ood_auroc": self.ood_auroc, "ood_verdict": self.ood_verdict}


class NoClassifierHead(ValueError):
    """The model is headless (features only): it cannot classify; the message says what to do instead."""


def require_classifier(loaded: LoadedModel) -> None:
    """Raise NoClassifierHead, before any forward, when the model has no classifier head."""
    if not loaded.labels and openclip.is_clip_style(loaded):
        raise NoClassifierHead(
            f"{loaded.display_name} is a CLIP-style model with no classes yet: name them in words, --classes "
            f"\"ant, bee, wasp\" (or a file, or a folder of class folders; in the app, the Classes box under the "
            f"model bar), and it classifies into them with no training.")
    if not loaded.labels:
        raise NoClassifierHead(
            f"{loaded.display_name} has no classifier head (a headless model: features and attention only), so it "
            f"cannot predict classes. Use `vitstudio explain` or `vitstudio embed` (the app's attention and "
            f"Embeddings views), or fine-tune a head on your classes with `vitstudio finetune`.")


def forward_logits(loaded: LoadedModel, batch: torch.Tensor) -> torch.Tensor:
    """(B, classes) float32 logits on the CPU for a (B, 3, H, W) normalised batch."""
    with (loaded.lock, torch.inference_mode(), loaded.autocast(),
          explain_out_of_memory(loaded.device, len(batch), "while classifying")):
        x = to_device(batch, loaded.device)
        logits = cuda_graphs.replay(loaded.model, x, loaded.device, loaded.precision)  # small batches on CUDA
        if logits is None:
            logits = loaded.model(x)
    return logits.float().cpu()


def pooled_and_logits(loaded: LoadedModel, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """((B, D) pooled features before the classifier, (B, classes) logits), float32 on the CPU, in one forward."""
    with (loaded.lock, torch.inference_mode(), loaded.autocast(),
          explain_out_of_memory(loaded.device, len(batch), "while classifying")):
        feats = loaded.model.forward_features(to_device(batch, loaded.device))
        pooled = loaded.model.forward_head(feats, pre_logits=True)
        logits = loaded.model.forward_head(feats)
    return pooled.float().cpu(), logits.float().cpu()


def classify(loaded: LoadedModel, images: Sequence[Image.Image], names: Sequence[str] | None = None,
             topk: int = 5, keep_crops: bool = True) -> list[Prediction]:
    """Classify RGB PIL images in one batch."""
    if not images:
        return []
    require_classifier(loaded)
    crops = [loaded.crop(img) for img in images]
    batch = stack_for([loaded.to_tensor(c) for c in crops], loaded.device)
    names = names or [f"image {i}" for i in range(len(images))]
    return classify_tensor(loaded, batch, names, topk, crops if keep_crops else None)


def classify_tensor(loaded: LoadedModel, batch: torch.Tensor, names: Sequence[str], topk: int = 5,
                    crops: Sequence[Image.Image] | None = None) -> list[Prediction]:
    """Top-k predictions for an already preprocessed (B, 3, H, W) batch."""
    require_classifier(loaded)
    if ood.bank_for(loaded) is not None:  # the kNN score needs the pooled features: one forward gives both
        pooled, logits = pooled_and_logits(loaded, batch)
        pooled = pooled.numpy()
    else:
        pooled, logits = None, forward_logits(loaded, batch)
    return predictions_from(loaded, logits, pooled, names, topk, crops)


@contextlib.contextmanager
def forward_tap(loaded: LoadedModel) -> Iterator[dict]:
    """{"logits": (B, classes), "pooled": (B, D)} of the first forward of the model run inside (float32, CPU),
    holding the model's lock so no other thread's forward is seen: an analysis's own forward also gives the
    prediction (play draws a map per frame with one forward instead of two)."""
    seen: dict = {}

    def on_model(_module, _args, output):
        if "logits" not in seen and isinstance(output, torch.Tensor):
            seen["logits"] = output.detach().float().cpu()

    def on_head(_module, args, _output):
        if "pooled" not in seen and args and isinstance(args[0], torch.Tensor):
            seen["pooled"] = args[0].detach().float().cpu()

    with loaded.lock:
        handles = [loaded.model.register_forward_hook(on_model)]
        if isinstance(getattr(loaded.model, "head", None), torch.nn.Module):
            handles.append(loaded.model.head.register_forward_hook(on_head))
        try:
            yield seen
        finally:
            for handle in handles:
                handle.remove()


NOT_FINITE = ("the model's output is not a finite number (NaN or infinity): its weights, or what changes them (an "
              "adapter, concepts, --scale), hold values that are not finite or too large")


def predictions_from(loaded: LoadedModel, logits: torch.Tensor, pooled: np.ndarray | None, names: Sequence[str],
                     topk: int = 5, crops: Sequence[Image.Image] | None = None) -> list[Prediction]:
    """Top-k Prediction records from a forward's logits (and pooled features, for the OOD score)."""
    probs = zeroshot.probabilities(loaded, logits)  # softmax; a sigmoid per class for SigLIP zero-shot heads
    odd = ood.score(loaded, pooled, probs.numpy())
    k = max(1, min(topk, probs.shape[-1]))
    top_p, top_i = probs.topk(k, dim=-1)
    finite = torch.isfinite(logits.float()).all(-1).tolist()
    out = []
    for row, (name, p_row, i_row) in enumerate(zip(names, top_p.tolist(), top_i.tolist())):
        if not finite[row]:  # a NaN is never printed as a probability (nor as invalid JSON)
            out.append(Prediction(path=str(name), error=NOT_FINITE))
            continue
        crop = np.asarray(crops[row], dtype=np.uint8) if crops is not None else None
        out.append(Prediction(path=str(name), indices=tuple(i_row), labels=tuple(loaded.labels[i] for i in i_row),
                              probs=tuple(p_row), crop=crop, ood=bool(odd.flagged[row]),
                              ood_score=float(odd.scores[row]), ood_calibrated=odd.calibrated, ood_auroc=odd.auroc))
    return out


def _read_ahead(fn, items: Iterable, ahead: int, workers: int) -> Iterator:
    """fn(item) for every item, in order, computed by `workers` threads up to `ahead` items in advance.

    Decoding and resizing with Pillow release the GIL, so a few threads keep the model fed."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vitstudio-read") as pool:
        window: deque = deque()
        for item in items:
            window.append(pool.submit(fn, item))
            if len(window) >= ahead:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()


@dataclass(frozen=True)
class DecodedBatch:
    """One batch of files: every file in input order as (path, crop or None, error or None), and the
    normalised (B, 3, H, W) tensor of the readable ones (None when none was)."""

    items: list[tuple[str, Image.Image | None, str | None]]
    tensor: torch.Tensor | None
    extra: dict[str, object] = field(default_factory=dict)  # path -> `also(path, image)` (decoded_batches)

    @property
    def good(self) -> list[tuple[str, Image.Image]]:
        return [(p, crop) for p, crop, _ in self.items if crop is not None]

    @property
    def errors(self) -> list[tuple[str, str]]:
        return [(p, err) for p, _, err in self.items if err is not None]


def use_tensor_decoder(loaded: LoadedModel, decoder: str) -> bool:
    """'tensor' or 'pil' as asked; 'auto': tensors (decode_jpeg, preprocessing on the device) on a GPU, PIL on a
    CPU (where PIL is the exact reference and no slower)."""
    from vitstudio.core.data import tensor_decode

    if decoder not in DECODERS:
        raise ValueError(f"Unknown decoder '{decoder}'; use {', '.join(DECODERS)}.")
    wanted = decoder == "tensor" or (decoder == "auto" and loaded.device.type == "cuda")
    return wanted and tensor_decode.supports(loaded.data_config)


AUTO_BATCH = (32, 256)  # the range of `folder_batch_size`
ACTIVATION_BUDGET = 512 << 20  # bytes of one block's activations a folder pass's batch may take


def folder_batch_size(loaded: LoadedModel, requested: int | None = None) -> int:
    """`requested`, or (None) as many images per forward as keep one block's activations (attention matrices and
    the MLP's hidden layer, float32) under ACTIVATION_BUDGET, within AUTO_BATCH: a forward's fixed costs (a thread
    barrier per operator on the CPU, kernel launches on a GPU) are paid per batch, and at 32 images of a small model
    they were most of a folder pass (measured: tests/benchmarks/folder_scale.py)."""
    if requested is not None:
        return requested
    model = loaded.model
    try:
        tokens = int(np.prod(loaded.grid_size)) + loaded.num_prefix_tokens
    except (AttributeError, TypeError, ValueError):
        return AUTO_BATCH[0]
    width = int(getattr(model, "num_features", 768) or 768)
    blocks = getattr(model, "blocks", None)
    heads = int(getattr(getattr(blocks[0], "attn", None), "num_heads", 12)) if blocks else 12
    per_image = 4 * tokens * (8 * width + 2 * heads * tokens)
    return int(min(AUTO_BATCH[1], max(AUTO_BATCH[0], ACTIVATION_BUDGET // max(1, per_image))))


def decoded_batches(loaded: LoadedModel, paths: Iterable[str | os.PathLike], batch_size: int | None = 32,
                    cancel: CancelToken | None = None, readers: int | None = None,
                    decoder: str = "auto", also=None) -> Iterator[DecodedBatch]:
    """Files and folders -> batches of `batch_size` readable images (with the unreadable ones in between; None: the
    size `folder_batch_size` picks). `also(path, image)`, when given, is computed on the reader threads from each
    decoded image before its crop, so other per-image work rides the same decode (the batch's `extra`; the tensor
    decoder has no PIL image, and leaves `extra` empty).

    Images are decoded and cropped by `readers` threads (default: up to 8) ahead of the consumer; with the
    tensor decoder (see `use_tensor_decoder`), the threads only read bytes and a batch is decoded and
    preprocessed on the model's device (its items then carry no PIL crops)."""
    batch_size = folder_batch_size(loaded, batch_size)
    if use_tensor_decoder(loaded, decoder):
        yield from _tensor_batches(loaded, paths, batch_size, cancel, readers)
        return
    workers = readers or min(8, os.cpu_count() or 1)
    decoded = _read_ahead(lambda path: decode_and_crop(loaded, path, also), expand_paths(paths), 2 * batch_size,
                          workers)
    pending: list[tuple[str, Image.Image | None, torch.Tensor | None, str | None, object]] = []
    readable = 0  # of pending (counted as they come: a sum per item was quadratic in the batch size)

    def batch() -> DecodedBatch:
        tensors = [t for _, _, t, _, _ in pending if t is not None]
        out = DecodedBatch([(p, crop, err) for p, crop, _, err, _ in pending],
                           stack_for(tensors, loaded.device) if tensors else None,
                           {p: extra for p, _, t, _, extra in pending if t is not None and also is not None})
        pending.clear()
        return out

    for item in decoded:
        if cancel is not None:
            cancel.raise_if_cancelled()
        pending.append(item)
        readable += item[2] is not None
        if readable >= batch_size:
            yield batch()
            readable = 0
    if pending:
        yield batch()


def _tensor_batches(loaded: LoadedModel, paths, batch_size: int, cancel, readers) -> Iterator[DecodedBatch]:
    """Batches decoded and preprocessed by a producer thread while the model runs on the previous one; on CUDA
    that thread works on its own stream (nvJPEG's host-side work and its kernels overlap the model's) and each
    batch is handed over with an event the consumer's stream waits on."""
    from vitstudio.core.data import tensor_decode

    device = loaded.device
    workers = readers or min(8, os.cpu_count() or 1)
    raw = _read_ahead(tensor_decode.read_bytes, (str(p) for p in expand_paths(paths)), 2 * batch_size, workers)

    def make(files: list) -> DecodedBatch:
        decoded = tensor_decode.decode(files, device, lambda t: tensor_decode.eval_preprocess(t, loaded.data_config))
        tensors = [t for _, t, _ in decoded if t is not None]
        items = [(p, True if t is not None else None, err) for p, t, err in decoded]  # True: decoded, no PIL crop
        return DecodedBatch(items, torch.stack(tensors) if tensors else None)

    def produce() -> Iterator[tuple[DecodedBatch, object]]:
        stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            for files in _chunks(raw, batch_size):
                batch = make(files)
                yield batch, stream.record_event() if stream is not None else None

    for batch, ready in prefetched(produce(), depth=2, name="vitstudio-decode"):
        if cancel is not None:
            cancel.raise_if_cancelled()
        if ready is not None:  # the consumer's stream waits for the decode; the allocator learns who uses it
            consumer = torch.cuda.current_stream(device)
            consumer.wait_event(ready)
            if batch.tensor is not None:
                batch.tensor.record_stream(consumer)
        yield batch


def _chunks(items: Iterable, size: int) -> Iterator[list]:
    """Consecutive lists of `size` items (the last one shorter)."""
    chunk: list = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def classify_files(loaded: LoadedModel, paths: Iterable[str | os.PathLike], topk: int = 5,
                   batch_size: int | None = 32, cancel: CancelToken | None = None, keep_crops: bool = False,
                   readers: int | None = None, decoder: str = "auto") -> Iterator[list[Prediction]]:
    """Classify files and folders batch by batch; unreadable files become error records, the batch goes on.

    Yields one list per processed batch (errors included, in input order). Keeping the crops needs PIL's.
    """
    decoder = "pil" if keep_crops else decoder
    for batch in decoded_batches(loaded, paths, batch_size, cancel, readers, decoder):
        good = batch.good
        results = {}
        if good:
            crops = [crop for _, crop in good] if keep_crops else None
            results = dict(zip((p for p, _ in good), classify_tensor(loaded, batch.tensor, [p for p, _ in good],
                                                                     topk, crops)))
        yield [results[p] if err is None else Prediction(path=p, error=err) for p, _, err in batch.items]


def write_csv(predictions: Iterable[Prediction], file, topk: int) -> None:
    """One row per input: path, error, label/prob/index for ranks 1..topk, then the out-of-distribution flag and
    score (the flag empty when the score is uncalibrated)."""
    writer = SafeCsvWriter(file)
    header = ["path", "error"]
    for r in range(1, topk + 1):
        header += [f"label_{r}", f"prob_{r}", f"index_{r}"]
    writer.writerow(header + ["ood", "ood_score"])
    for pred in predictions:
        row = [pred.path, pred.error or ""]
        for r in range(topk):
            if r < len(pred.indices):
                row += [pred.labels[r], f"{pred.probs[r]:.6f}", pred.indices[r]]
            else:
                row += ["", "", ""]
        calibrated = pred.ok and pred.ood_calibrated
        shown = {"like": "no", "unlike": "yes"}.get(pred.ood_verdict, pred.ood_verdict) if calibrated else ""
        row += [shown, f"{pred.ood_score:.6f}" if pred.ok else ""]
        writer.writerow(row)
