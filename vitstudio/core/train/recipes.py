"""Fine-tuning configuration and its presets."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

TRAIN_SCOPES = ("head", "head+pre_logits", "last-blocks", "all")
SPLIT_RULES = ("stratified", "upstream")


@dataclass
class TrainConfig:
    data_dir: str
    model: str  # anything load_model accepts; the head is replaced by one sized to the dataset
    out_dir: str  # models/<run-name>; never overwritten
    preset: str = "last-blocks"
    weights: str | None = None  # weights file for `model` when it is an architecture name
    scope: str = "last-blocks"  # which parameters train: see TRAIN_SCOPES
    last_blocks: int = 2
    epochs: int = 10
    batch_size: int = 32
    grad_accum: int = 1
    opt: str = "adamw"
    lr: float = 3e-4
    momentum: float = 0.9
    weight_decay: float = 0.05
    filter_bias_and_norm: bool = True  # no weight decay on biases and norms (timm's default)
    layer_decay: float | None = None  # timm param_groups_layer_decay; None or 0 = off
    warmup_epochs: float = 1.0
    min_lr_ratio: float = 0.01  # cosine decays to lr * this
    step_on_epochs: bool = False  # the seed recipe steps its cosine once per epoch
    label_smoothing: float = 0.0
    mixup: float = 0.0
    cutmix: float = 0.0
    drop_path: float = 0.0
    ema_decay: float = 0.0  # 0 = no EMA
    patience: int = 0  # early stopping after this many epochs without a better val accuracy; 0 = off
    precision: str = "auto"  # auto (bf16 on GPUs that support it, else fp32) / fp32 / bf16 / fp16 (GradScaler)
    device: str = "auto"
    seed: int = 0
    img_size: int | None = None  # None or 0: the base model's input size
    val_ratio: float = 0.2
    split_rule: str = "stratified"  # or "upstream": the seed train.py's read_split_data (random.sample, seed 0)
    reuse_head: bool = True  # start the new head from the base model's rows when every class name is among its labels
    hflip: float = 0.5
    scale: tuple[float, float] = (0.08, 1.0)  # RandomResizedCrop area range
    color_jitter: float = 0.0
    auto_augment: str | None = None  # timm's RandAugment spec, e.g. "rand-m9-mstd0.5-inc1"; None = off
    balance: bool = False  # class-balanced loss: each class weighs as much as the others, whatever its size
    mean: tuple[float, float, float] | None = None  # None: the base model's
    std: tuple[float, float, float] | None = None
    interpolation: str | None = None
    crop_pct: float | None = None
    workers: int = 0  # DataLoader worker processes (pil data path)
    data_path: str = "cached"  # "cached": decode once + augment on the device; "pil": timm's PIL DataLoader
    cache_memory_gb: float = 2.0  # a larger decoded cache is memory-mapped from ~/.cache/vitstudio/decoded
    channels_last: bool = False
    compile: bool = False  # torch.compile the model
    fused_optimizer: bool | None = None  # fused kernels on CUDA; None: on for AdamW/Adam on CUDA (torch's own)
    probe_image: str | None = None  # its rollout is snapshotted after every epoch
    exclude: tuple[str, ...] = ()  # files left out of training and validation (label review); the dataset untouched
    extra: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> TrainConfig:
        """The settings a train_config.json holds; a ValueError (one line) naming the first field that is
        missing, unknown or of the wrong type."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"it should hold a JSON object of settings, not a {type(data).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(map(repr, unknown))}")
        missing = [name for name, f in fields.items() if name not in data and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        if missing:
            raise ValueError(f"the setting(s) {', '.join(map(repr, missing))} are missing")
        for name, value in data.items():
            if not _has_type(value, fields[name].type):
                raise ValueError(f"{name!r} should be {fields[name].type}, not {json.dumps(value)[:60]}")
        for key in ("scale", "mean", "std", "exclude"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return cls(**data)

    def validate(self) -> None:
        if self.scope not in TRAIN_SCOPES:
            raise ValueError(f"Unknown training scope '{self.scope}'; use one of {', '.join(TRAIN_SCOPES)}.")
        for name in ("epochs", "batch_size", "grad_accum"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1.")
        if self.lr <= 0:
            raise ValueError("The learning rate must be positive.")
        lo, hi = self.scale
        if not 0.0 < lo <= hi <= 1.0:
            raise ValueError(f"The crop scale range must satisfy 0 < min <= max <= 1, not {lo}..{hi}.")
        if not 0.0 <= self.hflip <= 1.0 or not 0.0 <= self.color_jitter <= 1.0:
            raise ValueError("The flip probability and the colour jitter must be between 0 and 1.")
        if self.auto_augment and not self.auto_augment.startswith(("rand", "augmix", "trivial", "original", "v0")):
            raise ValueError(f"Unknown RandAugment spec '{self.auto_augment}'; timm's look like rand-m9-mstd0.5-inc1.")
        if self.split_rule not in SPLIT_RULES:
            raise ValueError(f"Unknown split rule '{self.split_rule}'; use one of {', '.join(SPLIT_RULES)}.")
        if (self.mixup or self.cutmix) and self.batch_size % 2:
            raise ValueError("Mixup/cutmix need an even batch size.")
        data, out = Path(self.data_dir).resolve(), Path(self.out_dir).resolve()
        if out == data or data in out.parents:
            raise ValueError("The output folder must not be inside the dataset folder: ViT Studio never writes there.")


def _has_type(value, annotation: str) -> bool:
    """Whether a JSON value fits a TrainConfig field's annotation (as written: "int", "float | None",
    "tuple[float, float]", "tuple[str, ...]", "dict")."""
    for option in annotation.split(" | "):
        if option == "None" and value is None:
            return True
        if option.startswith("tuple[") and isinstance(value, (list, tuple)):
            items = option[len("tuple["):-1].split(", ")
            if items[-1] == "...":
                if all(_has_type(v, items[0]) for v in value):
                    return True
            elif len(items) == len(value) and all(_has_type(v, t) for v, t in zip(value, items)):
                return True
        kinds = {"int": int, "float": (int, float), "str": str, "bool": bool, "dict": dict}.get(option)
        if kinds is not None and isinstance(value, kinds) and (option == "bool" or not isinstance(value, bool)):
            return True
    return False


PRESETS: dict[str, dict] = {
    # Augmentation defaults: the fewer parameters learn, the milder the crops (a frozen backbone cannot learn to
    # recognise a tiny random crop; on sklearn digits a linear probe reached 29 % with crops of 8-100 % of the image
    # plus flips, 67 % with 75-100 % and no flip). Flips stay on: most photo datasets are mirror-symmetric; turn
    # them off for text, digits and other oriented content.
    # only the new head learns: fast, robust on tiny datasets
    "linear-probe": dict(scope="head", opt="adamw", lr=1e-3, weight_decay=1e-4, epochs=10, warmup_epochs=0.0,
                         scale=(0.5, 1.0), hflip=0.5),
    # the head and the last blocks learn
    "last-blocks": dict(scope="last-blocks", last_blocks=2, opt="adamw", lr=3e-4, weight_decay=0.05, epochs=10,
                        scale=(0.25, 1.0), hflip=0.5),
    # everything learns, deeper layers faster (layer-wise lr decay), with the usual regularisers (DeiT-style crops)
    "full": dict(scope="all", opt="adamw", lr=1e-4, weight_decay=0.05, layer_decay=0.75, epochs=10,
                 label_smoothing=0.1, drop_path=0.1, scale=(0.08, 1.0), hflip=0.5),
    # ../shared/seeds/002 and upstream train.py: frozen backbone except head and pre_logits, plain momentum SGD
    # (timm's "momentum": nesterov off; timm's "sgd" is Nesterov) 1e-3, momentum 0.9, wd 5e-5 on every parameter,
    # cosine to lrf 0.01 stepped per epoch, 10 epochs, batch 8, RandomResizedCrop 224 + flip, mean = std = 0.5
    "seed": dict(scope="head+pre_logits", opt="momentum", lr=1e-3, momentum=0.9, weight_decay=5e-5,
                 filter_bias_and_norm=False, epochs=10, batch_size=8, warmup_epochs=0.0, min_lr_ratio=0.01,
                 step_on_epochs=True, img_size=224, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5),
                 interpolation="bilinear", crop_pct=224 / 256, hflip=0.5, scale=(0.08, 1.0)),
    # a new ViT trained from random weights (e.g. custom:...)
    "scratch": dict(scope="all", opt="adamw", lr=1e-3, weight_decay=0.05, epochs=50, batch_size=64,
                    warmup_epochs=3.0, label_smoothing=0.1, scale=(0.6, 1.0), hflip=0.0),
}


def make_config(data_dir: str, model: str, out_dir: str, preset: str = "last-blocks", **overrides) -> TrainConfig:
    if preset not in PRESETS:
        raise ValueError(f"Unknown preset '{preset}'; use one of {', '.join(PRESETS)}.")
    values = {**PRESETS[preset], **{k: v for k, v in overrides.items() if v is not None}}
    return TrainConfig(data_dir=str(data_dir), model=model, out_dir=str(out_dir), preset=preset, **values)
