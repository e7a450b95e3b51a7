"""What a concepts run takes: one schema (`train/schema.setting`) for the CLI's options and the panel's form."""

from __future__ import annotations

import math
from dataclasses import dataclass

from vitstudio.core.fields import Range
from vitstudio.core.train.schema import setting


@dataclass(frozen=True)
class ConceptSettings:
    layer: int | None = setting(None, label="Block", help="the block whose patch tokens the concepts read",
                                none_text="the one before the last", range=Range(0), advanced=False)
    size: int = setting(4096, label="Concepts", help="how many concepts (the SAE's width)", range=Range(2, 1 << 20),
                        advanced=False)
    k: int = setting(32, label="Active per patch", help="concepts active on each patch token (the TopK's k)",
                     range=Range(1, 1024), advanced=False)
    epochs: int = setting(10, label="Epochs", help="passes over the folder's tokens", range=Range(1, 10_000),
                          advanced=False)
    seed: int = setting(0, label="Seed", help="the same seed, folder and model give the same concepts",
                        range=Range(0, 2**32 - 1))  # as TrainConfig's seed: one range for every seed the user gives
    tokens_per_step: int = setting(4096, label="Tokens per step", help="patch tokens in one optimiser step",
                                   range=Range(16, 1 << 20))
    lr: float | None = setting(None, label="Learning rate", help="Adam's learning rate",
                               none_text="2e-4·√(16384 / concepts), at most 1e-3", range=Range(0, 1, lo_open=True),
                               decimals=5)
    # off by default: with the encoder started as the dictionary's transpose few concepts die, and on the digits the
    # loss cost 1.7x the time for no fewer dead concepts (tests/benchmarks/concepts.py)
    aux_k: int = setting(0, label="Dead-concept helpers", help="dead concepts asked to explain what the active "
                         "ones miss (Gao et al.'s auxiliary loss, e.g. 256; 0: off)", range=Range(0), none_text="off")
    batch_size: int = setting(32, label="Images per forward", help="images read per forward of the model while "
                              "collecting tokens", range=Range(1, 4096))

    def check(self) -> None:
        from vitstudio.core.train.schema import check_settings

        check_settings(self)
        if self.k > self.size:
            raise ValueError(f"k ({self.k} active per patch) must not exceed the number of concepts ({self.size}).")

    @property
    def learning_rate(self) -> float:
        """Gao et al.'s rule, 2e-4 at 16k latents scaled by 1/√(n / 16k), capped for small dictionaries."""
        return self.lr if self.lr is not None else min(1e-3, 2e-4 * math.sqrt(16384 / self.size))

    def as_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


TOKENS_PER_CONCEPT = 32  # below it the default 10 epochs fit poorly: on 250 demo digits (16,000 tokens) 4,096
# concepts ended at R² −2.6, 1,024 at 0.48, 256 (k 16) at 0.81; on 1,000 (64,000 tokens) 1,024 reached 0.97


def fitting_size(tokens: int) -> tuple[int, int]:
    """(concepts, k) a folder of `tokens` patch tokens fits in the default epochs: a power of two at most
    tokens / TOKENS_PER_CONCEPT, between 32 and the schema's 4,096, and k one sixteenth of it (4 to the schema's 32)."""
    size = 1 << min(12, max(5, (max(tokens, 1) // TOKENS_PER_CONCEPT).bit_length() - 1))
    return size, min(32, max(4, size // 16))
