"""The TopK sparse autoencoder (Gao et al. 2024, "Scaling and evaluating sparse autoencoders").

    z = TopK(ReLU(W_enc · x + b_enc))     (n,) at most k concepts active
    x̂ = z · D                              D: (n, d), unit rows (each concept's direction)

on tokens normalised as x = (token − mean) / scale, with scale such that E‖x‖² = d. The layout is overcomplete's
`TopKSAE` with its "linear" encoder (Fel et al.): the file's tensors are its `state_dict`, so
`TopKSAE(d, n, top_k=k, encoder_module="linear").load_state_dict(safetensors.torch.load_file(FILE))` loads it.
Written by hand rather than imported: overcomplete 0.3.0 requires opencv-python (its Qt plugins clash with
PySide6's) and its package `__init__` calls `matplotlib.cm.get_cmap`, removed in matplotlib 3.9.

The file (FILE.safetensors with FILE.json beside it) is read and written by `concepts_file.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

FORMAT = "vitstudio-concepts/1"
# overcomplete's TopKSAE(encoder_module="linear") state_dict names
ENC_W, ENC_B, DICT, MULT = ("encoder.final_block.0.weight", "encoder.final_block.0.bias", "dictionary._weights",
                            "dictionary.multiplier")


class TopKSAE(nn.Module):
    def __init__(self, width: int, size: int, k: int) -> None:
        super().__init__()
        if not 0 < k <= size:
            raise ValueError(f"k (active concepts per token) must be between 1 and the size {size}, not {k}.")
        self.width, self.size, self.k = width, size, k
        self.encoder = nn.Linear(width, size)
        self.dictionary = nn.Parameter(torch.randn(size, width))
        self.normalise_dictionary()

    @torch.no_grad()
    def normalise_dictionary(self) -> None:
        """Unit rows: a concept's activation is its share of the token along its direction."""
        self.dictionary.div_(self.dictionary.norm(dim=1, keepdim=True).clamp_min(1e-12))

    def pre_codes(self, x: torch.Tensor) -> torch.Tensor:
        """(…, n) ReLU(W_enc x + b_enc), before the top-k (the dead concepts' auxiliary loss reads them)."""
        return torch.relu(self.encoder(x))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(…, n) codes: the k largest pre-codes of each token, the rest 0."""
        pre = self.pre_codes(x)
        top = pre.topk(self.k, dim=-1)
        return torch.zeros_like(pre).scatter(-1, top.indices, top.values)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return z @ self.dictionary

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.encode(x)
        return z, self.decode(z)

    def state_for_file(self) -> dict[str, torch.Tensor]:
        return {ENC_W: self.encoder.weight.detach().contiguous(), ENC_B: self.encoder.bias.detach().contiguous(),
                DICT: self.dictionary.detach().contiguous(), MULT: torch.zeros(())}

    def load_from_file(self, tensors: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            self.encoder.weight.copy_(tensors[ENC_W])
            self.encoder.bias.copy_(tensors[ENC_B])
            self.dictionary.copy_(tensors[DICT] * torch.exp(tensors.get(MULT, torch.zeros(()))))


@dataclass(frozen=True)
class Normalisation:
    mean: np.ndarray  # (d,) float32
    scale: float  # the tokens' RMS distance from the mean, times 1/√d: E‖(t − mean)/scale‖² = d

    def apply(self, tokens: torch.Tensor) -> torch.Tensor:
        return (tokens - torch.as_tensor(self.mean, device=tokens.device, dtype=tokens.dtype)) / self.scale

    def undo(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale + torch.as_tensor(self.mean, device=x.device, dtype=x.dtype)


@dataclass
class Concepts:
    """A trained SAE with what it reads: the model (its name and fingerprint), the block, the normalisation."""

    sae: TopKSAE
    norm: Normalisation
    meta: dict  # model, fingerprint, layer, grid, data, settings, training
    stats: dict = field(default_factory=dict)  # stats.py: per concept frequency, images, top patches, classes

    @property
    def layer(self) -> int:
        return int(self.meta["layer"])

    @property
    def size(self) -> int:
        return self.sae.size

    def check_index(self, index: int) -> int:
        if not 0 <= int(index) < self.size:
            raise ValueError(f"Concept {index} does not exist: this file has concepts 0 to {self.size - 1}.")
        return int(index)

    @torch.no_grad()
    def codes(self, tokens: np.ndarray | torch.Tensor) -> np.ndarray:
        """(…, n) concept activations of raw tokens (…, d)."""
        t = torch.as_tensor(np.asarray(tokens, np.float32))
        return self.sae.encode(self.norm.apply(t)).numpy()
