"""A family model through a short fine-tuning run and back: shared by the per-family tests."""

from __future__ import annotations

import timm
import torch

from tests.core.generators import drain
from tests.core.synthetic_data import make_dataset
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import forward_logits
from vitstudio.core.models.loading import load_model
from vitstudio.core.train.engine import fine_tune
from vitstudio.core.train.recipes import make_config


def last_blocks_run(base_folder, base, tmp_path, img_size: int, photo) -> set[str]:
    """Fine-tune `base_folder` one epoch (last-blocks, drop path) on generated data; check the run folder loads in
    ViT Studio and in plain timm with the same logits on `photo`; return the names of the parameters it changed."""
    data = make_dataset(tmp_path / "data", per_class=4)
    config = make_config(str(data), str(base_folder), str(tmp_path / "run"), "last-blocks", epochs=1, batch_size=4,
                         drop_path=0.1, img_size=img_size)
    assert drain(fine_tune(config)).status == "finished"
    run = load_model(str(tmp_path / "run"))
    plain = timm.create_model(f"local-dir:{tmp_path / 'run'}", pretrained=True).eval()
    x = run.to_tensor(run.crop(read_image(photo)))[None]
    with torch.no_grad():
        torch.testing.assert_close(forward_logits(run, x), plain(x), atol=1e-5, rtol=0)
    original = dict(base.model.named_parameters())
    return {n for n, p in run.model.named_parameters() if not torch.equal(p, original[n])}
