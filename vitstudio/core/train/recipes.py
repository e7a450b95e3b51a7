"""Fine-tuning configuration and its presets."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from vitstudio.core.fields import DEVICES, PRECISIONS
from vitstudio.core.train.schema import (
    AUGMENTATION,
    DATA,
    OPTIMISER,
    PERFORMANCE,
    REGULARISATION,
    Range,
    check_settings,
    setting,
    settings_of,
)

HEAD_SCOPES = ("head", "head+pre_logits")  # the trunk frozen: its features can be computed once
TRAIN_SCOPES = (*HEAD_SCOPES, "last-blocks", "all", "lora", "dora")
ADAPTER_SCOPES = ("lora", "dora")  # the backbone frozen, low-rank adapters (peft) on its linears, the head in full
SPLIT_RULES = ("stratified", "upstream")


PRESETS: dict[str, dict] = {
    # Augmentation defaults: the fewer parameters learn, the milder the crops (a frozen backbone cannot learn to
    # recognise a tiny random crop; on sklearn digits a linear probe reached 29 % with crops of 8-100 % of the image
    # plus flips, 67 % with 75-100 % and no flip). Flips stay on: most photo datasets are mirror-symmetric; turn
    # them off for text, digits and other oriented content.
    # a new linear head fitted full batch (L-BFGS, one step = one pass over every feature) on the base model's
    # cached pooled features (core/train/quick.py): seconds, not minutes; no augmentation (features of the eval crop)
    "quick": dict(scope="head", data_path="features", opt="lbfgs", lr=1.0, weight_decay=1e-4, epochs=100,
                  batch_size=64, warmup_epochs=0.0, hflip=0.0),
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
    # peft's LoRA (Hu et al. 2021) on the blocks' attention qkv (timm hub adapters' target), the head in full; the
    # adapters start at zero, so the first step is the base model with its new head; adapters want a higher lr
    "lora": dict(scope="lora", opt="adamw", lr=1e-3, weight_decay=0.05, epochs=10, scale=(0.25, 1.0), hflip=0.5),
    # DoRA (Liu et al. 2024): LoRA's direction plus a learned magnitude per output channel
    "dora": dict(scope="dora", opt="adamw", lr=1e-3, weight_decay=0.05, epochs=10, scale=(0.25, 1.0), hflip=0.5),
    # a new ViT trained from random weights (e.g. custom:...)
    "scratch": dict(scope="all", opt="adamw", lr=1e-3, weight_decay=0.05, epochs=50, batch_size=64,
                    warmup_epochs=3.0, label_smoothing=0.1, scale=(0.6, 1.0), hflip=0.0),
}


# One line per preset, shown under the Training form's preset (and in its list): what learns and when to pick it.
PRESET_DESCRIPTIONS: dict[str, str] = {
    "quick": "A new head fitted in seconds on the model's cached features (backbone untouched, no augmentation): "
             "to try an idea or label as you go; the features are reused by the Folder tab and later runs.",
    "linear-probe": "Only the new head learns (backbone frozen): fastest; for small datasets close to the "
                    "model's pre-training images.",
    "last-blocks": "The head and the last 2 blocks learn: a good first try for most photo datasets.",
    "full": "Every layer learns (deeper ones faster, with regularisation): for larger datasets or images far "
            "from the model's pre-training.",
    "seed": "The original seed train.py recipe (SGD, head and pre-logits, batch 8, 224 px): to reproduce its "
            "results.",
    "lora": "Low-rank adapters (LoRA, peft) on the blocks' linears and the new head learn, the rest stays frozen: "
            "fine-tunes ViT-L/H on one consumer GPU; the run folder holds the merged model and the adapter.",
    "dora": "DoRA adapters (LoRA plus a learned magnitude per output, peft): often a little closer to full "
            "fine-tuning than LoRA at the same rank.",
    "scratch": "A new ViT trained from random weights (e.g. custom:...): needs many images and epochs.",
}


@dataclass
class TrainConfig:
    """Every setting of a fine-tuning run; each field's Setting (schema.py) gives its label, help, range or
    choices and flag, from which the CLI's options, the Training form and validate() are generated."""

    # field order is the order of train_config.json; the CLI's help and the form group them by section
    data_dir: str = setting(label="Dataset", help="dataset folder: one subfolder per class, or train/ + val/",
                            panel=True, advanced=False)
    model: str = setting(label="Base model", help="base model (any --model spec), e.g. "
                         "vit_small_patch16_224.augreg_in21k; its head is replaced by one sized to the dataset",
                         panel=True, advanced=False)
    out_dir: str = setting(label="Run folder", aliases=("--out",), panel=True, advanced=False,
                           help="new run folder (never overwritten; default: DATASET-PRESET-MMDD-HHMM in the "
                                "models folder)")
    preset: str = setting("last-blocks", label="Preset", choices=tuple(PRESETS), advanced=False,
                          help="starting recipe; the other settings override its values")
    weights: str | None = setting(None, label="Weights file", help="weights file for the model when it is an "
                                  "architecture name", none_text="the model's own")
    scope: str = setting("last-blocks", label="Trained parameters", choices=TRAIN_SCOPES, section=OPTIMISER,
                         help="which parameters train: the head, head and pre-logits, the last blocks, all, or "
                              "LoRA / DoRA adapters with the head (peft)")
    last_blocks: int = setting(2, label="Last blocks trained", range=Range(1, 1000), section=OPTIMISER,
                               help="number of final blocks trained with scope last-blocks")
    lora_r: int = setting(16, label="Adapter rank", range=Range(1, 4096), section=OPTIMISER,
                          help="rank r of each LoRA/DoRA adapter (scope lora or dora)")
    lora_alpha: float = setting(16.0, label="Adapter alpha", range=Range(0, 1e6, lo_open=True), decimals=2,
                                section=OPTIMISER, help="LoRA scaling alpha: the adapter's update is scaled by "
                                                        "alpha / r")
    lora_dropout: float = setting(0.1, label="Adapter dropout", range=Range(0, 1, hi_open=True), decimals=2,
                                  section=REGULARISATION, help="dropout on each adapter's input")
    lora_targets: tuple[str, ...] = setting(("qkv",), label="Adapter targets", parts=("NAME",), section=OPTIMISER,
                                            help="the blocks' linear layers that get adapters, by name: qkv, proj, "
                                                 "fc1, fc2 in timm ViTs")
    epochs: int = setting(10, label="Epochs", help="number of epochs", range=Range(1, 100_000), advanced=False,
                          section=OPTIMISER)
    batch_size: int = setting(32, label="Batch size", help="images per step", range=Range(1, 65_536),
                              advanced=False, section=OPTIMISER)
    grad_accum: int = setting(1, label="Gradient accumulation", range=Range(1, 4096), section=OPTIMISER,
                              help="steps whose gradients are accumulated per optimizer update")
    opt: str = setting("adamw", label="Optimizer", section=OPTIMISER,
                       suggestions=("adamw", "adam", "momentum", "sgd", "lamb", "lion"),
                       help="timm optimizer name: adamw, adam, momentum (plain SGD with momentum), sgd (Nesterov), "
                            "lamb, lion, ...")
    lr: float = setting(3e-4, label="Learning rate", help="peak learning rate", range=Range(0, 10, lo_open=True),
                        decimals=6, advanced=False, section=OPTIMISER)
    momentum: float = setting(0.9, label="Momentum", help="momentum of the SGD-family optimizers",
                              range=Range(0, 1), section=OPTIMISER)
    weight_decay: float = setting(0.05, label="Weight decay", help="weight decay", range=Range(0, 10), decimals=6,
                                  section=OPTIMISER)
    filter_bias_and_norm: bool = setting(True, label="No weight decay on biases and norms", section=OPTIMISER,
                                         help="exempt biases and norm weights from weight decay (timm's default)")
    layer_decay: float | None = setting(None, label="Layer-wise lr decay", range=Range(0, 1), none_text="off",
                                        section=OPTIMISER, help="layer-wise learning-rate decay (timm), e.g. 0.75")
    warmup_epochs: float = setting(1.0, label="Warmup epochs", help="linear warm-up length in epochs",
                                   range=Range(0, 100_000), decimals=2, section=OPTIMISER)
    min_lr_ratio: float = setting(0.01, label="Final lr ratio", range=Range(0, 1), decimals=4, section=OPTIMISER,
                                  help="the cosine schedule decays to lr times this")
    step_on_epochs: bool = setting(False, label="Step the schedule per epoch", section=OPTIMISER,
                                   help="step the cosine once per epoch (the seed recipe) instead of every update")
    label_smoothing: float = setting(0.0, label="Label smoothing", help="label smoothing",
                                     range=Range(0, 1, hi_open=True), section=REGULARISATION)
    mixup: float = setting(0.0, label="Mixup alpha", none_text="off", help="mixup alpha (0 = off)",
                           range=Range(0, 100), decimals=2, section=REGULARISATION)
    cutmix: float = setting(0.0, label="CutMix alpha", none_text="off", help="CutMix alpha (0 = off)",
                            range=Range(0, 100), decimals=2, section=REGULARISATION)
    drop_path: float = setting(0.0, label="Drop path", help="stochastic depth rate",
                               range=Range(0, 1, hi_open=True), section=REGULARISATION)
    ema_decay: float = setting(0.0, label="EMA decay", none_text="off", help="weight EMA decay (0 = off)",
                               range=Range(0, 1, hi_open=True), decimals=5, section=REGULARISATION)
    patience: int = setting(0, label="Early-stopping patience", none_text="off", range=Range(0, 100_000),
                            section=REGULARISATION,
                            help="stop after this many epochs without a better val accuracy (0 = never)")
    precision: str = setting("auto", label="Precision (AMP)", choices=PRECISIONS,
                             help="auto (bf16 on GPUs that support it, fp32 elsewhere), fp32, or bf16/fp16 autocast "
                                  "with mixed-precision training (fp16 with a GradScaler)")
    device: str = setting("auto", label="Device", help="auto (CUDA > MPS > CPU), cpu, cuda, cuda:N, mps",
                          suggestions=DEVICES)
    seed: int = setting(0, label="Seed", help="random seed (split, initialisation, augmentation)",
                        range=Range(0, 2**32 - 1), decimals=0)
    img_size: int | None = setting(None, label="Image size", help="training image size", range=Range(0, 4096),
                                   none_text="the model's", section=DATA)
    val_ratio: float = setting(0.2, label="Validation ratio", help="fraction of each class held out for validation",
                               range=Range(0, 1, lo_open=True, hi_open=True), decimals=2, section=DATA)
    split_rule: str = setting("stratified", label="Split rule", choices=SPLIT_RULES, section=DATA,
                              help="stratified, or upstream: the seed train.py's read_split_data (random.sample, "
                                   "seed 0, 4 suffixes)")
    reuse_head: bool = setting(True, label="Reuse matching head rows", section=DATA,
                               help="start the new head from the base model's rows when every class is named like "
                                    "one of its labels")
    text_head: bool = setting(True, label="Start the head from the class names", section=DATA,
                              help="CLIP-style base models: start the new head from the class names' text "
                                   "embeddings, so training begins at zero-shot accuracy (ignored for other models)")
    prompt: str | None = setting(None, label="Prompt template", none_text="the model's", section=DATA,
                                 suggestions=("a photo of a {}", "{}"),
                                 help="prompt for the class names when the head starts from text, e.g. 'a photo of "
                                      "a {}' ('{}': the raw names); default: the model's own templates, else "
                                      "OpenCLIP's 80 ImageNet ones")
    hflip: float = setting(0.5, label="Flip probability", range=Range(0, 1), decimals=2, section=AUGMENTATION,
                           help="horizontal flip probability (0 for text, digits, oriented data)")
    scale: tuple[float, float] = setting((0.08, 1.0), label="Crop scale range", parts=("min", "max"), ordered=True,
                                         range=Range(0, 1, lo_open=True), decimals=2, section=AUGMENTATION,
                                         help="random-resized-crop area range, e.g. 0.75 1 for mild crops "
                                              "(0.08 1 is timm's ImageNet)")
    color_jitter: float = setting(0.0, label="Colour jitter", none_text="off", range=Range(0, 1), decimals=2,
                                  section=AUGMENTATION, help="colour jitter strength, e.g. 0.4 (PIL data path)")
    auto_augment: str | None = setting(None, label="RandAugment (timm)", aliases=("--randaugment",),
                                       none_text="off", section=AUGMENTATION,
                                       suggestions=("rand-m9-mstd0.5-inc1",),
                                       help="timm's RandAugment spec, e.g. rand-m9-mstd0.5-inc1 (PIL data path)")
    balance: bool = setting(False, label="Balance classes", section=REGULARISATION,
                            help="class-balanced loss: every class weighs as much as the others, whatever its size")
    mean: tuple[float, float, float] | None = setting(None, label="Normalisation mean", parts=("R", "G", "B"),
                                                      range=Range(0, 1), decimals=4, none_text="the model's",
                                                      section=DATA, help="per-channel mean of the input")
    std: tuple[float, float, float] | None = setting(None, label="Normalisation std", parts=("R", "G", "B"),
                                                     range=Range(0, 10, lo_open=True), decimals=4,
                                                     none_text="the model's", section=DATA,
                                                     help="per-channel standard deviation of the input")
    interpolation: str | None = setting(None, label="Interpolation", none_text="the model's", section=DATA,
                                        choices=("bicubic", "bilinear", "nearest", "lanczos", "box", "hamming"),
                                        help="resize interpolation")
    crop_pct: float | None = setting(None, label="Centre-crop fraction", range=Range(0, 2, lo_open=True),
                                     none_text="the model's", section=DATA,
                                     help="validation centre crop: the image is resized to size / crop_pct first")
    workers: int = setting(0, label="DataLoader workers", help="DataLoader worker processes (pil data path)",
                           range=Range(0, 256), section=PERFORMANCE)
    data_path: str = setting("cached", label="Data path", choices=("cached", "pil", "features"), section=PERFORMANCE,
                             help="cached: decode once, augment on the device; pil: timm's PIL DataLoader; features "
                                  "(the quick preset): only a new head, fitted on the model's cached pooled features")
    cache_memory_gb: float = setting(2.0, label="Decoded cache in memory (GB)", range=Range(0, 4096), decimals=1,
                                     section=PERFORMANCE, help="a larger decoded cache is memory-mapped from "
                                                               "the app's cache folder")
    channels_last: bool = setting(False, label="Channels-last", section=PERFORMANCE,
                                  help="channels-last memory format for the model")
    grad_checkpointing: bool = setting(False, label="Gradient checkpointing", section=PERFORMANCE,
                                       help="recompute each block's activations in the backward pass instead of "
                                            "keeping them (timm's set_grad_checkpointing): much less memory for about "
                                            "one more forward pass of time")
    compile: bool = setting(False, label="torch.compile", help="torch.compile the model", section=PERFORMANCE)
    fused_optimizer: bool | None = setting(None, label="Fused optimizer", none_text="auto", section=PERFORMANCE,
                                           help="fused optimizer kernels on CUDA (auto: on for AdamW and Adam)")
    probe_image: str | None = setting(None, label="Probe image", aliases=("--probe",), panel=True,
                                      help="image whose attention rollout is snapshotted after every epoch",
                                      none_text="the first validation image")
    exclude: tuple[str, ...] = setting((), label="Excluded images", panel=True, parts=("PATH",),
                                       help="image paths left out of training and validation (e.g. the doubtful "
                                            "labels of the label review); the dataset itself is not touched")
    extra: dict = field(default_factory=dict)  # free-form, outside the schema

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
        for s in settings_of(cls):
            if s.length and data.get(s.name) is not None:
                data[s.name] = tuple(data[s.name])
        return cls(**data)

    def validate(self) -> None:
        """Every field within the range or choices its Setting gives (one message per field, the same in the CLI
        and the GUI), then the rules that tie fields together."""
        check_settings(self)
        if self.auto_augment and not self.auto_augment.startswith(("rand", "augmix", "trivial", "original", "v0")):
            raise ValueError(f"Unknown RandAugment spec '{self.auto_augment}'; timm's look like rand-m9-mstd0.5-inc1.")
        if (self.mixup or self.cutmix) and self.batch_size % 2:
            raise ValueError("Mixup/cutmix need an even batch size.")
        if self.prompt is not None and self.prompt.count("{}") != 1:
            raise ValueError(f"The prompt template must contain {{}} exactly once (where the class name goes), not "
                             f"'{self.prompt}'.")
        if self.data_path == "features":
            _check_features_path(self)
        if self.scope in ADAPTER_SCOPES:
            _check_adapter_run(self)
        data, out = Path(self.data_dir).resolve(), Path(self.out_dir).resolve()
        if out == data or data in out.parents:
            raise ValueError("The output folder must not be inside the dataset folder: ViT Studio never writes there.")


def _check_features_path(config: TrainConfig) -> None:
    """The features data path trains a head on fixed features: nothing else can learn, nothing augments them."""
    from vitstudio.core.train.head_fit import HEAD_OPTIMISERS

    if config.scope != "head":
        raise ValueError("The features data path (quick preset) trains the head only: set the scope to head, or "
                         "use another data path.")
    if config.opt not in HEAD_OPTIMISERS:
        raise ValueError(f"The features data path (quick preset) fits the head with {', '.join(HEAD_OPTIMISERS)}, "
                         f"not '{config.opt}'.")
    if config.mixup or config.cutmix or config.label_smoothing or config.ema_decay:
        raise ValueError("The features data path (quick preset) has no mixup, cutmix, label smoothing or EMA.")


def _check_adapter_run(config: TrainConfig) -> None:
    import importlib.util

    if importlib.util.find_spec("peft") is None:
        raise ValueError(f"The {config.scope} scope needs peft: pip install 'vitstudio[lora]' (or pip install peft).")
    if not any(t.strip() for item in config.lora_targets for t in item.split(",")):
        raise ValueError("An adapter run needs at least one adapter target (--lora-targets), e.g. qkv.")


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


def make_config(data_dir: str, model: str, out_dir: str, preset: str = "last-blocks", **overrides) -> TrainConfig:
    if preset not in PRESETS:
        raise ValueError(f"Unknown preset '{preset}'; use one of {', '.join(PRESETS)}.")
    values = {**PRESETS[preset], **{k: v for k, v in overrides.items() if v is not None}}
    return TrainConfig(data_dir=str(data_dir), model=model, out_dir=str(out_dir), preset=preset, **values)
