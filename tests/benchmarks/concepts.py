"""Concepts (issue 32): how fast tokens are collected and the SAE trained, how good it is beside the reference
library's own training on the same tokens, memory against the folder's size, and the planted mark on the demo model.

    python tests/benchmarks/concepts.py [--device cpu|cuda] [--photos 400] [--skip-photos] [--skip-planted]

Stages:
  digits   the 1,797 digits through the bundled demo model (block 2): tokens/s to collect (beside the bare model's
           forward over the same decoded batches) and to train; time to a usable SAE; R², L0 and dead concepts beside
           overcomplete's TopKSAE + train_sae on the same normalised tokens, same size, k, epochs and batch (when
           installed: make installs it); the peak memory of training on a quarter of the folder and on all of it
  photos   N photo tiles (skimage, LFW) through a ViT-S/16 (random weights: offline; times only)
  planted  the demo-sized planted test: digits with a one-patch magenta mark on half, the demo model fine-tuned to
           tell them apart, concepts learned: AUROC, IoU with the mark, the margin with the concept switched off
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.core.generators import drain  # noqa: E402 (the repository root is on the path first)


class PeakRSS:
    """The process's resident memory sampled every 20 ms while the block runs: (peak − start) in MB."""

    def __enter__(self):
        try:
            import psutil
        except ImportError:  # a bare GPU machine: no memory figure
            self.mb, self.running, self.thread = float("nan"), False, threading.Thread(target=lambda: None)
            self.thread.start()
            return self
        self.process, self.start, self.peak, self.running = psutil.Process(), 0, 0, True
        self.start = self.peak = self.process.memory_info().rss
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.02)

    def __exit__(self, *exc):
        was = self.running
        self.running = False
        self.thread.join()
        if was:
            self.mb = (self.peak - self.start) / 2**20


def collect(loaded, folder, layer, batch=64):
    from vitstudio.core.concepts.tokens import collect_tokens
    from vitstudio.core.inference import decoded_batches

    t0 = time.perf_counter()
    tokens = drain(collect_tokens(loaded, [str(folder)], layer, batch))
    ours = time.perf_counter() - t0
    t0 = time.perf_counter()  # the reference: the bare forward over the same decoded batches (files cached by now)
    with torch.inference_mode():
        for b in decoded_batches(loaded, [str(folder)], batch):
            if b.tensor is not None:
                loaded.model.forward_features(b.tensor.to(loaded.device))
    bare = time.perf_counter() - t0
    n = len(tokens.paths) * tokens.patches
    print(f"  collect: {len(tokens.paths)} images, {n} tokens of block {layer} in {ours:.2f} s ({n / ours:,.0f} "
          f"tokens/s); bare forward over the same batches {bare:.2f} s; ratio {ours / bare:.2f}×")
    return tokens


def overcomplete_reference(tokens, norm, settings, device):
    spec = importlib.util.find_spec("overcomplete")
    if spec is None:
        print("  overcomplete: not installed (make installs it without its dependencies)")
        return None
    package = types.ModuleType("overcomplete")  # its package __init__ needs matplotlib < 3.9 (see core/concepts/sae)
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules.setdefault("overcomplete", package)
    from overcomplete.sae import TopKSAE, train_sae

    x = norm.apply(torch.from_numpy(tokens.of_images(np.arange(len(tokens.paths))).reshape(-1, tokens.width)))
    torch.manual_seed(settings.seed)
    sae = TopKSAE(tokens.width, settings.size, top_k=settings.k, encoder_module="linear", device=device)
    loader = torch.utils.data.DataLoader(x, batch_size=settings.tokens_per_step, shuffle=True)
    opt = torch.optim.Adam(sae.parameters(), lr=settings.learning_rate)

    def mse(x, x_hat, *_rest):
        return ((x - x_hat) ** 2).sum(-1).mean()

    t0 = time.perf_counter()
    train_sae(sae, loader, mse, opt, nb_epochs=settings.epochs, monitoring=0, device=device)
    seconds = time.perf_counter() - t0
    sae.eval()
    with torch.no_grad():
        _, z, x_hat = sae(x.to(device))
    r2 = 1 - float(((x.to(device) - x_hat) ** 2).sum() / (x ** 2).sum())
    l0 = float((z > 0).sum(-1).float().mean())
    dead = int(((z > 0).sum(0) == 0).sum())
    return seconds, r2, l0, dead


def evaluate(sae, norm, tokens):
    x = norm.apply(torch.from_numpy(tokens.of_images(np.arange(len(tokens.paths))).reshape(-1, tokens.width)))
    with torch.no_grad():
        z, x_hat = sae(x)
    return 1 - float(((x - x_hat) ** 2).sum() / (x ** 2).sum()), float((z > 0).sum(-1).float().mean()), \
        int(((z > 0).sum(0) == 0).sum())


DEVICE = "cpu"


def train(tokens, settings, out):
    from vitstudio.core.concepts.training import train_sae

    t0 = time.perf_counter()
    result = drain(train_sae(tokens, settings, out, device=DEVICE))
    return result, time.perf_counter() - t0


def digits_stage(args, tmp):
    from vitstudio.core.concepts.settings import ConceptSettings
    from vitstudio.core.concepts.tokens import default_layer
    from vitstudio.core.models.demo import bundled_demo, render_digits
    from vitstudio.core.models.loading import load_model

    print("digits (1,797) through the demo model")
    loaded = load_model(str(bundled_demo()), device=args.device, precision="fp32")
    folder = render_digits(tmp / "digits", **({"per_class": args.digits} if args.digits else {}))
    tokens = collect(loaded, folder, default_layer(loaded))
    settings = ConceptSettings(size=args.size, k=args.k, epochs=args.epochs, tokens_per_step=4096)
    with PeakRSS() as whole:
        result, seconds = train(tokens, settings, tmp / "digits-sae")
    n = len(tokens.paths) * tokens.patches * settings.epochs
    r2, l0, dead = evaluate(result.sae, result.norm, tokens)
    print(f"  ours:         {settings.size} concepts, k {settings.k}, {settings.epochs} epochs in {seconds:.2f} s "
          f"({n / seconds:,.0f} tokens/s): R² {r2:.3f}, L0 {l0:.1f}, {dead} dead")
    ref = overcomplete_reference(tokens, result.norm, settings, args.device)
    if ref is not None:
        s, r2_ref, l0_ref, dead_ref = ref
        print(f"  overcomplete: the same tokens, size, k, epochs and batch in {s:.2f} s ({n / s:,.0f} tokens/s): "
              f"R² {r2_ref:.3f}, L0 {l0_ref:.1f}, {dead_ref} dead; time ratio ours/theirs {seconds / s:.2f}×, "
              f"R² ours − theirs {r2 - r2_ref:+.3f}")
    aux, s = train(tokens, ConceptSettings(size=args.size, k=args.k, epochs=args.epochs, tokens_per_step=4096,
                                           aux_k=256), tmp / "digits-aux")
    r2_aux, _, dead_aux = evaluate(aux.sae, aux.norm, tokens)
    print(f"  ours with Gao et al.'s auxiliary loss (aux_k 256): {s:.2f} s, R² {r2_aux:.3f}, {dead_aux} dead")
    for epochs in (1, 2, 5):  # time to a usable SAE: R² after a few epochs
        short, s = train(tokens, ConceptSettings(size=args.size, k=args.k, epochs=epochs, tokens_per_step=4096),
                         tmp / f"digits-e{epochs}")
        print(f"  after {epochs} epoch(s): {s:.2f} s, R² {evaluate(short.sae, short.norm, tokens)[0]:.3f}")
    import vitstudio.core.concepts.training as training

    chunk, training.CHUNK_TOKENS = training.CHUNK_TOKENS, 8192  # both folders several chunks long
    peaks = []  # the whole folder first: memory its run freed can only make the quarter's peak look smaller
    for share in (1, 4):
        part = type(tokens)(tokens.paths[: len(tokens.paths) // share], tokens.rows[: len(tokens.rows) // share],
                            tokens.tokens, tokens.grid, tokens.width, (), 0, f"{tokens.source}-{share}")
        with PeakRSS() as peak:
            train(part, settings, tmp / f"digits-share{share}")
        peaks.append(peak.mb)
    training.CHUNK_TOKENS = chunk
    print(f"  peak memory while training, streamed in chunks of 8,192 tokens: {peaks[1]:.0f} MB on a quarter of the "
          f"folder, {peaks[0]:.0f} MB on all of it, ratio {peaks[0] / max(peaks[1], 1e-9):.2f} (the first run, "
          f"chunks of {chunk:,}: {whole.mb:.0f} MB)")


def photos_stage(args, tmp):
    from PIL import Image

    from tests.core.planted import distinct_photos
    from vitstudio.core.concepts.settings import ConceptSettings
    from vitstudio.core.concepts.tokens import default_layer
    from vitstudio.core.models.loading import load_model

    print(f"{args.photos} photos through a ViT-S/16 (random weights: times only)")
    folder = tmp / "photos"
    folder.mkdir()
    photos = list(distinct_photos().values())
    for i in range(args.photos):  # the distinct photos, then mirrored and rotated copies of them
        img = Image.fromarray(photos[i % len(photos)]).rotate(90 * (i // len(photos)), expand=True)
        img.save(folder / f"{i:04d}.jpg", quality=90)
    loaded = load_model(args.photo_model, device=args.device, precision="fp32", pretrained=False)
    tokens = collect(loaded, folder, default_layer(loaded), batch=32)
    settings = ConceptSettings(size=args.size, k=args.k, epochs=args.epochs, tokens_per_step=4096)
    result, seconds = train(tokens, settings, tmp / "photos-sae")
    n = len(tokens.paths) * tokens.patches * settings.epochs
    print(f"  train: {seconds:.2f} s ({n / seconds:,.0f} tokens/s), R² {result.r2:.3f}, L0 {result.l0:.1f}")


def planted_stage(args, tmp):
    from PIL import Image
    from sklearn.metrics import roc_auc_score

    from tests.core.planted_concepts import fine_tuned, planted_folder
    from vitstudio.core.concepts.intervene import logits_with
    from vitstudio.core.concepts.learn import learn_concepts
    from vitstudio.core.concepts.maps import concept_maps
    from vitstudio.core.concepts.settings import ConceptSettings
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.core.models.loading import load_model

    print("planted mark on the demo-sized model (32 px, 4 px patches, 4 blocks of width 64)")
    loaded = load_model(str(bundled_demo()), device="cpu", precision="fp32")
    torch.manual_seed(0)
    loaded.model.reset_classifier(2)  # marked, plain
    marks = planted_folder(tmp / "planted", count=400, patch=4)
    accuracy = fine_tuned(loaded, marks, epochs=6)
    t0 = time.perf_counter()
    result = drain(learn_concepts(loaded, [str(tmp / "planted")], ConceptSettings(size=256, k=8, epochs=20),
                                  tmp / "planted-sae"))
    paths, concepts = list(marks), result.concepts
    marked = np.asarray([marks[p] is not None for p in paths])
    xs = [loaded.to_tensor(loaded.crop(Image.open(p).convert("RGB")))[None] for p in paths]
    maps = [concept_maps(loaded, concepts, x) for x in xs]
    strongest = np.stack([m.max((0, 1)) for m in maps])
    half = len(paths) // 2  # the concept chosen on the first half, judged on the second (both kinds in each)
    pick, held = np.arange(half), np.arange(half, len(paths))
    aucs = [roc_auc_score(marked[pick], strongest[pick, c]) if strongest[pick, c].any() else 0.5
            for c in range(concepts.size)]
    c = int(np.argmax(aucs))
    auc = roc_auc_score(marked[held], strongest[held, c])
    ious = []
    for i in held[marked[held]]:
        m = maps[i][..., c]
        top = set(zip(*np.nonzero(m >= 0.5 * m.max()))) if m.max() > 0 else set()
        ious.append(len(top & {marks[paths[i]]}) / len(top | {marks[paths[i]]}))
    x = torch.cat([xs[i] for i in held[marked[held]]])
    before, after = logits_with(loaded, concepts, x), logits_with(loaded, concepts, x, {c: 0.0})
    margin_b, margin_a = before[:, 0] - before[:, 1], after[:, 0] - after[:, 1]
    print(f"  model accuracy marked/plain {accuracy:.1%}; concepts learned in {time.perf_counter() - t0:.1f} s "
          f"(R² {result.training.r2:.3f}); concept {c}: AUROC {auc:.3f} (goal ≥ 0.95), IoU with the mark "
          f"{np.mean(ious):.2f} (goal ≥ 0.5); switched off: marked-over-plain margin {margin_b.mean():.2f} → "
          f"{margin_a.mean():.2f}, lower on {(margin_a < margin_b).mean():.0%} of the marked images")


def main() -> None:
    import warnings

    warnings.filterwarnings("ignore", message="Only one class")
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--photos", type=int, default=400)
    p.add_argument("--photo-model", default="vit_small_patch16_224")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--skip-photos", action="store_true")
    p.add_argument("--skip-planted", action="store_true")
    p.add_argument("--digits", type=int, default=0, help="only this many digits per class (0: all 1,797)")
    args = p.parse_args()
    import os

    global DEVICE
    DEVICE = args.device
    tmp = Path(tempfile.mkdtemp())
    os.environ.setdefault("VITSTUDIO_CACHE_DIR", str(tmp / "cache"))
    torch.manual_seed(0)
    digits_stage(args, tmp)
    if not args.skip_photos:
        photos_stage(args, tmp)
    if not args.skip_planted:
        planted_stage(args, tmp)


if __name__ == "__main__":
    main()
