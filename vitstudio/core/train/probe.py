"""Attention over training, kept in the run folder: after every epoch the probe image's attention rollout is
saved as `probe/epoch-NNN.npy` beside `probe/probe.png` (the crop the model saw), so any run's history can be
replayed later and exported as an animated GIF or MP4."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

PROBE_DIR = "probe"


@dataclass(frozen=True)
class ProbeSnapshot:
    epoch: int
    rollout: np.ndarray  # (gh, gw) attention rollout of the probe image after this epoch
    crop: np.ndarray  # (H, W, 3) uint8: the probe image as the model saw it


def save_snapshot(run: Path, snap: ProbeSnapshot) -> None:
    import io

    from PIL import Image

    from vitstudio.core.files import atomic_write_bytes

    folder = Path(run) / PROBE_DIR
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(snap.rollout, dtype=np.float32))
    atomic_write_bytes(folder / f"epoch-{snap.epoch:03d}.npy", buffer.getvalue())
    if not (folder / "probe.png").exists():
        png = io.BytesIO()
        Image.fromarray(np.asarray(snap.crop, dtype=np.uint8)).save(png, format="PNG")
        atomic_write_bytes(folder / "probe.png", png.getvalue())


def read_snapshots(run: Path) -> list[ProbeSnapshot]:
    """Every saved snapshot of a run, by epoch (empty when it has none)."""
    from PIL import Image

    folder = Path(run) / PROBE_DIR
    if not (folder / "probe.png").is_file():
        return []
    crop = np.asarray(Image.open(folder / "probe.png").convert("RGB"))
    out = []
    for path in sorted(folder.glob("epoch-*.npy")):
        try:
            out.append(ProbeSnapshot(int(path.stem.split("-")[1]), np.load(path), crop))
        except (ValueError, OSError):  # a file cut short by a kill: skip it, the others still replay
            continue
    return out


def frames(snapshots: list[ProbeSnapshot], cmap: str = "inferno", alpha: float = 0.55,
           min_side: int = 256) -> list[np.ndarray]:
    """One picture per epoch: the rollout bilinear over the crop, one colour scale for all, the epoch written in."""
    from PIL import Image, ImageDraw

    from vitstudio.core.analysis import overlays

    lo = min(float(s.rollout.min()) for s in snapshots)
    hi = max(float(s.rollout.max()) for s in snapshots)
    pictures = []
    for snap in snapshots:
        h, w = snap.crop.shape[:2]
        heat = overlays.colorize(overlays.normalise(overlays.upsample(snap.rollout, (h, w)), lo, hi), cmap)
        blend = (alpha * heat + (1 - alpha) * snap.crop + 0.5).astype(np.uint8)
        scale = max(1, -(-min_side // min(h, w)))
        image = Image.fromarray(blend).resize((w * scale, h * scale), Image.BILINEAR)
        ImageDraw.Draw(image).text((6, 4), f"epoch {snap.epoch + 1}", fill=(255, 255, 255))
        pictures.append(np.asarray(image))
    return pictures


def write_animation(run: Path, out: Path, fps: float = 2.0, cmap: str = "inferno") -> Path:
    """The run's attention over training as .gif or .mp4 (MP4 needs imageio-ffmpeg)."""
    import imageio.v3 as iio

    snapshots = read_snapshots(run)
    if not snapshots:
        raise ValueError(f"{run} has no saved probe snapshots (runs keep them in {PROBE_DIR}/ since this version).")
    out = Path(out)
    pictures = frames(snapshots, cmap)
    if out.suffix.lower() == ".gif":
        iio.imwrite(out, pictures, duration=1000 / fps, loop=0)
    elif out.suffix.lower() == ".mp4":
        try:
            import imageio_ffmpeg  # noqa: F401
        except ImportError:
            raise ValueError("MP4 needs imageio-ffmpeg (pip install 'vitstudio[video]'); GIF works without it.") \
                from None
        _write_mp4(out, [p[: p.shape[0] // 2 * 2, : p.shape[1] // 2 * 2] for p in pictures], fps)  # even sides
    else:
        raise ValueError(f"Write the animation as .gif or .mp4, not '{out.suffix}'.")
    return out


def _write_mp4(out: Path, pictures: list[np.ndarray], fps: float) -> None:
    """H.264 through imageio's ffmpeg plugin (imageio-ffmpeg ships the binary)."""
    import imageio.v2 as iio2

    with iio2.get_writer(out, fps=fps, codec="libx264", macro_block_size=2, format="FFMPEG") as writer:
        for picture in pictures:
            writer.append_data(picture)


def probe_image(config, split):
    """The image whose attention a run snapshots: the one the settings name, else the first validation image;
    None when it cannot be read."""
    from vitstudio.core.data.images import ImageReadError, read_image

    path = config.probe_image or (str(split.val[0][0]) if split.val else None)
    try:
        return read_image(path) if path else None
    except ImageReadError:
        return None


def probe_snapshot(model, image, cfg: dict, base, epoch: int) -> ProbeSnapshot:
    """The probe image's attention rollout with the weights of this epoch (`base`: the LoadedModel the run
    started from, whose architecture and labels the view borrows)."""
    from vitstudio.core.analysis.attention import rollout
    from vitstudio.core.models.model import LoadedModel

    view = LoadedModel(model=model, name="probe", architecture=base.architecture, kind=base.kind, data_config=cfg,
                       labels=base.labels, label_set="", weights_source="", device=base.device,
                       precision=base.precision)
    was_training = model.training
    model.eval()
    crop = view.crop(image)
    maps = rollout(view, view.to_tensor(crop)[None])[0]
    model.train(was_training)
    return ProbeSnapshot(epoch, maps, np.asarray(crop))
