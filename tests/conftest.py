"""Shared fixtures: tiny random ViTs saved to disk, real photos from scikit-image, isolated caches."""

from __future__ import annotations

import os

# One torch thread per test process: the suite's models are tiny, and on a shared 2-core machine torch's two threads
# made a tiny forward ~6x slower (measured in the seam matrix); `make test` runs several processes side by side instead
# (pytest-xdist). Subprocesses started by tests inherit it through OMP_NUM_THREADS. Set before numpy loads: OpenBLAS
# reads it once, at load (a 32×768 SVD took 20x the CPU with its two threads on a loaded machine).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=5)
TINY_SPEC = "custom:img=32,patch=8,width=32,depth=2,heads=2,classes=5"


class imported_on_use:  # noqa: N801 (stands in for a module)
    """A module imported at its first attribute access: a test file's heavy import costs only the process that runs
    its tests, not each one that collects the file. (Not the standard library's LazyLoader: pytest's collection
    probes every name of a test module, `__test__` among them, which would import it at once.)"""

    __test__ = False

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        import importlib

        if attr.startswith("_"):  # pytest's probes (fixture markers and the like), never a test's use
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)


def make_tiny_vit(seed: int = 0, **overrides):
    """A random tiny timm ViT with non-trivial cls/pos embeddings (timm zero-inits some of them).

    Built the way TINY_SPEC is (timm's vit_base_patch16_224 entry point with the tiny sizes), so timm's
    own data config for it is the reference preprocessing.
    """
    import timm
    import torch

    torch.manual_seed(seed)
    model = timm.create_model("vit_base_patch16_224", pretrained=False, **{**TINY, **overrides}).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return model


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path_factory, monkeypatch):
    """Never touch the user's HF cache, models folder, ViT Studio data or cache folder, or anything under HOME
    that the platform's folders (XDG) name; always offline."""
    from huggingface_hub import constants

    hf = tmp_path_factory.mktemp("hf_cache")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("VITSTUDIO_MODELS_DIR", str(tmp_path_factory.mktemp("models")))
    monkeypatch.setenv("VITSTUDIO_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))  # decoded images, embeddings
    monkeypatch.setenv("VITSTUDIO_DATA_DIR", str(tmp_path_factory.mktemp("data")))  # settings, journals, crash log
    for xdg in ("XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):  # whatever asks the platform: tmp too (one
        folder = tmp_path_factory.getbasetemp() / xdg.lower()  # per session: font caches are built once, not per test)
        folder.mkdir(exist_ok=True)
        monkeypatch.setenv(xdg, str(folder))
    yield


@pytest.fixture(scope="session")
def photos(tmp_path_factory) -> dict[str, Path]:
    """Real photos from scikit-image, written as JPEG/PNG files."""
    from skimage import data

    folder = tmp_path_factory.mktemp("photos")
    out = {}
    for name, fmt in (("astronaut", "jpg"), ("chelsea", "png"), ("coffee", "jpg"), ("rocket", "jpg")):
        path = folder / f"{name}.{fmt}"
        Image.fromarray(getattr(data, name)()).save(path)
        out[name] = path
    return out


@pytest.fixture
def tiny_weights(tmp_path) -> tuple[Path, object]:
    """(safetensors file, the model it came from) for TINY."""
    from safetensors.torch import save_file

    model = make_tiny_vit()
    path = tmp_path / "tiny.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return path, model


@pytest.fixture
def rgb_image() -> Image.Image:
    from skimage import data

    return Image.fromarray(data.chelsea())


def as_uint8(img: Image.Image) -> np.ndarray:
    return np.asarray(img, dtype=np.uint8)


@pytest.fixture(scope="session")
def forked_cli():
    """`vitstudio ARGS` in a process of its own, forked from a warm one (tests/core/forked_cli.py)."""
    from tests.core.forked_cli import ForkedCli

    cli = ForkedCli()
    yield cli
    cli.close()


# The longest test files first (from `--durations`): under `make test` each process takes a whole file at a time,
# so a long file collected last would run alone at the end while the other processes idle. Files not listed keep
# their order after these; the order of tests inside a file never changes.
LONGEST_FIRST = (  # the files' summed test times in a fresh clone's `make test`, longest first (2026-12-06)
    "tests/core/test_seam_matrix.py",  # ~45 s, and its training half ~40 s (81 s as one file)
    "tests/core/test_seam_matrix_runs.py",
    "tests/gui/test_view_seams.py",  # 34 s
    "tests/core/test_run_survival.py",  # 29 s
    "tests/gui/test_soak.py",  # ~26 s: a quarter of a minute of the real window (40 s for half a minute)
    "tests/gui/test_training_panel.py",  # 25 s
    "tests/core/test_fast_data.py",  # 22 s: torchrun trainings
    "tests/gui/test_app_starts.py",  # ~15 s: one main.py start (38 s for three)
    "tests/core/test_full_disk.py",
    "tests/core/test_finetune_sources.py",
    "tests/core/test_hostile_inputs.py",
    "tests/core/test_memory_plan.py",
    "tests/core/test_folder_cache.py",
    "tests/gui/test_shortcuts.py",
    "tests/gui/test_folder_layout.py",
    "tests/core/test_ood.py",
    "tests/core/test_folder.py",  # torchrun predict and embed
    "tests/gui/test_main_window.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    root = Path(__file__).resolve().parents[1]
    items.sort(key=lambda item: rank.get(Path(item.fspath).resolve().relative_to(root).as_posix(), len(rank)))


def pytest_collection_finish(session):
    """Freeze what lives until exit, as the app does before its window (vitstudio/gui/workers.py: freeze_long_lived):
    the test modules and what the window imports (torch, timm, Qt, pyqtgraph: ~450k objects; imported here, not in
    the first window test), so the full collections of each window teardown and lifetime check take milliseconds
    instead of ~0.3 s. Objects made by the tests are collected as before."""
    import gc

    import torch

    from vitstudio.gui.main_window import panel_classes

    torch.set_num_threads(1)  # here, not at import: xdist's controlling process loads this file too, and runs no test

    panel_classes()  # the window module imports no torch (its frame shows first): the panels' modules do
    gc.collect()
    gc.freeze()
