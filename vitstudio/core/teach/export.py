"""Exporting a taught model, proven equal: the model with its new head written as a run folder plain timm loads
(`local-dir:`), as ONNX and in the seed format (the existing exporters), then each artefact run on every sample with
its own preprocessing — timm's from the folder's pretrained_cfg, ONNX Runtime's from the file's metadata, the seed
folder through ViT Studio's loader — and its top-1 and probabilities compared with the app's (`TeachResult`):
equal top-1 and |Δp| ≤ 1e-4 on every sample, or the samples that differ named with how.

Layout of the export folder: `run/` (timm), `model.onnx`, `seed/`, `check.json` (the figures of every check). `run/`
and `seed/` carry what a fine-tuned run carries beside its weights: its out-of-distribution bank (core/models/ood.py,
written by core/train/ood_fit.py from the training share's features, thresholded on the held-out share), so
`vitstudio predict --model EXPORT/run` says whether an image is like the taught samples.

The folder is built beside and swapped in whole (`core/outputs.py`), so check.json always sits with the artefacts it
checked: never inside or over the project, never over files ViT Studio did not write, never a mix of two exports."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vitstudio.core.data.images import read_image
from vitstudio.core.files import atomic_write_bytes
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.outputs import Input, check_output_folder, output_folder
from vitstudio.core.teach.session import TeachResult
from vitstudio.core.train.model_prep import new_head

EXPORT = "teach --export"  # the command named in an export folder's manifest
ATOL = 1e-4
BATCH = 64


@dataclass(frozen=True)
class ArtefactCheck:
    artefact: str  # "timm", "onnx" or "seed"
    path: str
    samples: int  # how many were compared
    max_abs_diff: float  # max |Δp| over every sample and class
    differing: tuple[tuple[str, str], ...]  # (sample, how it differs)
    not_checked: str | None = None  # why this artefact was not written or run (None: it was)

    @property
    def equal(self) -> bool:
        return self.not_checked is None and not self.differing and self.samples > 0


@dataclass(frozen=True)
class TeachExport:
    folder: Path
    checks: tuple[ArtefactCheck, ...]
    ood_bank: tuple[str, ...] = ()  # the out-of-distribution banks written (one per model folder)
    no_ood_bank: str | None = None  # why none was written (None: written)

    @property
    def equal(self) -> bool:
        """Every artefact written was run and agrees on every sample (an artefact not written does not count)."""
        ran = [c for c in self.checks if c.not_checked is None]
        return bool(ran) and all(c.equal for c in ran)

    def to_json(self) -> dict:
        return {"folder": str(self.folder), "equal": self.equal, "ood_bank": list(self.ood_bank),
                "no_ood_bank": self.no_ood_bank,
                "checks": [dict(dataclasses.asdict(c), equal=c.equal,
                                differing=[{"sample": p, "why": w} for p, w in c.differing]) for c in self.checks]}


def taught_model(loaded: LoadedModel, result: TeachResult) -> LoadedModel:
    """A copy of `loaded` whose final Linear is the taught head (quick recipe), with a new uid and the classes."""
    if len(result.head.layers) != 1:
        raise ValueError(f"the {result.head.recipe} recipe's head has {len(result.head.layers)} layers, which a timm "
                         f"ViT's head (one Linear) cannot hold: export with the quick recipe.")
    model = copy.deepcopy(loaded.model)
    new_head(model, list(result.classes), [], 0, reuse=False)
    head = model.head
    final = head.out if isinstance(head, torch.nn.Sequential) and hasattr(head, "out") else head
    weight, bias = result.head.layers[0]
    with torch.no_grad():
        final.weight.copy_(torch.as_tensor(weight))
        final.bias.copy_(torch.as_tensor(bias))
    uid = LoadedModel.__dataclass_fields__["uid"].default_factory()
    return dataclasses.replace(loaded, model=model.eval(), labels=list(result.classes),
                               label_set=f"taught ({result.head.recipe} head)", uid=uid)


def compare(artefact: str, path: str, predict: Callable[[list[str]], np.ndarray], samples: Sequence[str],
            expected: np.ndarray, atol: float = ATOL) -> ArtefactCheck:
    """Run `predict` (paths -> (n, C) probabilities) on every sample in batches and compare with `expected`."""
    got = np.concatenate([predict(list(samples[i:i + BATCH])) for i in range(0, len(samples), BATCH)]) \
        if len(samples) else np.zeros_like(expected)
    diff = np.abs(got.astype(np.float64) - expected)
    differing = []
    for i, sample in enumerate(samples):
        if got[i].argmax() != expected[i].argmax():
            differing.append((sample, f"top-1 is class {got[i].argmax()} ({got[i].max():.4f}), the app's "
                                      f"{expected[i].argmax()} ({expected[i].max():.4f})"))
        elif diff[i].max() > atol:
            differing.append((sample, f"|Δp| {diff[i].max():.2e} > {atol:.0e} (same top-1)"))
    return ArtefactCheck(artefact, path, len(samples), float(diff.max()) if diff.size else 0.0, tuple(differing))


def _images(paths: list[str], transform) -> torch.Tensor:
    return torch.stack([transform(read_image(p)) for p in paths])


def _timm_predictor(folder: Path) -> Callable[[list[str]], np.ndarray]:
    """Plain timm: the folder through `local-dir:`, the transform from the model's own pretrained_cfg."""
    import timm

    model = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    transform = timm.data.create_transform(**timm.data.resolve_model_data_config(model), is_training=False)

    def predict(paths: list[str]) -> np.ndarray:
        with torch.inference_mode():
            return model(_images(paths, transform)).softmax(-1).numpy()
    return predict


def _onnx_predictor(path: Path) -> Callable[[list[str]], np.ndarray]:
    """ONNX Runtime, the transform built from the file's own metadata (what whoever runs the file reads)."""
    import onnxruntime as ort
    import timm

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    config = {"input_size": tuple(json.loads(meta["input_size"])), "interpolation": meta["interpolation"],
              "mean": tuple(json.loads(meta["mean"])), "std": tuple(json.loads(meta["std"])),
              "crop_pct": float(meta["crop_pct"]), "crop_mode": meta["crop_mode"]}
    transform = timm.data.create_transform(**config, is_training=False)

    def predict(paths: list[str]) -> np.ndarray:
        logits = torch.as_tensor(session.run(None, {"image": _images(paths, transform).numpy()})[0])
        return logits.softmax(-1).numpy()
    return predict


def _seed_predictor(folder: Path) -> Callable[[list[str]], np.ndarray]:
    from vitstudio.core.models.loading import load_model

    back = load_model(str(folder), device="cpu", precision="fp32")

    def predict(paths: list[str]) -> np.ndarray:
        with back.lock, torch.inference_mode():
            return back.model(_images(paths, back.transform)).float().softmax(-1).numpy()
    return predict


def _write(fmt: str, taught: LoadedModel, folder: Path) -> tuple[Path, Callable[[Path], Callable]]:
    """Write one artefact with the project's existing exporter; (its path, how to build its predictor)."""
    if fmt == "timm":
        from vitstudio.core.train.runs import save_model_folder

        save_model_folder(taught.model, folder / "run", list(taught.labels), dict(taught.data_config),
                          {"base_model": taught.name, "fine_tuned": f"ViT Studio Teach ({taught.label_set})"})
        return folder / "run", _timm_predictor
    if fmt == "onnx":
        from vitstudio.core.models.onnx_export import export_onnx

        return export_onnx(taught, folder / "model.onnx").path, _onnx_predictor
    from vitstudio.core.models.seed_export import export_seed

    return export_seed(taught, folder / "seed").folder, _seed_predictor


def export_inputs(samples: Sequence[str], project: str | Path | None = None) -> list[Input]:
    """What an export must not land on: the project folder and every folder holding a sample (a class folder)."""
    inputs = [Input("the project folder", project)] if project is not None else []
    return inputs + [Input("a folder of the samples", parent)
                     for parent in dict.fromkeys(str(Path(p).parent) for p in samples)]


def check_export_folder(folder: str | Path, samples: Sequence[str], project: str | Path | None = None) -> Path:
    """The export folder, or one line saying why not (`core/outputs.py`'s rules), before anything is taught."""
    return check_output_folder(folder, EXPORT, "--export", export_inputs(samples, project))


def export_taught(loaded: LoadedModel, result: TeachResult, folder: str | Path,
                  formats: Sequence[str] = ("timm", "onnx", "seed"), atol: float = ATOL,
                  project: str | Path | None = None) -> TeachExport:
    """Every format written and checked on every sample; a format that cannot hold this model (the seed format's
    refusals, ONNX without its extra) is recorded with its one-line reason instead. check.json is written last, and
    the folder swapped in whole after it."""
    folder = Path(folder)
    taught = taught_model(loaded, result)
    with output_folder(folder, EXPORT, "--export", export_inputs(result.paths, project)) as building:
        checks = []
        for fmt in formats:
            try:
                path, predictor = _write(fmt, taught, building.path)
                checks.append(compare(fmt, str(building.final_of(path)), predictor(path), result.paths,
                                      result.probabilities, atol))
            except (ValueError, ImportError) as exc:  # what an exporter refuses with, or a missing extra
                checks.append(ArtefactCheck(fmt, "", 0, float("nan"), (), " ".join(str(exc).split())))
        folders = [building.path / Path(c.path).relative_to(building.final) for c in checks
                   if c.not_checked is None and c.artefact in ("timm", "seed")]
        banks, why = _write_banks(taught, result, folders)
        export = TeachExport(building.final, tuple(checks), tuple(str(building.final_of(b)) for b in banks), why)
        atomic_write_bytes(building.path / "check.json", json.dumps(export.to_json(), indent=1).encode())
    return export


def _write_banks(taught: LoadedModel, result: TeachResult, folders: list[Path]) -> tuple[tuple[str, ...], str | None]:
    """The out-of-distribution bank a fine-tuned run writes (`write_ood_bank`: the training share's pooled features,
    the held-out share's threshold and the score's separation from outside images), computed once and copied into
    each model folder; (the banks written, None) or ((), why not)."""
    from vitstudio.core.models.ood import BANK_FILE
    from vitstudio.core.train.ood_fit import write_ood_bank

    if not folders:
        return (), "no model folder was written"
    train = [(Path(result.paths[i]), int(result.labels[i])) for i in result.split.train]
    val = [(Path(result.paths[i]), int(result.labels[i])) for i in result.split.val]
    steps = write_ood_bank(taught, train, val, result.classes, folders[0])
    try:
        while True:
            next(steps)
    except StopIteration:
        pass
    except ValueError as exc:  # no readable training image to build it from
        return (), " ".join(str(exc).split())
    data = (folders[0] / BANK_FILE).read_bytes()
    for other in folders[1:]:
        atomic_write_bytes(other / BANK_FILE, data)
    return tuple(str(f / BANK_FILE) for f in folders), None
