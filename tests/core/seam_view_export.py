"""The seam matrix's `view-export` column (issue 50 item 6): `vitstudio views FOLDER --export V --csv F --coco J --masks
P` on the dense column's two photos (one painted), the view holding one of them, per kind of model: a plain head
(its prediction and confidence in the CSV are the source's own forward), a headless model (no prediction: empty
cells; its masks still exported) and a family without one token grid (Swin: refused in one line with the concepts'
reason, nothing written). The masks' classes, decoded here, cover exactly the crop the model sees; that they are
`vitstudio segment`'s masks is test_selection_export.py's."""

from __future__ import annotations

import csv
import json

import numpy as np

from tests.core.seam_dense import _folder
from tests.core.test_selection_export import rle_decode
from vitstudio.core.concepts.tokens import concept_layers_refusal
from vitstudio.core.data.images import read_image
from vitstudio.core.folder import views

VIEW_EXPORT_ROWS = ("vit", "hf-vit-headless", "swin")


def view_export_cell(source, photo, tmp_path, cli, assert_works_or_refuses, loaded) -> None:
    folder, painted, _mask = _folder(photo.parent, tmp_path)
    views.save_view(folder, "coffee", [{"field": "path", "op": "glob", "value": "coffee*"}])
    table, coco = tmp_path / "coffee.csv", tmp_path / "coffee.json"
    code, out, err = cli(["views", folder, "--export", "coffee", "--csv", table, "--coco", coco, "--masks", painted,
                          *source.model_args, "--device", "cpu", "--precision", "fp32"])
    refusal = concept_layers_refusal(loaded.model)
    if not assert_works_or_refuses(code, out, err, may_refuse=refusal is not None):
        assert refusal[:40] in err and not table.exists() and not coco.exists()
        return
    doc = json.loads(coco.read_text())
    (image,) = doc["images"]
    assert image["file_name"] == "coffee.jpg" and [c["name"] for c in doc["categories"]] == ["background", "object"]
    covered = np.zeros((image["height"], image["width"]), np.int64)
    for a in doc["annotations"]:
        covered += rle_decode(a["segmentation"])
    top, left, h, w = loaded.crop_box(covered.shape)
    inside = np.zeros_like(covered)
    inside[top:top + h, left:left + w] = 1
    assert (covered == inside).all()  # one class per pixel of the crop, none outside it
    with open(table, encoding="utf-8-sig", newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["path"] == str(folder / "coffee.jpg") and row["file"] == "coffee.jpg"
    if source.reference is None:
        assert row["predicted"] == row["confidence"] == row["correct"] == ""
        return
    x = loaded.to_tensor(loaded.crop(read_image(folder / "coffee.jpg")))[None]
    p = source.reference(x)[0].softmax(-1)
    assert row["predicted"] == loaded.labels[int(p.argmax())]
    assert abs(float(row["confidence"]) - float(p.max())) < 1e-5
