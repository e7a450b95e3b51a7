"""Attention inside windows (Swin v1/v2): what one patch attends to, and what attends to it, in its window.

A Swin block cyclically shifts its stage's token grid by (sh, sw), pads it to whole windows, cuts it into
wh×ww windows (row-major, `window_partition`), attends inside each window, and undoes the shift. The captured
attention is (B·windows, heads, wh·ww, wh·ww). Slot i of window (wr, wc) holds shifted cell
(wr·wh + i // ww, wc·ww + i % ww), i.e. the stage cell ((r + sh) mod H, (c + sw) mod W); padding cells (r ≥ H or
c ≥ W) have no image patch and are left out. Each stage halves the grid; its maps are repeated up to the patch
grid (nearest), so every layer is drawn over the same image. Stages with fewer heads than the model's widest
are NaN for the missing heads.
"""

from __future__ import annotations

import numpy as np
import torch

from vitstudio.core.analysis.capture import TokenMaps, capturing, grid_for, resolve_layers
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import trunk_blocks


def stage_grid(block, stage: int, grid: tuple[int, int]) -> tuple[int, int]:
    """The token grid a Swin block works on: its recorded input resolution, else the patch grid halved per stage
    (patch merging rounds up)."""
    res = getattr(block, "input_resolution", None)
    if res is not None:
        return int(res[0]), int(res[1])
    h, w = grid
    for _ in range(stage):
        h, w = (h + 1) // 2, (w + 1) // 2
    return h, w


def _slot(cell: tuple[int, int], grid: tuple[int, int], window: tuple[int, int], shift: tuple[int, int]
          ) -> tuple[int, int, int, int]:
    """(window row, window col, slot in window, windows per row) of stage cell (r, c)."""
    (r, c), (h, w), (wh, ww), (sh, sw) = cell, grid, window, shift
    rs, cs = (r - sh) % h, (c - sw) % w
    per_row = -(-w // ww)
    return rs // wh, cs // ww, (rs % wh) * ww + cs % ww, per_row


def _place(values: torch.Tensor, window_rc: tuple[int, int], grid: tuple[int, int], window: tuple[int, int],
           shift: tuple[int, int]) -> torch.Tensor:
    """(heads, wh·ww) values over one window's slots -> (heads, H, W) on the stage grid (NaN outside the window)."""
    (wr, wc), (h, w), (wh, ww), (sh, sw) = window_rc, grid, window, shift
    out = torch.full((values.shape[0], h, w), float("nan"), dtype=torch.float32)
    for i in range(wh * ww):
        rs, cs = wr * wh + i // ww, wc * ww + i % ww
        if rs < h and cs < w:  # not a padding cell
            out[:, (rs + sh) % h, (cs + sw) % w] = values[:, i].float().cpu()
    return out


def _upsample(maps: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """(heads, h, w) -> (heads, gh, gw), repeating cells."""
    h, w = maps.shape[-2:]
    rows = torch.arange(grid[0]) * h // grid[0]
    cols = torch.arange(grid[1]) * w // grid[1]
    return maps[:, rows][:, :, cols]


def window_token_maps(loaded: LoadedModel, x: torch.Tensor, patch: tuple[int, int], layers=None):
    """TokenMaps for a windowed model: patch (row, col) of the patch grid, per layer and head, inside its window.
    Cells outside the patch's window are NaN (no attention there: it is not zero, it does not exist)."""
    model = loaded.model
    grid = grid_for(model, x)
    trunk = trunk_blocks(model)
    chosen = resolve_layers(model, layers)
    heads = loaded.num_heads
    batch = x.shape[0]
    rows = torch.full((batch, len(chosen), heads, *grid), float("nan"))
    cols = torch.full_like(rows, float("nan"))

    def reduce(layer, a):  # (B·windows, heads, n, n)
        t = trunk[layer]
        sgrid = stage_grid(t.block, t.stage, grid)
        window, shift = tuple(t.block.window_size), tuple(t.block.shift_size)
        cell = (patch[0] * sgrid[0] // grid[0], patch[1] * sgrid[1] // grid[1])
        wr, wc, slot, per_row = _slot(cell, sgrid, window, shift)
        windows = a.shape[0] // batch
        k = chosen.index(layer)
        for b in range(batch):
            w_idx = b * windows + wr * per_row + wc
            for target, values in ((rows, a[w_idx, :, slot, :]), (cols, a[w_idx, :, :, slot])):
                placed = _upsample(_place(values.detach(), (wr, wc), sgrid, window, shift), grid)
                target[b, k, :placed.shape[0]] = placed

    gh, gw = grid
    if not (0 <= patch[0] < gh and 0 <= patch[1] < gw):
        raise ValueError(f"Patch {patch} is outside the {gh}×{gw} grid.")
    with loaded.lock, capturing(model, chosen, reduce), torch.inference_mode(), loaded.autocast():
        model(x.to(loaded.device))
    return TokenMaps(tuple(chosen), rows.numpy().astype(np.float32), cols.numpy().astype(np.float32))
