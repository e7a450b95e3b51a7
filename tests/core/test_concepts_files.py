"""Concepts files as they reach a reader (issue 53): written as one pair or refused as a mixed one; damaged or hostile
files (wrong shapes, values that are not finite, a layer the model lacks, JSON nested too deeply) refused in one
line before any tensor math, by the loader and by `predict` / `explain`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from vitstudio.core import files
from vitstudio.core.concepts.concepts_file import load_concepts, save_concepts, sidecar_path
from vitstudio.core.concepts.sae import Concepts, Normalisation, TopKSAE


def made(width: int = 32, size: int = 8, k: int = 2, layer: int = 0, seed: int = 0, grid=(4, 4)) -> Concepts:
    torch.manual_seed(seed)
    meta = dict(model="m", fingerprint="f", layer=layer, grid=list(grid), training=dict(r2=0.9, steps=3))
    return Concepts(TopKSAE(width, size, k), Normalisation(np.zeros(width, np.float32), 1.0), meta)


@pytest.mark.parametrize("legacy", [False, True], ids=["hashed", "legacy-sidecar"])
def test_a_pair_stopped_between_its_two_renames_is_refused(tmp_path, monkeypatch, legacy):
    """A full disk (or a kill) after the new weights' rename and before the sidecar's leaves new weights beside the
    old sidecar; a reader refuses the pair in one line instead of reading 8 concepts with another file's
    normalisation. The old sidecar may come from before hashes were recorded (legacy): the new weights say that
    their sidecar holds their hash."""
    out = tmp_path / "c"
    save_concepts(made(seed=0), out)
    if legacy:  # as written before hashes: no hash in the sidecar, no mark in the weights' metadata
        from safetensors.torch import load_file, save_file

        sidecar = json.loads(sidecar_path(out).read_text())
        del sidecar["weights_sha256"]
        sidecar_path(out).write_text(json.dumps(sidecar))
        save_file(load_file(tmp_path / "c.safetensors"), tmp_path / "c.safetensors", {"format": sidecar["format"]})
    assert load_concepts(out).size == 8
    monkeypatch.setattr(files, "_passes", {})  # the fault point counts passes per process
    monkeypatch.setenv("VITSTUDIO_FULL_AT", "before-rename-c.json")
    with pytest.raises(OSError):
        save_concepts(made(seed=1, size=16), out)
    with pytest.raises(ValueError, match="are not one pair") as caught:
        load_concepts(out)
    assert "\n" not in str(caught.value)
