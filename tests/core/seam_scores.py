"""The seam matrix's `scores` column (issue 50): `vitstudio scores` on a 3-class folder of 2 images each, per way a
family's logits reach the cache (a plain head on the pooled features, a distilled model's two heads kept as logits,
a `custom:` spec) and a headless model (no hardness or mistakenness: null); a folder named for no class of the
model has no mistakenness either (null, with its note). Hardness is checked against the entropy
of the source's own forward on the same preprocessed tensor; the other scores' formulas are test_scores.py's."""

from __future__ import annotations

import json

import numpy as np
import torch

SCORES_ROWS = ("vit", "deit-distilled", "custom", "hf-vit-headless")


def scores_cell(source, tmp_path, cli, assert_works_or_refuses, loaded) -> None:
    from tests.core.synthetic_data import COLOURS, make_dataset
    from vitstudio.core.data.images import read_image

    # two folders named for the model's first classes (a mistakenness each) and one it cannot know (none, and why)
    names = [*loaded.labels[:2], "red"] if source.reference is not None else list(COLOURS)
    data = make_dataset(tmp_path / "data", per_class=2, classes=dict(zip(names, COLOURS.values())))
    code, out, err = cli(["scores", data, *source.model_args, "--json", "--quiet", "--device", "cpu", "--precision",
                          "fp32"])
    assert assert_works_or_refuses(code, out, err, may_refuse=False)
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 6 and {r["given"] for r in rows} == {p.name for p in data.iterdir()}
    assert max(r["uniqueness"] for r in rows) == 1.0
    for row in rows:
        if source.reference is None:
            assert row["hardness"] is None and row["mistakenness"] is None
            continue
        x = loaded.to_tensor(loaded.crop(read_image(row["path"])))[None]
        p = torch.softmax(source.reference(x)[0].double(), -1).numpy()
        assert np.isclose(row["hardness"], -(p * np.log(p)).sum(), atol=1e-4), (row, p)
        if row["given"] in loaded.labels:
            assert 0.0 <= row["mistakenness"] <= 1.0
        else:
            assert row["mistakenness"] is None and "not among the model's classes" in row["mistakenness_note"]
    if source.reference is not None:
        assert sum(r["mistakenness"] is None for r in rows) == 2
