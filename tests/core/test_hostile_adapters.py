"""Hostile adapter folders and pickled weights (issue 53): every one refused in one line naming the file, before peft
or torch reads it; never a traceback, an allocation of the size a note asks for, adapters loading each other without
end, a prediction from NaN or int8 weights, or torch's advice to load a pickle with weights_only=False."""

from __future__ import annotations

import importlib.util
import json
import shutil
import struct

import pytest
import torch
from PIL import Image

from tests.conftest import TINY_SPEC, make_tiny_vit
from tests.core.test_malformed_models import _RunsCode

# found, not imported: peft (with transformers) is 1.6 s of import in every test process that collects this file
pytestmark = pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft is not installed")


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    """(a LoRA adapter folder as a run writes it, on a tiny timm base folder; an image)."""
    import timm

    from vitstudio.core.train.adapters import add_adapters
    from vitstudio.core.train.recipes import make_config

    root = tmp_path_factory.mktemp("adapters")
    timm.models.save_for_hf(make_tiny_vit(seed=3), str(root / "base"), safe_serialization=True)
    wrapped = add_adapters(make_tiny_vit(seed=3), make_config("d", "x", "o", preset="lora", lora_r=2), (32, 32))
    wrapped.save_pretrained(str(root / "good"))
    (root / "good" / "vitstudio_adapter.json").write_text(json.dumps(
        {"base_model": str(root / "base"), "base_weights": None, "classes": [f"c{i}" for i in range(5)],
         "data_config": {"input_size": [3, 32, 32]}}))
    image = root / "a.png"
    Image.new("RGB", (32, 32), "red").save(image)
    return root / "good", image


def _json(name, value):
    def spoil(folder):
        (folder / name).write_text(value if isinstance(value, str) else json.dumps(value))
    return spoil


def _edit(name, **fields):
    def spoil(folder):
        data = json.loads((folder / name).read_text())
        (folder / name).write_text(json.dumps({**data, **fields}))
    return spoil


def _weights(make):
    def spoil(folder):
        from safetensors.torch import load_file, save_file

        path = folder / "adapter_model.safetensors"
        made = make(load_file(path), path)
        if isinstance(made, dict):
            save_file(made, path)
    return spoil


def _base(target):
    def spoil(folder):
        base = folder if target == "itself" else folder.parent / "other"
        if target == "other":  # two adapters naming each other
            shutil.copytree(folder, base)
            _edit("vitstudio_adapter.json", base_model=str(folder))(base)
        _edit("vitstudio_adapter.json", base_model=str(base))(folder)
    return spoil


def _header(size):
    return lambda t, path: path.write_bytes(struct.pack("<Q", size) + b"{}")


def _lying(t, path):
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(data[:len(data) // 2]))  # the header's offsets point past the end


def _pickled(folder):
    (folder / "adapter_model.safetensors").unlink()
    torch.save({"lora": _RunsCode(folder.parent / "ran")}, folder / "adapter_model.bin")


C, N = "adapter_config.json", "vitstudio_adapter.json"
SPOILS = {  # name -> (spoil, a piece of the one line)
    "config-a-list": (_json(C, [1]), "a JSON object is expected, not list"),
    "config-null": (_json(C, "null"), "not NoneType"),
    "config-a-number": (_json(C, "7"), "not int"),
    "config-a-string": (_json(C, '"x"'), "not str"),
    "note-a-list": (_json(N, []), "a JSON object is expected, not list"),
    "note-null": (_json(N, "null"), "not NoneType"),
    "config-deep": (_json(C, "[" * 100_000 + "]" * 100_000), "nested too deeply"),
    "data-config-a-list": (_edit(N, data_config=[3, 32, 32]), "'data_config' must be an object"),
    "input-size-100000": (_edit(N, data_config={"input_size": [3, 100000, 100000]}), "of at most 4096 px"),
    "r-sixteen": (_edit(C, r="sixteen"), "'r' must be a whole number"),
    "prompt-tuning": (_edit(C, peft_type="PROMPT_TUNING"), "a PROMPT_TUNING adapter"),
    "alpha-nan": (_json(C, '{"peft_type": "LORA", "r": 2, "lora_alpha": NaN}'), "'lora_alpha' must be a finite"),
    "header-2^40": (_weights(_header(1 << 40)), "is not a safetensors file ViT Studio can read"),
    "lying-offsets": (_weights(_lying), "is not a safetensors file ViT Studio can read"),
    "empty-weights": (_weights(lambda t, path: path.write_bytes(b"")), "is not a safetensors file"),
    "int8-weights": (_weights(lambda t, path: {k: v.to(torch.int8) for k, v in t.items()}), "holds int8 values"),
    "nan-weights": (_weights(lambda t, path: {k: v * float("nan") for k, v in t.items()}), "not finite numbers"),
    "no-weights": (lambda f: (f / "adapter_model.safetensors").unlink(), "has no adapter_model.safetensors"),
    "pickled-bin": (_pickled, "adapter_model.bin holds pickled weights"),
    "base-itself": (_base("itself"), "(itself) as its base model"),
    "bases-each-other": (_base("other"), "as its base model; an adapter's base must be a model"),
}


def test_a_hostile_adapter_folder_is_one_line(adapter, tmp_path, capsys):
    """21 spoilt copies of a peft LoRA folder (adapter_config.json / vitstudio_adapter.json a list, null, number, string
    or 100k deep; data_config a list; input_size 100000²; r "sixteen"; PROMPT_TUNING; lora_alpha NaN; weights with a
    2⁴⁰-byte header, lying offsets, 0 bytes, int8 or NaN values, or none; a pickled adapter_model.bin; a base that is
    itself or an adapter naming it back): `predict --model FOLDER` exits 2 with one line naming the file, never
    "weights_only"; the .bin's code never runs.
    """
    from vitstudio.cli import main

    good, image = adapter
    assert main(["predict", str(image), "--model", str(good), "--quiet"]) == 0
    capsys.readouterr()
    for name, (spoil, says) in SPOILS.items():
        folder = shutil.copytree(good, tmp_path / name / "adapter")
        spoil(folder)
        assert main(["predict", str(image), "--model", str(folder), "--quiet"]) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and says in err[0], (name, err)
        assert "weights_only" not in err[0] and len(err[0]) < 1000, (name, err)
    assert not (tmp_path / "pickled-bin" / "ran").exists()


def test_a_legacy_pickle_is_refused_without_torchs_advice(adapter, tmp_path, capsys):
    """A checkpoint in torch's legacy (not zip) format holding a global weights_only refuses, as --weights and as
    an adapter's base weights: timm 1.0.31 raises its own RuntimeError from torch's refusal, ending "retry with
    weights_only=False"; the line says the file holds pickled objects instead."""
    from vitstudio.cli import main

    good, image = adapter
    legacy = tmp_path / "legacy.pth"
    torch.save({"head.bias": torch.zeros(5), "x": _RunsCode(tmp_path / "ran")}, legacy,
               _use_new_zipfile_serialization=False)
    folder = shutil.copytree(good, tmp_path / "adapter")
    _edit("vitstudio_adapter.json", base_model=TINY_SPEC, base_weights=str(legacy))(folder)
    for args in (["--model", TINY_SPEC, "--weights", str(legacy)], ["--model", str(folder)]):
        assert main(["predict", str(image), *args, "--quiet"]) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "contains pickled Python objects" in err[0] and "weights_only" not in err[0], err
    assert not (tmp_path / "ran").exists()
