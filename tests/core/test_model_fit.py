"""Does the model fit the folder? The folder commands (embed, sort, audit, scores) say so in the window's words: the
banner's sentence when most images are unlike the model's training data, and the line naming the class folders
that are not the model's classes, from one core function (core/folder/model_fit.py over core/models/fit_words.py)."""

from __future__ import annotations

import json

import numpy as np

from tests.conftest import TINY_SPEC
from tests.core.synthetic_data import COLOURS, make_dataset
from vitstudio.cli import main
from vitstudio.core.models import ood
from vitstudio.core.models.fit_words import not_its_classes, unlike_sentence

LABELS = tuple(f"class {i}" for i in range(5))  # TINY_SPEC's classes


def _bank(weights, threshold: float) -> None:
    """A bank that separates outside images (AUROC 0.99): threshold 0 flags every image, 10 none."""
    features = np.random.default_rng(0).normal(size=(20, 32)).astype(np.float16)
    ood.save_bank(weights.parent, ood.OODBank(features, threshold, 1, "noise", {"noise": 0.99, "flat": 0.99}))


def _run(capsys, args: list[str]) -> tuple[int, str, list[str]]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, [line[len("warning: "):] for line in out.err.splitlines() if line.startswith("warning: ")]


def _commands(data, weights, tmp_path) -> dict[str, list[str]]:
    model = ["--model", TINY_SPEC, "--weights", str(weights), "--quiet"]
    return {"embed": ["embed", str(data), *model], "sort": ["sort", str(data), "--out", str(tmp_path / "sorted"),
                                                            "--dry-run", *model],
            "audit": ["audit", str(data), "--json", *model], "scores": ["scores", str(data), "--json", *model]}


def test_every_folder_command_says_when_the_model_does_not_fit(tmp_path, tiny_weights, capsys):
    """Ants and bees through the digits model: predict flagged them, sort --dry-run would have filed them into digit
    folders, audit estimated wrong labels and scores/embed said nothing. Every image flagged and class folders that
    are not the model's classes: each command prints the banner's sentence (6 of 6) and embed, sort and audit the
    folders' line (scores says it in its mistakenness note), audit's JSON carries both in "model_fit" and every
    scores row the sentence; the same folder under the model's class names with nothing flagged: no warning, no
    field."""
    data = make_dataset(tmp_path / "data", per_class=2)
    weights = tiny_weights[0]
    _bank(weights, 0.0)
    unlike = unlike_sentence(6, 6, "noise")
    mismatch = not_its_classes(", ".join(sorted(COLOURS)), ood.name_classes(LABELS), every=True)
    for command, args in _commands(data, weights, tmp_path).items():
        code, out, warnings = _run(capsys, args)
        assert code == 0, command
        assert warnings == ([unlike] if command == "scores" else [unlike, mismatch]), (command, warnings)
        if command == "audit":
            fit = json.loads(out)["model_fit"]
            assert fit["warnings"] == [unlike, mismatch] and fit["images_unlike"] == fit["images_scored"] == 6
            assert fit["most_unlike"] and fit["folders_not_classes"] == sorted(COLOURS)
        if command == "scores":
            assert all(json.loads(line)["model_fit"] == unlike for line in out.splitlines())
    for colour, label in zip(sorted(COLOURS), LABELS):
        (data / colour).rename(data / label)
    _bank(weights, 10.0)
    for command, args in _commands(data, weights, tmp_path).items():
        code, out, warnings = _run(capsys, args)
        assert code == 0 and warnings == [], (command, warnings)
        if command == "audit":
            assert json.loads(out)["model_fit"]["warnings"] == []
        if command == "scores":
            assert not any("model_fit" in json.loads(line) for line in out.splitlines())
