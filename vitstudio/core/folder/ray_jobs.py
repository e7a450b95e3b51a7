"""A folder pass on a Ray cluster (`--ray [ADDRESS]`): the same cache, the same outputs, the model pass spread over
machines with Ray Data.

The driver (the command's process) scans the folder and asks the cache which files it lacks, as in one process;
only those go out, as explicit paths in chunks (`from_items`: `read_images` resolves every path's metadata before
reading a byte, ray-project/ray#40686, and is slower than decoding in `map_batches`, #37499). A CPU stage decodes and
preprocesses them exactly as `inference.decoded_batches` does, into numpy (PIL objects in blocks are not counted by
Ray's memory accounting, #44577), with no torch in its workers where the model's transform has a plain form
(core/folder/ray_decode.py); the model stage runs in an actor pool (`ActorPoolStrategy`: one model per actor,
one GPU per actor where the cluster has GPUs, the batch size of the memory plan). Results stream back
(`iter_batches`) and the driver alone appends them to the cache, batch by batch, as rank 0 does under torchrun: an
interrupted job keeps what came back, and the same command again sends only what is missing.

The model reaches the workers as the driver resolved it: its weights in the object store (one copy per node) and
its structure on the meta device (no weights, a few KB), rebuilt on each actor, which checks the model's
fingerprint against the driver's before it computes anything. No worker ever resolves a model name itself.

Ray is an optional extra (`pip install 'vitstudio[cluster]'`): imported only when `--ray` is given.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from vitstudio.core.data.preprocess import PlainPreprocess
from vitstudio.core.folder.ray_cluster import INSTALL, ClusterInfo, RayJobError, active, connect, require_ray
from vitstudio.core.folder.ray_decode import decode_stage
from vitstudio.core.jobs import CancelToken
from vitstudio.core.models.model import LoadedModel

CHUNK = 50_000  # paths per dataset: the driver holds a chunk's items, never the whole folder's twice
RETRIES = 3  # a lost task is run again, a lost actor restarted (and its tasks retried), this many times


class ModelMismatch(RuntimeError):
    """An actor rebuilt a model whose fingerprint differs from the driver's."""


# -- what runs on the workers --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelPass:
    """`fn(loaded, x, **kwargs) -> tuple of (B, ...) arrays`, bound to a model: called as `compute(x)` in this
    process; on a cluster, `fn` and `kwargs` travel and each actor binds them to its rebuilt model."""

    fn: Callable
    loaded: LoadedModel
    kwargs: dict = field(default_factory=dict)

    def __call__(self, x: torch.Tensor) -> tuple:
        return tuple(self.fn(self.loaded, x, **self.kwargs))


@dataclass(frozen=True)
class ShippedModel:
    """What an actor rebuilds the driver's model from: the LoadedModel with its module on the meta device, the
    weights (an object reference to {name: array}) and the driver's fingerprint of the whole model."""

    skeleton: LoadedModel
    weights: object  # ray.ObjectRef
    fingerprint: str
    fingerprint_of: Callable[..., str]  # embedcache.model_fingerprint (whole=True), travelling by reference

    @classmethod
    def of(cls, ray, loaded: LoadedModel, fingerprint_of: Callable[..., str]) -> ShippedModel:
        model = loaded.model
        tensors = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        # the structure without its weights: every parameter and buffer swapped for a meta tensor while copying
        memo = {}
        for t in tensors.values():
            meta = torch.empty_like(t, device="meta")
            memo[id(t)] = nn.Parameter(meta, t.requires_grad) if isinstance(t, nn.Parameter) else meta
        skeleton = copy.deepcopy(model, memo)
        weights = {name: _portable(t) for name, t in tensors.items()}
        return cls(dataclasses.replace(loaded, model=skeleton, device=torch.device("cpu")), ray.put(weights),
                   fingerprint_of(loaded, whole=True), fingerprint_of)

    def rebuild(self, ray, device: torch.device) -> LoadedModel:
        weights = ray.get(self.weights)
        model = self.skeleton.model.to_empty(device=device)
        with torch.no_grad():
            for name, t in {**dict(model.named_parameters()), **dict(model.named_buffers())}.items():
                t.copy_(_tensor(weights[name]))
        model.eval()
        loaded = dataclasses.replace(self.skeleton, model=model, device=device)
        found = self.fingerprint_of(loaded, whole=True)
        if found != self.fingerprint:
            raise ModelMismatch(f"the model rebuilt on a worker (fingerprint {found}) is not the driver's "
                                f"({self.fingerprint})")
        return loaded


def _portable(t: torch.Tensor):
    """A numpy array (zero-copy in the object store) where numpy has the dtype; bfloat16 travels as its bits."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return ("bfloat16", t.view(torch.int16).numpy())
    return t.numpy()


def _tensor(value) -> torch.Tensor:
    if isinstance(value, tuple):
        return torch.from_numpy(np.array(value[1])).view(torch.bfloat16)
    return torch.from_numpy(np.array(value))


def plain_preprocess(loaded: LoadedModel) -> PlainPreprocess | None:
    """`loaded`'s eval transform as torch-free steps, when it is timm's usual one (resize, centre crop, to tensor,
    normalise; any of the first two may be absent); None for any other (its decode stage then needs the model)."""
    from timm.data.transforms import MaybeToTensor
    from torchvision import transforms
    from torchvision.transforms.functional import pil_modes_mapping

    pil_steps, tensor_steps = loaded._split_transform
    resize = crop = None
    steps = list(pil_steps)
    if steps and type(steps[0]) is transforms.Resize:
        resize = steps.pop(0)
    if steps and type(steps[0]) is transforms.CenterCrop:
        crop = steps.pop(0)
    kinds = [type(t) for t in tensor_steps]
    if steps or kinds not in ([transforms.ToTensor, transforms.Normalize], [MaybeToTensor, transforms.Normalize]):
        return None
    normalize = tensor_steps[1]
    size = resize.size if resize is not None else None
    return PlainPreprocess(
        resize=None if size is None else ((size,) if isinstance(size, int) else tuple(size)),
        max_size=resize.max_size if resize is not None else None,
        resample=int(pil_modes_mapping[resize.interpolation]) if resize is not None else 0,
        crop_hw=tuple(crop.size) if crop is not None else None,
        mean=tuple(float(v) for v in torch.as_tensor(normalize.mean, dtype=torch.float32)),
        std=tuple(float(v) for v in torch.as_tensor(normalize.std, dtype=torch.float32)),
        input_hw=tuple(loaded.input_hw))


class ModelStage:
    """An actor of the pool: rebuilds the driver's model once, then runs the pass on each batch of decoded images.
    Output columns: path, error, ok (the pass ran), out_0.. (the pass's arrays, zeros where not ok), also_*."""

    def __init__(self, shipped: ShippedModel, fn: Callable, kwargs: dict, threads: int) -> None:
        import ray

        gpu = bool(ray.get_gpu_ids()) and torch.cuda.is_available()
        if not gpu:
            torch.set_num_threads(max(1, threads))
        self.loaded = shipped.rebuild(ray, torch.device("cuda" if gpu else "cpu"))
        self.fn, self.kwargs = fn, kwargs
        probe = self._run(torch.zeros(1, 3, *self.loaded.input_hw))  # the output widths, for batches with no image
        self.blank = [np.zeros(a.shape[1:], a.dtype) for a in probe]

    def _run(self, x: torch.Tensor) -> list[np.ndarray]:
        return [np.asarray(a) for a in self.fn(self.loaded, x, **self.kwargs)]

    def __call__(self, batch: dict) -> dict:
        ok = np.asarray([not e for e in batch["error"]])
        out = {k: v for k, v in batch.items() if k != "image"}
        out["ok"] = ok
        arrays = self._run(torch.from_numpy(np.ascontiguousarray(batch["image"][ok]))) if ok.any() else None
        for j, blank in enumerate(self.blank):
            column = np.zeros((len(ok), *blank.shape), blank.dtype)
            if arrays is not None:
                column[ok] = arrays[j]
            out[f"out_{j}"] = column
        return out


# -- the driver ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Computed:
    """One batch back from the cluster: what `embedcache.fill` appends (as from one process's decoded batch)."""

    good: list[str]  # files the pass ran on
    arrays: tuple | None  # the pass's arrays for `good` (None when no file of the batch was readable)
    errors: dict[str, str]  # unreadable files, with the reason
    count: int  # files in the batch
    extra: dict[str, tuple]  # path -> the rider's value (files it asked for)


def computed(loaded: LoadedModel, todo: list, compute: ModelPass, batch_size: int | None,
             cancel: CancelToken | None, alongside, fingerprint_of: Callable[..., str]) -> Iterator[Computed]:
    """The pass `compute` over the files `todo` on the active cluster, batch by batch as results come back (in no
    particular order). A rider (`alongside`, e.g. `FingerprintRider`) is computed in the decode stage for the files
    it `wanted`. `fingerprint_of(loaded, whole=True)`: the model's identity, which every actor checks."""
    from vitstudio.core.inference import folder_batch_size

    ray = require_ray()
    cluster = active() or connect()
    if not isinstance(compute, ModelPass):
        raise TypeError("a folder pass on a cluster needs its compute as a ModelPass")
    shipped = ShippedModel.of(ray, loaded, fingerprint_of)
    prep = plain_preprocess(loaded) or shipped.skeleton  # the decode workers import torch only for the latter
    plan = _plan(cluster)
    wanted = getattr(alongside, "wanted", frozenset()) if alongside is not None else frozenset()
    also = getattr(alongside, "image_fn", None) if wanted else None
    batch = folder_batch_size(loaded, batch_size)
    for start in range(0, len(todo), CHUNK):
        names = [str(p) for p in todo[start:start + CHUNK]]
        # a block per model batch: a decode task per batch, and no more decode workers started than there are
        # batches (each one imports torch: seconds)
        items = ray.data.from_items([{"path": p, "also": p in wanted} for p in names],
                                    override_num_blocks=-(-len(names) // batch))
        with _retries_said() as retries:
            decoded = items.map_batches(decode_stage, fn_kwargs={"prep": prep, "also": also},
                                        batch_size=batch, batch_format="numpy", num_cpus=plan["decode_cpus"],
                                        compute=ray.data.TaskPoolStrategy(size=plan["decoders"]),
                                        **retries({"max_retries": RETRIES}))
            results = decoded.map_batches(
                ModelStage, fn_constructor_kwargs={"shipped": shipped, "fn": compute.fn, "kwargs": compute.kwargs,
                                                   "threads": plan["threads"]},
                compute=ray.data.ActorPoolStrategy(min_size=1, max_size=plan["actors"]), batch_size=batch,
                batch_format="numpy", num_cpus=plan["actor_cpus"], num_gpus=plan["gpus"],
                **retries({"max_restarts": RETRIES, "max_task_retries": RETRIES}))
        yield from _streamed(results, cancel)


@contextlib.contextmanager
def _retries_said():
    """Retries set explicitly (Ray Data's own default retries a failing task and restarts an actor without end) as
    `ray.remote` options, where this Ray's `map_batches` still takes them (deprecated in 2.5x, to go in 2.64;
    without them Ray Data's defaults apply)."""
    import inspect
    import warnings

    import ray.data

    takes = "ray_remote_args" in inspect.signature(ray.data.Dataset.map_batches).parameters
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
        yield lambda options: options if takes else {}


def _plan(cluster: ClusterInfo) -> dict:
    """Actors and resources: one actor per GPU where there are GPUs, decoding on as many tasks as the CPUs allow
    (a GPU's forward outruns a core's decoding). On CPUs alone an actor per two CPUs, reserving half a CPU each, and
    a decode task per node at a time with the other half (a node of 1 CPU holds one of each, so any one node left
    finishes the job); the actors' torch threads take all of a node's cores: a ViT's forward costs a CPU
    hundreds of times a decode (the demo model's, the cheapest, twice: 782 against 1,474 images/s on one core), and
    each decode task more than a node's one is a process importing torch for nothing."""
    if cluster.gpus >= 1:
        return {"actors": int(cluster.gpus), "gpus": 1, "actor_cpus": 1, "decode_cpus": 1, "decoders": None,
                "threads": 1}
    actors = max(1, int(cluster.cpus // 2))
    nodes = max(1, cluster.nodes)
    per_node = -(-actors // nodes)
    return {"actors": actors, "gpus": 0, "actor_cpus": 0.5, "decode_cpus": 0.5, "decoders": nodes,
            "threads": max(1, int(cluster.cpus / nodes // per_node))}


def _streamed(results, cancel: CancelToken | None) -> Iterator[Computed]:
    batches = results.iter_batches(batch_size=None, batch_format="numpy")
    seen: set[str] = set()  # the chunk's files back so far (at most CHUNK names)
    try:
        for batch in batches:
            if cancel is not None:
                cancel.raise_if_cancelled()
            yield _once(_unpacked(batch), seen)
    except Exception as exc:
        _explain(exc)
        raise
    finally:
        close = getattr(batches, "close", None)
        if close is not None:  # stops the execution: no more tasks started, the actors released
            close()


def _once(done: Computed, seen: set[str]) -> Computed:
    """`done` less the files an earlier batch brought back (a retried task delivering again): the cache never gets
    a file twice from one job."""
    again = seen.intersection(done.good).union(seen.intersection(done.errors))
    seen.update(done.good)
    seen.update(done.errors)
    if not again:
        return done
    keep = [i for i, p in enumerate(done.good) if p not in again]
    arrays = tuple(a[keep] for a in done.arrays) if keep and done.arrays is not None else None
    return Computed([done.good[i] for i in keep], arrays, {p: e for p, e in done.errors.items() if p not in again},
                    done.count - len(again), {p: v for p, v in done.extra.items() if p not in again})


def _unpacked(batch: dict) -> Computed:
    paths = [str(p) for p in batch["path"]]
    ok = np.asarray(batch["ok"], bool)
    outputs = sorted((k for k in batch if k.startswith("out_")), key=lambda k: int(k[4:]))
    riders = sorted((k for k in batch if k.startswith("also_")), key=lambda k: int(k[5:]))
    good = [p for p, k in zip(paths, ok) if k]
    arrays = tuple(np.ascontiguousarray(batch[k][ok]) for k in outputs) if good else None
    errors = {p: str(e) for p, e in zip(paths, batch["error"]) if e}
    extra = {p: tuple(batch[k][i] for k in riders) for i, p in enumerate(paths)
             if riders and batch["has_also"][i]}
    return Computed(good, arrays, errors, len(paths), extra)


def _explain(exc: BaseException) -> None:
    """Failures of the cluster's own (not of this process's code) as one line."""
    text = str(exc)
    if "ModuleNotFoundError" in text or "No module named" in text:
        missing = text.split("No module named", 1)[-1].split("\n", 1)[0].strip(" :'\"")
        raise RayJobError(f"a node of the Ray cluster cannot run the model: its Python lacks {missing or 'a module'}"
                          f" (install vitstudio on every node: {INSTALL})") from None
    if "ModelMismatch" in text:
        raise RayJobError("a node of the Ray cluster rebuilt another model than this one: "
                          f"{text.split('ModelMismatch:', 1)[-1].strip().splitlines()[0]}") from None
