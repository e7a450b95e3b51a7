"""Register neurons and the test-time register (Jiang et al. 2025, "Vision Transformers Don't Need Trained
Registers"; reference code: github.com/nickjiang2378/test-time-registers, cited below by file and line).

A few MLP neurons put global information into a few high-norm patch tokens (Darcet et al. 2023's artifacts).
`find_register_neurons` scores every neuron by its mean |activation| at the outlier tokens (shared/algorithms.py:6-83);
`test_time_register` adds one untrained, all-zero token and moves those neurons' activation onto it
(shared/hook_fn.py:13-23), so the artifacts move there. The MLP activation hooked is the hidden one, the output of
`mlp.drop1`: `act(fc1 x)` in timm's Mlp, the gated product `act(g) * x` in GluMlp and SwiGLU (EVA, DINOv2-g) — the
reference's "hidden identity" for SwiGLU.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from vitstudio.core.errors import UserFacingError
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import is_class_attention, is_windowed

MAX_FILE_BYTES = 4 << 20  # a register file lists tens of neurons: a few kB; anything past 4 MB is not one
FORMAT = "vitstudio-registers/1"
SPARSE_BELOW, SPARSE_SHARE = 0.5, 0.5  # algorithms.py:14-15: below 0.5 on at least half the tokens


class RegisterError(ValueError, UserFacingError):
    """A register file that cannot be used, or a model the test-time register cannot be added to: one line."""


# -- which models ---------------------------------------------------------------------------------------------
def hidden_modules(model: nn.Module) -> list[nn.Module]:
    """Per block, the module whose output is the MLP's hidden activation (timm's Mlp/GluMlp/SwiGLU `drop1`)."""
    return [block.mlp.drop1 for block in model.blocks]


def why_no_neurons(model: nn.Module) -> str | None:
    """None when the MLP neurons of every block can be read and set, else why not (one sentence)."""
    if is_windowed(model):
        return "its blocks attend inside windows of patches (Swin), so no token is seen by every other"
    blocks = getattr(model, "blocks", None)
    if not blocks:
        return f"{type(model).__name__} has no transformer blocks ViT Studio can read"
    for block in blocks:
        mlp = getattr(block, "mlp", None)
        if not isinstance(getattr(mlp, "drop1", None), nn.Module):
            return (f"its {type(mlp).__name__} MLP has no hidden activation ViT Studio can hook (timm's Mlp, GluMlp "
                    f"and SwiGLU have one)")
    return None


def why_no_register(model: nn.Module) -> str | None:
    """None when a test-time register can be added to `model`, else why not (one sentence)."""
    reason = why_no_neurons(model)
    if reason is not None:
        return reason
    if is_class_attention(model):
        return "its class token joins only in the class-attention blocks (CaiT), after the patches' own blocks"
    if any(hasattr(m, "relative_position_bias_table") or getattr(m, "rel_pos", None) is not None
           for m in model.modules()):
        return "its attention adds a relative-position bias tabled for a fixed number of tokens (BEiT, relpos ViTs)"
    if not callable(getattr(model, "_pos_embed", None)):
        return (f"{type(model).__name__} has no timm `_pos_embed` step, where the class token joins the patches, to "
                f"add a token at (NaFlexViT builds its tokens with a mask sized to them)")
    return None


# -- the register file --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Neuron:
    layer: int  # block index
    neuron: int  # index in the block's MLP hidden layer
    score: float  # mean |activation| at the outlier tokens, averaged over the images that had outliers
    elsewhere: float = 0.0  # the same at every other token: where it does not fire


@dataclass(frozen=True)
class RegisterNeurons:
    """What `vitstudio registers` finds and writes: the neurons, best first, and how they were found."""

    model: str
    neurons: tuple[Neuron, ...]
    detect_layer: int
    threshold: float
    threshold_rule: str  # how the threshold was chosen, in words
    highest_layer: int
    images: int  # images read
    images_with_outliers: int
    sparsity_filter: bool = False
    scale: float = 1.0  # the register's activation = scale × the neuron's signed maximum (hook_fn.py:20)

    def by_layer(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for n in self.neurons:
            out.setdefault(n.layer, []).append(n.neuron)
        return out

    def to_json(self) -> dict:
        return {"format": FORMAT, "model": self.model, "detect_layer": self.detect_layer, "threshold": self.threshold,
                "threshold_rule": self.threshold_rule, "highest_layer": self.highest_layer, "images": self.images,
                "images_with_outliers": self.images_with_outliers, "sparsity_filter": self.sparsity_filter,
                "scale": self.scale,
                "neurons": [{"layer": n.layer, "neuron": n.neuron, "score": n.score, "elsewhere": n.elsewhere}
                            for n in self.neurons]}


def write_registers(result: RegisterNeurons, path: str | Path) -> Path:
    from vitstudio.core.files import atomic_write_bytes

    path = Path(path)
    atomic_write_bytes(path, (json.dumps(result.to_json(), indent=1) + "\n").encode())
    return path


def read_registers(path: str | Path) -> RegisterNeurons:
    """A register file, read safely: bounded in size, and a file that is not one is a RegisterError in one line."""
    path = Path(path)
    from vitstudio.core.files import shown_path

    name = shown_path(path)
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise RegisterError(f"cannot read the register file {name}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise RegisterError(f"{name} is over {MAX_FILE_BYTES >> 20} MB: not a register file (`vitstudio registers` "
                            f"writes a few kB)")
    try:
        doc = json.loads(raw.decode("utf-8"))
        return _parsed(doc)
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc) or type(exc).__name__
        raise RegisterError(f"{name} is not a register file from `vitstudio registers` ({' '.join(why.split())})"
                            ) from None


def _parsed(doc) -> RegisterNeurons:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"no \"format\": \"{FORMAT}\"")
    neurons = doc["neurons"]
    if not isinstance(neurons, list) or not neurons:
        raise ValueError("it lists no neurons")

    def whole(value, what):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{what} {value!r} is not a whole number ≥ 0")
        return value

    def number(value, what):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
            raise ValueError(f"{what} {value!r} is not a finite number")
        return float(value)

    parsed = tuple(Neuron(whole(n["layer"], "layer"), whole(n["neuron"], "neuron"), number(n.get("score", 0), "score"),
                          number(n.get("elsewhere", 0), "elsewhere")) for n in neurons)
    return RegisterNeurons(str(doc.get("model", "")), parsed, int(doc.get("detect_layer", -1)),
                           number(doc.get("threshold", 0), "threshold"), str(doc.get("threshold_rule", "")),
                           int(doc.get("highest_layer", -1)), int(doc.get("images", 0)),
                           int(doc.get("images_with_outliers", 0)), bool(doc.get("sparsity_filter", False)),
                           number(doc.get("scale", 1.0), "scale"))


def check_fits(loaded: LoadedModel, registers: RegisterNeurons) -> None:
    """A RegisterError when a neuron of the file is not in this model (a file found on another model)."""
    reason = why_no_register(loaded.model)
    if reason is not None:
        raise RegisterError(f"a test-time register cannot be added to {loaded.display_name}: {reason}")
    blocks = loaded.model.blocks
    for n in registers.neurons:
        if n.layer >= len(blocks):
            raise RegisterError(f"the register file names block {n.layer}, but {loaded.display_name} has "
                                f"{len(blocks)} blocks: it was found on another model ({registers.model or '?'})")
        width = blocks[n.layer].mlp.fc2.in_features
        if n.neuron >= width:
            raise RegisterError(f"the register file names neuron {n.neuron} of block {n.layer}, whose MLP has "
                                f"{width}: it was found on another model ({registers.model or '?'})")


# -- the test-time register ---------------------------------------------------------------------------------
REGISTER_INDEX = "_vitstudio_test_time_register"  # set on the model while a test-time register is in it


def register_index(model: nn.Module) -> int | None:
    """The test-time register's position in the token sequence while one is added, else None."""
    return getattr(model, REGISTER_INDEX, None)


def own_prefix_tokens(model: nn.Module) -> int:
    """The prefix tokens the model was built with (its position table's), a test-time register left out."""
    return int(getattr(model, "num_prefix_tokens", 0)) - (register_index(model) is not None)


def signed_max(acts: torch.Tensor) -> torch.Tensor:
    """(B, N, k) -> (B, k): per image and neuron, the value of largest magnitude over the tokens, with its sign.
    Ties go to the minimum, as utils.py:120-123's `sign_max`, which takes one value over all of a layer's chosen
    neurons (hook_fn.py:18-20); here each neuron gets its own (the same when a layer has one)."""
    hi, lo = acts.amax(1), acts.amin(1)
    return torch.where(hi.abs() > lo.abs(), hi, lo)


@contextlib.contextmanager
def test_time_register(loaded: LoadedModel, registers: RegisterNeurons | dict[int, list[int]],
                       scale: float | None = None) -> Iterator[None]:
    """Within the context every forward of `loaded` runs with one extra all-zero token without a position embedding
    (hook_fn.py:13-23): at each chosen neuron, the extra token's activation is set to scale × the neuron's signed
    maximum over the image's tokens and every patch's to zero; any batch size (the reference's hook indexes image 0).

    The token sits after the class token and any trained registers, where the reference appends it after the
    patches: attention and MLPs are the same for any order of the tokens once the position embeddings are added, and
    here every analysis, pooling and timm's `forward_intermediates` count it among the prefix tokens
    (`num_prefix_tokens` + 1), which RoPE (EVA) leaves unrotated as it leaves a class token."""
    model = loaded.model
    reason = why_no_register(model)
    if reason is not None:
        raise RegisterError(f"a test-time register cannot be added to {loaded.display_name}: {reason}")
    if isinstance(registers, RegisterNeurons):
        check_fits(loaded, registers)
        scale = registers.scale if scale is None else scale
        chosen = registers.by_layer()
    else:
        chosen = {int(k): list(v) for k, v in registers.items()}
    scale = 1.0 if scale is None else float(scale)
    with loaded.lock:
        if register_index(model) is not None:
            raise RegisterError("this model already holds a test-time register")
        p = loaded.num_prefix_tokens
        counted = [m for m in model.modules() if getattr(m, "num_prefix_tokens", None) == p]
        pos_embed = model._pos_embed  # the bound method; the instance attribute below shadows it

        def with_register(x, *args, **kwargs):
            for m in counted:  # the embedding itself (position-table resampling) counts the model's own tokens
                m.num_prefix_tokens = p
            try:
                out = pos_embed(x, *args, **kwargs)
            finally:
                for m in counted:
                    m.num_prefix_tokens = p + 1
            tokens = out[0] if isinstance(out, tuple) else out  # EVA returns (tokens, rotary embedding)
            zero = tokens.new_zeros(tokens.shape[0], 1, tokens.shape[2])
            tokens = torch.cat([tokens[:, :p], zero, tokens[:, p:]], 1)
            return (tokens, *out[1:]) if isinstance(out, tuple) else tokens

        hidden = hidden_modules(model)
        handles = [hidden[layer].register_forward_hook(_move_to_register(p, neurons, scale))
                   for layer, neurons in chosen.items()]
        model._pos_embed = with_register
        setattr(model, REGISTER_INDEX, p)
        for m in counted:
            m.num_prefix_tokens = p + 1
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()
            for m in counted:
                m.num_prefix_tokens = p
            del model._pos_embed
            delattr(model, REGISTER_INDEX)


def _move_to_register(index: int, neurons: list[int], scale: float):
    def hook(_module, _inputs, out):  # out: (B, N, hidden)
        idx = torch.as_tensor(neurons, device=out.device)
        peak = signed_max(out[:, :, idx])  # (B, k), over every token, the register's own included (hook_fn.py:20)
        out = out.clone()
        out[:, index, idx] = (scale * peak).to(out.dtype)
        out[:, index + 1:, idx] = 0  # the patches (hook_fn.py:21-23, normal_values="zero")
        return out
    return hook


def applied(loaded: LoadedModel, registers: RegisterNeurons | None):
    """The test-time register as a context when a file was given, else nothing (for the faces' `with`)."""
    return contextlib.nullcontext() if registers is None else test_time_register(loaded, registers)


# -- the search ---------------------------------------------------------------------------------------------
@contextlib.contextmanager
def hidden_activations(model: nn.Module, layers: Iterable[int], on_layer) -> Iterator[None]:
    """Within the context every forward calls on_layer(layer, (B, N, hidden)) for each layer asked."""
    hidden = hidden_modules(model)
    handles = [hidden[layer].register_forward_hook(lambda _m, _i, out, layer=layer: on_layer(layer, out))
               for layer in layers]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def neuron_maps(loaded: LoadedModel, x: torch.Tensor, neurons: list[tuple[int, int]]) -> np.ndarray:
    """(k, gh, gw): each (layer, neuron)'s activation at every patch of image x (1, 3, H, W): where it fires."""
    from vitstudio.core.analysis.capture import grid_for

    layers = sorted({layer for layer, _ in neurons})
    seen: dict[int, torch.Tensor] = {}
    with loaded.lock, hidden_activations(loaded.model, layers, lambda layer, acts: seen.__setitem__(layer, acts)), \
            torch.inference_mode(), loaded.autocast():
        loaded.model.forward_features(x.to(loaded.device))
    gh, gw = grid_for(loaded.model, x)
    p = loaded.num_prefix_tokens
    return np.stack([seen[layer][0, p:, neuron].float().reshape(gh, gw).cpu().numpy() for layer, neuron in neurons])


def image_scores(acts: torch.Tensor, outliers: torch.Tensor, sparsity_filter: bool = False
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """One layer of a batch: acts (B, N, H), outliers (B, N) bool -> (score (B, H): mean |activation| at each
    image's outliers, optionally times "the neuron is sparse" (algorithms.py:49-63); elsewhere (B, H): the same at
    the other tokens). Images without outliers get zeros (the caller leaves them out, algorithms.py:46-47)."""
    acts = acts.float()
    mask = outliers.to(acts.dtype)[..., None]  # (B, N, 1)
    magnitude = acts.abs()
    score = (magnitude * mask).sum(1) / mask.sum(1).clamp_min(1)
    elsewhere = (magnitude * (1 - mask)).sum(1) / (1 - mask).sum(1).clamp_min(1)
    if sparsity_filter:
        sparse = (acts < SPARSE_BELOW).sum(1) >= SPARSE_SHARE * acts.shape[1]
        score = score * sparse.to(score.dtype)
    return score, elsewhere


def detect_norms(loaded: LoadedModel, x: torch.Tensor, layer: int) -> torch.Tensor:
    """(B, N) L2 norm of every token (prefix and patches) output by block `layer` (algorithms.py:39)."""
    out = {}
    block = loaded.model.blocks[layer]
    handle = block.register_forward_hook(lambda _m, _i, y: out.__setitem__("y", y))
    try:
        with loaded.lock, torch.inference_mode(), loaded.autocast():
            loaded.model.forward_features(x.to(loaded.device))
    finally:
        handle.remove()
    return out["y"].float().norm(dim=-1).cpu()


def auto_threshold(norms: np.ndarray) -> tuple[float, str]:
    """A threshold from a distribution of patch norms: Tukey's far-out fence (Q3 + 3·IQR), and at least twice the
    median (Darcet et al.'s artifacts are several times the typical norm; a narrow distribution's fence sits barely
    above its bulk)."""
    flat = np.asarray(norms, dtype=np.float64).ravel()
    q1, median, q3 = np.percentile(flat, [25, 50, 75])
    fence = q3 + 3 * (q3 - q1)
    if fence >= 2 * median:
        return float(fence), (f"auto: Q3 + 3·IQR of {flat.size:,} patch norms = {q3:.4g} + 3·{q3 - q1:.4g} (Tukey's "
                              f"far-out fence)")
    return float(2 * median), (f"auto: twice the median of {flat.size:,} patch norms, 2·{median:.4g} (above Q3 + "
                               f"3·IQR = {fence:.4g})")


def find_register_neurons(loaded: LoadedModel, paths: Iterable[str], detect_layer: int = -1,
                          threshold: float | str = "auto", highest_layer: int | None = None, top_k: int = 10,
                          sparsity_filter: bool = False, batch_size: int | None = 16,
                          cancel: CancelToken | None = None, decoder: str = "auto"
                          ) -> Generator[Progress, None, tuple[RegisterNeurons, list[tuple[str, str]]]]:
    """Jiang et al.'s search (algorithms.py:6-83) over a folder: tokens of block `detect_layer` whose norm exceeds
    the threshold are the outliers; every neuron of blocks 0..highest_layer (default: the detect layer) is scored by
    its mean |activation| at them, averaged over the images that have any; the top_k best. Returns (the result, the
    (path, reason) of each unreadable file). Two passes: the norms (and the threshold from them), then the neurons."""
    from vitstudio.core.inference import decoded_batches

    reason = why_no_neurons(loaded.model)
    if reason is not None:
        raise RegisterError(f"register neurons cannot be read in {loaded.display_name}: {reason}")
    depth = len(loaded.model.blocks)
    if not -depth <= detect_layer < depth:
        raise RegisterError(f"--detect-layer {detect_layer} is out of range: the model has {depth} blocks")
    detect_layer %= depth
    highest = detect_layer if highest_layer is None else highest_layer
    if not 0 <= highest < depth:
        raise RegisterError(f"the highest layer {highest} is out of range: the model has {depth} blocks "
                            f"(0..{depth - 1})")
    norms, errors, readable = [], [], []
    for batch in decoded_batches(loaded, paths, batch_size, cancel, decoder=decoder):
        errors += batch.errors
        if batch.tensor is not None:
            norms.append(detect_norms(loaded, batch.tensor, detect_layer))
            readable += [path for path, _, error in batch.items if error is None]
        yield Progress(len(readable) + len(errors), 0, "token norms")
    if not norms:
        raise RegisterError("no readable images found")
    norms = torch.cat(norms)  # (images, N)
    p = loaded.num_prefix_tokens
    if threshold == "auto":
        threshold, rule = auto_threshold(norms[:, p:].numpy())
    else:
        threshold, rule = float(threshold), "given"
    outliers = norms > threshold  # strictly above, as algorithms.py:41-44
    layers = list(range(highest + 1))
    sums: dict[int, torch.Tensor] = {}
    counted = 0
    if outliers.any():  # the second pass reads only the images with outliers (algorithms.py:46-47 skips the rest)
        found = {path: row for path, row in zip(readable, outliers) if row.any()}
        counted = yield from _score_pass(loaded, found, layers, sparsity_filter, sums, batch_size, cancel, decoder)
    neurons = _ranked(sums, counted, top_k)
    return RegisterNeurons(loaded.name, neurons, detect_layer, float(threshold), rule, highest, len(norms),
                           int(outliers.any(1).sum()), sparsity_filter), errors


def _score_pass(loaded, found: dict, layers, sparsity_filter, sums, batch_size, cancel, decoder):
    """The second pass over the images with outliers (`found`: path -> (N,) outlier mask): per layer, their scores
    summed into `sums`; returns how many were read (a file unreadable now is left out)."""
    from vitstudio.core.inference import decoded_batches

    seen = counted = 0
    for batch in decoded_batches(loaded, list(found), batch_size, cancel, decoder=decoder):
        seen += len(batch.items)
        if batch.tensor is None:
            continue
        mask = torch.stack([found[path] for path, _, error in batch.items if error is None])
        x = batch.tensor

        def reduce(layer, acts, mask=mask):
            score, elsewhere = image_scores(acts, mask.to(acts.device), sparsity_filter)
            total = torch.stack([score.sum(0), elsewhere.sum(0)]).double().cpu()
            sums[layer] = total if layer not in sums else sums[layer] + total

        with loaded.lock, hidden_activations(loaded.model, layers, reduce), torch.inference_mode(), \
                loaded.autocast():
            loaded.model.forward_features(x.to(loaded.device))
        counted += len(x)
        yield Progress(seen, len(found), "register neurons")
    return counted


def _ranked(sums: dict[int, torch.Tensor], images: int, top_k: int) -> tuple[Neuron, ...]:
    """The top_k (layer, neuron) by mean score, best first (algorithms.py:69-81, utils.py's filter_layers)."""
    if not images:
        return ()
    layers = sorted(sums)
    scores = torch.stack([sums[layer][0] for layer in layers]) / images  # (layers, H)
    elsewhere = torch.stack([sums[layer][1] for layer in layers]) / images
    width = scores.shape[1]
    order = np.argsort(-scores.flatten().numpy(), kind="stable")[:top_k]
    return tuple(Neuron(layers[i // width], int(i % width), float(scores.flatten()[i]), float(elsewhere.flatten()[i]))
                 for i in order)
