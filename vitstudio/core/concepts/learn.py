"""A whole concepts run, as `vitstudio concepts` and the Concepts panel start it: the block's tokens (cached), the
SAE trained (resumable), what each concept fires on, FILE.safetensors + FILE.json."""

from __future__ import annotations

import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path

from vitstudio.core.concepts.concepts_file import save_concepts, sidecar_path, writable_target
from vitstudio.core.concepts.sae import Concepts
from vitstudio.core.concepts.settings import ConceptSettings, fitting_size
from vitstudio.core.concepts.stats import concept_stats
from vitstudio.core.concepts.tokens import FolderTokens, check_layer, collect_sharded, collect_tokens
from vitstudio.core.concepts.training import SAEResult, checkpoint_path, train_sae
from vitstudio.core.distributed import DistInfo
from vitstudio.core.files import dataset_dir, remove_stale_temps
from vitstudio.core.folder.embedcache import model_fingerprint
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel


@dataclass(frozen=True)
class LearnResult:
    path: Path | None  # the concepts file written (None when cancelled: the checkpoint is kept to resume)
    concepts: Concepts | None
    training: SAEResult
    tokens: FolderTokens


def default_output(loaded: LoadedModel, folder: str | Path, settings: ConceptSettings) -> Path:
    """Where the Concepts tab keeps what it learns: the app's records of the dataset (never inside the folder)."""

    model = re.sub(r"[^A-Za-z0-9._-]", "_", loaded.display_name)[-40:]
    layer = "default" if settings.layer is None else settings.layer
    return dataset_dir(folder) / "concepts" / (f"{model}-block{layer}-n{settings.size}-k{settings.k}-"
                                               f"e{settings.epochs}-s{settings.seed}.safetensors")


def folder_classes(paths: Sequence[str]) -> list[str] | None:
    """Each image's class, its parent folder's name, when the images sit in two or more folders."""
    parents = [Path(p).parent.name for p in paths]
    return parents if len(set(parents)) >= 2 else None


def learn_concepts(loaded: LoadedModel, paths: Sequence[str], settings: ConceptSettings, out: str | Path,
                   cancel: CancelToken | None = None, info: DistInfo | None = None
                   ) -> Generator[Progress, None, LearnResult | None]:
    """Yields Progress (the SAE's steps as SAEProgress); returns the LearnResult (None on ranks other than 0)."""
    settings.check()
    out = writable_target(out)
    for written in (out, sidecar_path(out), checkpoint_path(out)):  # what a kill mid-write left, from an earlier run
        remove_stale_temps(written)
    layer = check_layer(loaded, settings.layer)
    if info is not None and info.enabled:
        tokens = yield from collect_sharded(loaded, paths, layer, info, settings.batch_size, cancel)
        if tokens is None:
            return None
    else:
        tokens = yield from collect_tokens(loaded, paths, layer, settings.batch_size, cancel)
    if not tokens.paths:
        missing = [str(p) for p in paths if not Path(p).exists()]
        if missing:
            raise ValueError(f"{missing[0]} does not exist: there are no images to learn concepts from.")
        if tokens.errors:
            path, why = tokens.errors[0]
            raise ValueError(f"None of the {len(tokens.errors)} images could be read ({Path(path).name}: {why}).")
        raise ValueError(f"No images in {', '.join(map(str, paths))}: open a folder holding .jpg, .png, .bmp, .webp "
                         f"or .tif images (subfolders are searched too).")
    trained = yield from train_sae(tokens, settings, out, cancel, device=loaded.device)
    if trained.cancelled:
        return LearnResult(None, None, trained, tokens)
    meta = dict(model=loaded.name, weights=loaded.weights_source, architecture=loaded.architecture,
                fingerprint=model_fingerprint(loaded), layer=layer, grid=list(tokens.grid),
                settings=settings.as_dict() | {"layer": layer},
                data=dict(paths=[str(p) for p in paths], images=len(tokens.paths), unreadable=len(tokens.errors),
                          tokens=len(tokens.paths) * tokens.patches),
                training=dict(r2=round(trained.r2, 5), l0=round(trained.l0, 3), dead=trained.dead,
                              steps=trained.steps, learning_rate=settings.learning_rate))
    concepts = Concepts(trained.sae, trained.norm, meta)
    concepts.stats = yield from concept_stats(concepts, tokens, folder_classes(tokens.paths), cancel)
    path = save_concepts(concepts, out)
    checkpoint_path(out).unlink(missing_ok=True)
    return LearnResult(path, concepts, trained, tokens)


POOR_R2 = 0.5  # below it the concepts leave over half the tokens' variance unexplained: their maps say little


def poor_fit_warning(concepts) -> str:
    """One line when the concepts reconstruct their tokens poorly, else "": concepts that explain little of the
    tokens (too many for a small folder and a narrow model) would otherwise be browsed as if they meant something."""
    training, data = concepts.meta.get("training", {}), concepts.meta.get("data", {})
    r2 = training.get("r2")
    if r2 is None or r2 >= POOR_R2:
        return ""
    count = data.get("tokens")
    tokens = f" on {count:,} tokens" if count else ""
    size, k = fitting_size(count) if count else (max(concepts.sae.k * 4, concepts.size // 8), concepts.sae.k)
    fewer = (f"fewer concepts (e.g. {size:,}, {min(k, size)} active per patch), " if size < concepts.size else "")
    return (f"These {concepts.size:,} concepts reconstruct the tokens poorly (R² {r2:.2f} after "
            f"{training.get('steps', '?')} steps{tokens}): their maps and top patches say little. Learn again with "
            f"{fewer}more epochs or more images.")
