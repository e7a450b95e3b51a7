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
    their sidecar holds their hash.

    [parametrised ×2]
    """
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


def _pair(out, tensors: dict, meta: dict) -> None:
    """FILE.safetensors and FILE.json as given, the sidecar naming the weights' hash (so only what the test spoils
    is wrong)."""
    import hashlib

    from safetensors.torch import save

    data = save({k: v.contiguous() for k, v in tensors.items()})
    (out.parent / f"{out.name}.safetensors").write_bytes(data)
    text = meta if isinstance(meta, str) else json.dumps({**meta, "weights_sha256": hashlib.sha256(data).hexdigest()})
    (out.parent / f"{out.name}.json").write_text(text)


def _spoiled(good, spoil):
    from safetensors.torch import load_file

    tensors = load_file(good.with_suffix(".safetensors"))
    meta = json.loads(good.with_suffix(".json").read_text())
    spoilt = spoil(tensors, meta)  # a new (tensors, sidecar), or None where it changed them in place
    return spoilt if isinstance(spoilt, tuple) else (tensors, meta)


ENC_W, ENC_B, DICT, MULT = ("encoder.final_block.0.weight", "encoder.final_block.0.bias", "dictionary._weights",
                            "dictionary.multiplier")
SPOILS = {  # name -> (what it does to the tensors and the sidecar, a piece of the one line)
    "nan-encoder": (lambda t, m: t[ENC_W].__setitem__((0, 0), float("nan")), "holds values that are not finite"),
    "zero-scale": (lambda t, m: m["normalisation"].__setitem__("scale", 0), "'normalisation.scale' must be"),
    "nan-scale": (lambda t, m: m["normalisation"].__setitem__("scale", float("nan")), "'normalisation.scale' must"),
    "huge-multiplier": (lambda t, m: t.__setitem__(MULT, torch.tensor(1e4)), "scales the dictionary beyond"),
    "encoder-shape": (lambda t, m: t.__setitem__(ENC_W, t[ENC_W][:, :5]), "where the dictionary (8 × 32) needs"),
    "bias-shape": (lambda t, m: t.__setitem__(ENC_B, t[ENC_B][:3]), "encoder.final_block.0.bias is [3]"),
    "1-d-dictionary": (lambda t, m: t.__setitem__(DICT, t[DICT][0]), "must be a (concepts, width) matrix"),
    "int-dictionary": (lambda t, m: t.__setitem__(DICT, t[DICT].to(torch.int8)), "holds values that are not finite"),
    "deep-json": (lambda t, m: (t, "[" * 100_000 + "]" * 100_000), "nested too deeply"),
    "sidecar-a-list": (lambda t, m: (t, "[1, 2]"), "a JSON object is expected, not list"),
    "layer-999": (lambda t, m: m.__setitem__("layer", 999), "it reads block 999, the model has blocks 0 to 1"),
    "layer-null": (lambda t, m: m.__setitem__("layer", None), "'layer' must be a block number"),
    "layer-x": (lambda t, m: m.__setitem__("layer", "x"), "'layer' must be a block number"),
    "layer-minus-1": (lambda t, m: m.__setitem__("layer", -1), "'layer' must be a block number"),
    "no-k": (lambda t, m: m.pop("k"), "(no 'k')"),
    "other-width": (lambda t, m: (dict(t, **{ENC_W: t[ENC_W][:, :16], DICT: t[DICT][:, :16]}),
                                  dict(m, normalisation=dict(mean=[0.0] * 16, scale=1.0))),
                    "its concepts are 16 wide, the model's tokens 32"),
}


def test_a_damaged_or_hostile_concepts_file_is_one_line_in_predict_and_explain(tiny_weights, tmp_path, capsys):
    """Every spoilt file: exit 2 and one line naming it and what is wrong, before any tensor math (a traceback from
    sae.py, intervene.py or tokens.py, or predictions from NaN weights, before); --scale with a factor that is not
    finite likewise.

    16 spoilt files (NaN weights, zero/NaN scale, a multiplier overflowing the dictionary, encoder/bias/1-D/int8
    dictionaries, 100k-deep JSON, a sidecar that is a list, layer 999/null/"x"/-1, no k, another width) and `--scale
    3=nan`/`3=inf`: `predict --concepts` (and `explain --method concept` for the layers, width and NaN) exit 2 with one
    line naming what is wrong; no map written.
    """
    from tests.conftest import TINY_SPEC
    from vitstudio.cli import main
    from vitstudio.core.folder.embedcache import model_fingerprint
    from vitstudio.core.models.loading import load_model

    weights, _ = tiny_weights
    model = ["--model", TINY_SPEC, "--weights", str(weights)]
    good = made(layer=1)
    good.meta["fingerprint"] = model_fingerprint(load_model(TINY_SPEC, str(weights), "cpu"))
    save_concepts(good, tmp_path / "good")
    image = tmp_path / "a.png"
    from PIL import Image

    Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(image)
    assert main(["predict", str(image), *model, "--concepts", str(tmp_path / "good"), "--quiet"]) == 0
    cases = [(["predict", str(image), *model, "--concepts", str(tmp_path / "good"), "--scale", scale, "--quiet"],
              "--scale takes finite factors") for scale in ("3=nan", "3=inf")]
    for name, (spoil, says) in SPOILS.items():
        _pair(tmp_path / name, *_spoiled(tmp_path / "good", spoil))
        cases.append((["predict", str(image), *model, "--concepts", str(tmp_path / name), "--quiet"], says))
        if name.startswith(("layer", "other", "nan")):
            cases.append((["explain", str(image), *model, "--method", "concept", "--concepts", str(tmp_path / name),
                           "--concept", "0", "--out", str(tmp_path / "m.npy")], says))
    capsys.readouterr()
    for args, says in cases:
        assert main(args) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and says in err[0], (args, err)
    assert not (tmp_path / "m.npy").exists()


def test_a_prediction_that_is_not_finite_is_an_error_never_a_row(tiny_weights, tmp_path, capsys):
    """Weights with a NaN in the head: every image is an error record (exit 1), and stdout is strict JSON (it printed
    "prob": NaN with exit 0).

    Weights with a NaN in the head: `predict --json` gives each image an error record ("not a finite number"), exit 1,
    and its stdout parses as strict JSON.
    """
    from PIL import Image
    from safetensors.torch import load_file, save_file

    from tests.conftest import TINY_SPEC
    from vitstudio.cli import main

    weights, _ = tiny_weights
    state = load_file(weights)
    state["head.bias"][2] = float("nan")
    save_file(state, tmp_path / "nan.safetensors")
    image = tmp_path / "a.png"
    Image.new("RGB", (32, 32), "red").save(image)
    assert main(["predict", str(image), "--model", TINY_SPEC, "--weights", str(tmp_path / "nan.safetensors"),
                 "--json", "--quiet"]) == 1
    out = capsys.readouterr().out
    record = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert set(record) == {"path", "error"} and "not a finite number" in record["error"]


def test_what_a_killed_write_left_in_the_concepts_folder_is_removed_by_the_next_run(tiny_weights, tmp_path, capsys):
    """A kill during an atomic write leaves `.NAME.XXXXXXXX.tmp` (mkstemp's name) beside the file; the next
    `concepts` run into that name removes those of its own three files (weights, sidecar, checkpoint) that are over
    a minute old and that no writer holds, and nothing else: a fresh temp (a write under way in another process),
    an old one a writer holds locked, another file's, a folder of that name, a user's own .tmp stay.

    [Linux only]
    """
    import os
    import time

    from PIL import Image

    from tests.conftest import TINY_SPEC
    from vitstudio.cli import main

    fcntl = pytest.importorskip("fcntl")
    for i in range(3):
        (tmp_path / "images").mkdir(exist_ok=True)
        Image.new("RGB", (32, 32), (80 * i, 40, 200)).save(tmp_path / "images" / f"{i}.png")
    out = tmp_path / "out"
    out.mkdir()
    old = time.time() - 2 * files.STALE_TEMP_S
    stale = [".c.safetensors.k2x_9abc.tmp", ".c.json.00000000.tmp", ".c.safetensors.partial.zzzzzzzz.tmp"]
    kept = [".c.safetensors.fresh000.tmp", ".c.safetensors.held0000.tmp", ".d.safetensors.abcdefgh.tmp",
            ".c.json.folder00.tmp", "notes.tmp", ".c.json.short.tmp"]
    for name in stale + kept:
        (out / name).mkdir() if "folder" in name else (out / name).write_bytes(b"half a file")
        if "fresh" not in name:
            os.utime(out / name, (old, old))
    with open(out / ".c.safetensors.held0000.tmp", "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        assert main(["concepts", str(tmp_path / "images"), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]),
                     "--size", "4", "--k", "2", "--epochs", "1", "--out", str(out / "c"), "--quiet"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == sorted([*kept, "c.json", "c.safetensors"])
