"""Export a loaded model to ONNX and check ONNX Runtime gives the same logits (optional extra: onnx, onnxruntime)."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vitstudio.core.models.model import LoadedModel


@dataclass(frozen=True)
class OnnxExport:
    path: Path
    opset: int
    max_abs_diff: float | None  # ONNX Runtime vs PyTorch on a random batch; None when onnxruntime is missing


def export_onnx(loaded: LoadedModel, path: str | Path, opset: int = 17, atol: float = 1e-4) -> OnnxExport:
    """Write `path` (atomically) with a dynamic batch axis, then compare ONNX Runtime's logits with PyTorch's."""
    if opset < 17:
        raise ValueError("Use opset 17 or newer (LayerNormalization is native from 17 on).")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)  # as every writer of the app: an output's folders are made
    model = _fixed_grid(loaded.model.eval(), loaded.grid_size)
    x = torch.randn(2, *loaded.data_config["input_size"], device=loaded.device)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # renamed into place only when complete
    # the tracer turns keyword flags into tensors, which fused attention rejects (EVA passes is_causal to
    # scaled_dot_product_attention): the explicit softmax path exports for every family and ONNX has no fused op
    fused = [(m, m.fused_attn) for m in model.modules() if hasattr(m, "fused_attn")]
    try:
        with loaded.lock, torch.inference_mode(False), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer chatter about constant Python branches
            for module, _ in fused:
                module.fused_attn = False
            try:
                torch.onnx.export(model, (x,), tmp, opset_version=opset, input_names=["image"],
                                  output_names=["logits"],
                                  dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}}, dynamo=False)
            except (TypeError, RuntimeError, torch.onnx.errors.OnnxExporterError) as exc:  # what tracing raises
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise RuntimeError(f"ONNX export of {loaded.display_name} failed: {type(exc).__name__}: "
                                   f"{first}") from None
            finally:
                for module, flag in fused:
                    module.fused_attn = flag
        _add_metadata(tmp, loaded)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    diff = check_onnx(loaded, path)
    if diff is not None and diff > atol:
        raise RuntimeError(f"ONNX Runtime's logits differ from PyTorch's by {diff:.2e} (> {atol:.0e}).")
    return OnnxExport(path, opset, diff)


def _fixed_grid(model: torch.nn.Module, grid: tuple[int, int]) -> torch.nn.Module:
    """NaFlexViT resamples its position table to each image's grid on every forward (bicubic with antialias, which
    ONNX has no operator for). The exported graph has one input size, so it gets a copy of the model holding the
    table already resampled to that grid (timm's own resampling, run once): the same numbers, no resize inside."""
    embeds = getattr(model, "embeds", None)
    table = getattr(embeds, "pos_embed", None)
    if table is None or table.ndim != 4 or tuple(table.shape[1:3]) == tuple(grid):
        return model
    import copy

    with torch.no_grad():
        flat = torch.zeros(1, grid[0] * grid[1], table.shape[-1], dtype=table.dtype, device=table.device)
        embeds._apply_learned_pos_embed(flat, grid_size=list(grid))  # adds the resampled table in place
        fixed = copy.deepcopy(model)
        fixed.embeds.pos_embed = torch.nn.Parameter(flat.reshape(1, *grid, -1), requires_grad=False)
    return fixed


def _add_metadata(path: Path, loaded: LoadedModel) -> None:
    """Labels and preprocessing as ONNX metadata, so whoever runs the file knows what goes in and comes out."""
    import json

    import onnx

    model = onnx.load(str(path))
    cfg = loaded.data_config
    meta = {"labels": json.dumps(list(loaded.labels)), "input_size": json.dumps(list(cfg["input_size"])),
            "interpolation": str(cfg.get("interpolation")), "crop_pct": str(cfg.get("crop_pct", 1.0)),
            "crop_mode": str(cfg.get("crop_mode", "center")), "mean": json.dumps(list(cfg["mean"])),
            "std": json.dumps(list(cfg["std"])), "source": loaded.display_name, "producer": "ViT Studio"}
    del model.metadata_props[:]
    for key, value in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, str(path))


def check_onnx(loaded: LoadedModel, path: Path, batch: int = 3) -> float | None:
    """Max |logits difference| between ONNX Runtime and PyTorch on a random batch (another size than exported)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    x = torch.randn(batch, *loaded.data_config["input_size"])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    onnx_logits = session.run(None, {"image": x.numpy()})[0]
    with loaded.lock, torch.inference_mode():
        ref = loaded.model(x.to(loaded.device)).float().cpu().numpy()
    return float(np.abs(onnx_logits - ref).max())
