"""The seam matrix's `teach` column (issue 51): `vitstudio teach` on a 3-class project of 4 images each, per family.
A family whose logits are one Linear on its pooled features is taught (the 15 % per-class split: 3 held out of 12,
the confusion matrix over them, per-class accuracy its diagonal share); the others (a distilled model's two heads,
DINOv2's class + mean head, Swin's pooling head, transformers heads) refuse in one line, `check_teachable`'s."""

from __future__ import annotations

import json

import numpy as np


def teach_cell(source, tmp_path, cli, assert_works_or_refuses, loaded) -> None:
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.teach.session import check_teachable

    data = make_dataset(tmp_path / "data", per_class=4)
    try:
        check_teachable(loaded)
        why = None
    except ValueError as exc:
        why = str(exc)
    code, out, err = cli(["teach", data, *source.model_args, "--json", "--quiet", "--device", "cpu", "--precision",
                          "fp32"])
    if not assert_works_or_refuses(code, out, err, may_refuse=why is not None):
        assert why[:60] in err, (why, err)
        return
    assert why is None, why
    figures = json.loads(out)
    confusion = np.asarray(figures["confusion"])
    assert figures["train"] == 9 and figures["val"] == 3 and confusion.sum() == 3
    assert figures["per_class_accuracy"] == {c: confusion[i, i] / confusion[i].sum()
                                             for i, c in enumerate(figures["classes"])}
