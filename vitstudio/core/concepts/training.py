"""Training the TopK SAE on a folder's cached tokens: a generator (progress with R², L0 and dead concepts; cancel
between steps; resume where it stopped).

The tokens are streamed from the cache's memory map in chunks of images (shuffled by image, then by token within a
chunk), so memory is flat in the folder's size. Loss: ‖x − x̂‖² (normalised tokens), plus Gao et al.'s auxiliary
loss (off by default: `aux_k`): the `aux_k` largest pre-codes of the dead concepts (none fired for a whole epoch's
tokens) reconstruct the residual x − x̂, weighted 1/32. Gradients are clipped to norm 1. The dictionary's rows are
unit length after every step. Everything random comes from
the seed (initialisation; the order of epoch e from seed + e), so a resumed run ends where an uninterrupted one does.

A checkpoint FILE.partial (weights, optimiser, step, dead-concept counters, the epoch's sums so far, the settings
and token source it belongs to) is written at every epoch's end and on cancel; a run with the same settings and
tokens resumes it.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vitstudio.core.concepts.sae import Normalisation, TopKSAE
from vitstudio.core.concepts.settings import ConceptSettings
from vitstudio.core.concepts.tokens import FolderTokens
from vitstudio.core.files import atomic_torch_save
from vitstudio.core.jobs import Cancelled, CancelToken, Progress

CHUNK_TOKENS = 1 << 16  # tokens read from the map at once (~100 MB float32 at d = 384)
AUX_WEIGHT = 1 / 32
CLIP = 1.0  # the gradient's norm, at most


@dataclass(frozen=True)
class SAEProgress(Progress):
    r2: float | None = None  # explained variance of the tokens, over the last epoch's steps so far
    l0: float | None = None  # mean active concepts per token
    dead: int | None = None  # concepts that fired on none of the last epoch's tokens
    epoch: int = 0


@dataclass(frozen=True)
class SAEResult:
    sae: TopKSAE
    norm: Normalisation
    r2: float
    l0: float
    dead: int
    steps: int
    cancelled: bool
    resumed_from: int  # the step a checkpoint resumed (0: a fresh start)


def normalisation(tokens: FolderTokens) -> Normalisation:
    """Mean token and scale (E‖(t − mean)/scale‖² = d), in one streamed pass (float64 sums)."""
    total, sq, n = np.zeros(tokens.width), 0.0, 0
    for index in _chunks(np.arange(len(tokens.paths)), tokens.patches):
        t = tokens.of_images(index).reshape(-1, tokens.width).astype(np.float64)
        total += t.sum(0)
        sq += float((t * t).sum())
        n += len(t)
    if n == 0:
        raise ValueError("No readable images: there are no tokens to learn concepts from.")
    mean = total / n
    var = max(sq / n - float(mean @ mean), 1e-12)  # E‖t − mean‖²
    return Normalisation(mean.astype(np.float32), float(np.sqrt(var / tokens.width)))


def _chunks(index: np.ndarray, patches: int) -> list[np.ndarray]:
    per = max(1, CHUNK_TOKENS // max(1, patches))
    return [index[i:i + per] for i in range(0, len(index), per)]


def epoch_batches(tokens: FolderTokens, norm: Normalisation, seed: int, epoch: int, step_tokens: int):
    """The normalised token batches (each ≤ step_tokens) of one epoch, in the order seed and epoch give."""
    rng = np.random.default_rng([seed, epoch])
    for index in _chunks(rng.permutation(len(tokens.paths)), tokens.patches):
        t = torch.from_numpy(tokens.of_images(np.sort(index)).reshape(-1, tokens.width))
        t = norm.apply(t)[torch.from_numpy(rng.permutation(len(t)))]
        yield from t.split(step_tokens)


def steps_per_epoch(tokens: FolderTokens, step_tokens: int) -> int:
    return sum(-(-len(c) * tokens.patches // step_tokens) for c in _chunks(np.arange(len(tokens.paths)),
                                                                             tokens.patches))


def new_sae(width: int, settings: ConceptSettings) -> TopKSAE:
    torch.manual_seed(settings.seed)
    sae = TopKSAE(width, settings.size, settings.k)
    with torch.no_grad():  # the encoder starts as the dictionary's transpose (Gao et al.), its bias at 0
        sae.encoder.weight.copy_(sae.dictionary)
        sae.encoder.bias.zero_()
    return sae


def sae_step(sae: TopKSAE, opt, x: torch.Tensor, since_fired: torch.Tensor, dead_after: int, aux_k: int):
    """One optimiser step; returns (squared error, total variance, active codes) summed over the batch."""
    pre = sae.pre_codes(x)
    top = pre.topk(sae.k, dim=-1)
    z = torch.zeros_like(pre).scatter(-1, top.indices, top.values)
    x_hat = sae.decode(z)
    err = ((x - x_hat) ** 2).sum()
    loss = err / len(x)
    dead = since_fired >= dead_after
    if aux_k and dead.any():
        residual = (x - x_hat).detach()
        aux_pre = pre.masked_fill(~dead, 0.0)
        aux = aux_pre.topk(min(aux_k, int(dead.sum())), dim=-1)
        e_hat = torch.zeros_like(pre).scatter(-1, aux.indices, aux.values) @ sae.dictionary
        loss = loss + AUX_WEIGHT * ((residual - e_hat) ** 2).sum() / (residual ** 2).sum().clamp_min(1e-12)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    # as overcomplete's train_sae: on the digits through the demo model (1,024 concepts, k 16, 10 epochs) clipping
    # took R² from 0.931 to 0.973 (tests/benchmarks/concepts.py)
    torch.nn.utils.clip_grad_norm_(sae.parameters(), CLIP)
    opt.step()
    sae.normalise_dictionary()
    fired = (z > 0).any(0)
    since_fired.add_(len(x)).masked_fill_(fired, 0)
    return float(err.detach()), float((x ** 2).sum()), int((z > 0).sum())


def checkpoint_path(out: Path) -> Path:
    return Path(f"{out}.partial")


def _resume(out: Path, key: dict, sae: TopKSAE, opt, since_fired: torch.Tensor) -> tuple[int, int, list]:
    """(the step to go on from, the epoch it falls in, that epoch's sums so far); (0, 0, zeros) for a fresh start."""
    fresh = (0, 0, [0.0, 0.0, 0, 0])
    path = checkpoint_path(out)
    if not path.is_file():
        return fresh
    start = copy.deepcopy(sae.state_dict()), copy.deepcopy(opt.state_dict())
    try:
        state = torch.load(path, map_location=since_fired.device, weights_only=True)
        if not isinstance(state, dict) or state.get("key") != key:
            return fresh
        sae.load_state_dict(state["sae"])
        opt.load_state_dict(state["opt"])
        since_fired.copy_(state["since_fired"])
        sums = [float(state["sums"][0]), float(state["sums"][1]), int(state["sums"][2]), int(state["sums"][3])]
        return int(state["step"]), int(state["epoch"]), sums
    except Exception:  # noqa: BLE001 (a damaged checkpoint, or one from before `sums`, is started afresh)
        sae.load_state_dict(start[0])
        opt.load_state_dict(start[1])
        since_fired.zero_()
        return fresh


def train_sae(tokens: FolderTokens, settings: ConceptSettings, out: Path, cancel: CancelToken | None = None,
              norm: Normalisation | None = None, device: str | torch.device = "cpu"
              ) -> Generator[Progress, None, SAEResult]:
    """Train (or resume) the SAE of `settings` on `tokens` on `device` (the model's: a GPU trains it there);
    checkpoints next to `out`; the SAE returned is on the CPU."""
    norm = norm or normalisation(tokens)
    sae = new_sae(tokens.width, settings).to(device)
    opt = torch.optim.Adam(sae.parameters(), lr=settings.learning_rate)
    per_epoch = steps_per_epoch(tokens, settings.tokens_per_step)
    dead_after = len(tokens.paths) * tokens.patches  # a whole epoch's tokens without firing
    since_fired = torch.zeros(settings.size, dtype=torch.long, device=device)
    key = dict(settings={k: v for k, v in settings.as_dict().items() if k != "batch_size"}, source=tokens.source,
               files=len(tokens.paths), rows=int(tokens.rows.sum()))
    start, start_epoch, start_sums = _resume(out, key, sae, opt, since_fired)
    total = per_epoch * settings.epochs
    step, sums = 0, [0.0, 0.0, 0, 0]
    cancelled = False
    for epoch in range(settings.epochs):
        # the epoch the checkpoint fell in goes on from its sums: a run resumed after its last step reports the
        # figures it ended with (zero sums gave R² NaN)
        sums = list(start_sums) if epoch == start_epoch else [0.0, 0.0, 0, 0]
        for x in epoch_batches(tokens, norm, settings.seed, epoch, settings.tokens_per_step):
            if step < start:  # already done before the checkpoint: the batch is read only to keep the order
                step += 1
                continue
            if cancel is not None and _stopped(cancel):
                cancelled = True
                break
            err, var, active = sae_step(sae, opt, x.to(device, non_blocking=True), since_fired, dead_after,
                                        settings.aux_k)
            sums = [sums[0] + err, sums[1] + var, sums[2] + active, sums[3] + len(x)]
            step += 1
            yield _progress(step, total, epoch, settings.epochs, sums, since_fired, dead_after)
        if cancelled or step >= start:
            _save_checkpoint(out, key, sae, opt, since_fired, step, epoch, sums)
        if cancelled:
            break
    r2, l0 = _r2_l0(sums)
    return SAEResult(sae.cpu().eval(), norm, r2, l0, int((since_fired >= dead_after).sum()), step, cancelled,
                     start)


def _stopped(cancel: CancelToken) -> bool:
    """Waits while the run is paused; True once it is cancelled (the checkpoint is then written)."""
    if cancel.paused:
        with contextlib.suppress(Cancelled):
            cancel.wait_while_paused()
    return cancel.cancelled


def _r2_l0(sums) -> tuple[float, float]:
    err, var, active, n = sums
    return (1.0 - err / var if var else float("nan")), (active / n if n else float("nan"))


def _progress(step, total, epoch, epochs, sums, since_fired, dead_after) -> SAEProgress:
    r2, l0 = _r2_l0(sums)
    dead = int((since_fired >= dead_after).sum())
    return SAEProgress(step, total, f"Epoch {epoch + 1}/{epochs}: R² {r2:.3f}, L0 {l0:.1f}, {dead} dead", r2, l0,
                       dead, epoch)


def _save_checkpoint(out: Path, key: dict, sae: TopKSAE, opt, since_fired: torch.Tensor, step: int, epoch: int,
                     sums: list) -> None:
    atomic_torch_save(dict(key=key, sae=sae.state_dict(), opt=opt.state_dict(), since_fired=since_fired.clone(),
                           step=step, epoch=epoch, sums=list(sums)), checkpoint_path(out))
