"""A tiny random ViT with a planted register neuron (Jiang et al. 2025's mechanism, built by hand) and images for it.

The patch embedding writes "how red the patch is" into channel 0; neuron NEURON of block LAYER's MLP reads channel 0 of
its normed input (fires only where a patch is red: a bias keeps it off elsewhere) and its output column is large, so
the red patches leave that block with a norm ~100× the others' (the high-norm artifacts); in the blocks after it, head
0's keys read that direction and every query has a constant part along it, so the class token attends to those
patches (the artifacts' attention sink). `plant=False` builds the same model without the neuron's weights changed.
"""

from __future__ import annotations

import numpy as np
import timm
import torch
from PIL import Image

DEPTH, WIDTH, LAYER, NEURON = 4, 32, 1, 7
RED = ((0, 1), (2, 3))  # the red patches (row, col) of every image of `red_images`


def planted_vit(plant: bool = True, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = timm.create_model("vit_base_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=WIDTH,
                              depth=DEPTH, num_heads=2, num_classes=5).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g))
        w = model.patch_embed.proj.weight  # (C, 3, 8, 8); pixels normalised to [-1, 1]
        w[0] = 0
        w[0, 0], w[0, 1], w[0, 2] = 0.05, -0.025, -0.025  # channel 0 = 6.4 on a pure red patch, ~0 on grey ones
        model.patch_embed.proj.bias[0] = 0
        v = torch.zeros(WIDTH)
        v[1:] = torch.randn(WIDTH - 1, generator=g)
        v /= v.norm()  # what the neuron writes: orthogonal to the channel it reads
        if plant:
            mlp = model.blocks[LAYER].mlp
            mlp.fc1.weight[NEURON] = 0
            mlp.fc1.weight[NEURON, 0] = 4.0
            mlp.fc1.bias[NEURON] = -10.0
            mlp.fc2.weight[:, NEURON] = 40.0 * v
        centred = (v - v.mean()) / (v - v.mean()).norm()
        for block in model.blocks[LAYER + 1:]:
            qkv = block.attn.qkv
            qkv.weight[WIDTH] += 3.0 * centred  # head 0's first key dimension reads the written direction
            qkv.bias[0] += 3.0  # and every query of head 0 has a constant part along it
    return model


def red_images(folder, count: int = 6, red: bool = True, seed: int = 0) -> list:
    """`count` 32×32 grey-noise PNGs; with `red`, the patches RED are pure red."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        a = np.clip(128 + rng.normal(0, 30, (32, 32, 1)), 0, 255).repeat(3, -1).astype(np.uint8)
        if red:
            for r, c in RED:
                a[r * 8:(r + 1) * 8, c * 8:(c + 1) * 8] = (255, 0, 0)
        path = folder / f"img{i}.png"
        Image.fromarray(a).save(path)
        paths.append(path)
    return paths
