"""Play mode without a window: a generated video through the demo model gives one annotated frame per input
frame, per-frame predictions equal `classify` on the same decoded frames (what `predict` runs), maps drawn from
the registry, a live source that skips frames instead of queueing them, and clear refusals."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from tests.core.play_video import moving_digits_video
from vitstudio.cli import main as cli_main
from vitstudio.core.inference import classify
from vitstudio.core.models.demo import bundled_demo
from vitstudio.core.models.loading import load_model
from vitstudio.core.play import play_methods
from vitstudio.core.play.frames import analyse_frame
from vitstudio.core.play.video import FrameSource, LatestFrame, VideoSourceError


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    return moving_digits_video(tmp_path_factory.mktemp("play") / "digits.avi", frames=24)


@pytest.fixture(scope="module")
def demo():
    return load_model(str(bundled_demo()), device="cpu", precision="fp32")


def test_cli_writes_one_frame_per_frame_and_predictions_equal_classify(video, demo, tmp_path):
    """`vitstudio play` writes one annotated frame per input frame and JSONL per frame whose top-5 equal `classify` on
    the decoded frames.
    """
    out, records = tmp_path / "annotated.mp4", tmp_path / "frames.jsonl"
    code = cli_main(["play", str(video), "--model", str(bundled_demo()), "--method", "rollout", "--out", str(out),
                     "--json", str(records), "--quiet", "--device", "cpu", "--precision", "fp32"])
    assert code == 0
    with FrameSource(str(video)) as src:
        frames = [frame for _i, _t, frame in src]
    assert len(frames) == 24
    with FrameSource(str(out)) as annotated:
        assert sum(1 for _ in annotated) == len(frames)  # one output frame per input frame
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["frame"] for r in lines] == list(range(24))
    from PIL import Image

    expected = classify(demo, [Image.fromarray(f) for f in frames], topk=5)
    for record, pred in zip(lines, expected):
        assert [t["label"] for t in record["top"]] == list(pred.labels)
        np.testing.assert_allclose([t["prob"] for t in record["top"]], pred.probs, atol=1e-5)


def test_maps_come_from_the_registry(video, demo):
    """Play methods include rollout/gradient-rollout/heads but not token/text; frame maps equal `explain`; heads shown
    as their mean.
    """
    from PIL import Image

    from vitstudio.core.analysis.explain import explain

    assert {"rollout", "gradient-rollout", "heads"} <= set(play_methods())
    assert "token" not in play_methods() and "text" not in play_methods()  # they need a patch / a text
    with FrameSource(str(video)) as src:
        _i, _t, frame = next(iter(src))
    result = analyse_frame(demo, frame, method="rollout")
    np.testing.assert_allclose(result.map, explain(demo, "rollout", Image.fromarray(frame)).array, atol=1e-6)
    heads = analyse_frame(demo, frame, method="heads")
    assert heads.map.shape == demo.grid_size  # a per-head stack shown as its mean


def test_live_source_keeps_only_the_newest_frame(video):
    """A paced LatestFrame skips frames during a slow analysis rather than queueing."""
    latest = LatestFrame(FrameSource(str(video)), paced=True)  # 12 fps: a frame every 83 ms
    taken = [latest.take()]
    time.sleep(0.5)  # a slow analysis: ~6 frames arrive meanwhile
    taken.append(latest.take())
    latest.close()
    assert taken[1][0] - taken[0][0] >= 3  # frames were skipped, not queued


def test_a_file_plays_from_its_first_frame_however_late_the_first_analysis_asks(tmp_path):
    """A paced file's clock starts at the first take(), as a player's at its first picture: a two-frame 12-fps file
    whose first take comes 0.3 s after the player started (a model's warm-up) still hands over frame 0, then frame 1
    (the clock ran from the start, and both frames were due and the first skipped: the Play seam matrix's
    "Finished: 1 of 2 frames" on a loaded machine)."""
    latest = LatestFrame(FrameSource(str(moving_digits_video(tmp_path / "two.avi", frames=2, size=48))), paced=True)
    time.sleep(0.3)
    taken = [latest.take(), latest.take(), latest.take()]
    latest.close()
    assert [frame[0] for frame in taken[:2]] == [0, 1] and taken[2] is None


class _CountedCapture:
    """cv2.VideoCapture with its calls counted: read() and retrieve() make an RGB picture, grab() only reads."""

    def __init__(self, capture) -> None:
        self.capture, self.frames, self.pictures = capture, 0, 0

    def read(self):
        self.frames += 1
        self.pictures += 1
        return self.capture.read()

    def grab(self):
        self.frames += 1
        return self.capture.grab()

    def retrieve(self):
        self.pictures += 1
        return self.capture.retrieve()

    def __getattr__(self, name):
        return getattr(self.capture, name)


def test_a_live_source_makes_pictures_only_of_the_frames_it_hands_over(tmp_path):
    """A slow analysis takes a few frames of a fast file: every frame is read, only those taken (and the file's
    last) are made into pictures, each the same picture as reading the file in order gives.

    A slow consumer of a fast file: LatestFrame reads every frame but makes RGB pictures (counted on the capture:
    `read`/`retrieve` against `grab`) only of those it hands over and the file's last; each equals the frame read in
    order at its index (issue 49 item 7: the Play tab decoded every frame it skipped).
    """
    video = moving_digits_video(tmp_path / "fast.avi", frames=40, fps=200.0)  # a frame every 5 ms
    with FrameSource(str(video)) as src:
        frames = [frame for _i, _t, frame in src]
    source = FrameSource(str(video))
    counted = source.capture = _CountedCapture(source.capture)
    latest = LatestFrame(source, paced=True)
    taken = []
    while (frame := latest.take()) is not None:
        taken.append(frame)
        time.sleep(0.03)  # the model at work: ~6 frames arrive meanwhile
    latest.close()
    assert latest.read_count == len(frames) == 40 and counted.frames >= 40
    assert len(taken) < 20 and taken[-1][0] == 39  # frames skipped; the last one still handed over
    assert counted.pictures <= len(taken) + 1  # not one picture per frame read
    assert latest.picture_count == counted.pictures
    for index, t, picture in taken:
        np.testing.assert_array_equal(picture, frames[index])
        assert t == pytest.approx(index / 200.0)


def test_bad_sources_are_refused_in_one_line(tmp_path, capsys):
    """Bad camera spec and non-video file raise VideoSourceError; a missing file is exit 2 "No video file"."""
    with pytest.raises(VideoSourceError, match="camera:N"):
        FrameSource("camera:x")
    not_video = tmp_path / "notes.avi"
    not_video.write_text("hello")
    with pytest.raises(VideoSourceError, match="Cannot read"):
        FrameSource(str(not_video))
    code = cli_main(["play", str(tmp_path / "missing.mp4"), "--model", "custom:img=32,patch=8,width=32,depth=1,"
                     "heads=2,classes=3"])
    assert code == 2 and "No video file" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["rollout", "gradient-rollout", "heads"])
def test_a_frame_with_a_map_runs_one_forward_and_predicts_as_predict(video, demo, method):
    """The map's forward gives the prediction too (one forward per frame, not two), and the numbers are
    `classify`'s (the OOD verdict included: the demo has a bank).

    [parametrised ×3]
    """
    from PIL import Image

    from vitstudio.core.inference import classify

    with FrameSource(str(video)) as src:
        _i, _t, frame = next(iter(src))
    forwards = []
    handle = demo.model.register_forward_hook(lambda *_: forwards.append(1))
    try:
        result = analyse_frame(demo, frame, method=method)
    finally:
        handle.remove()
    assert len(forwards) == 1
    expected = classify(demo, [Image.fromarray(frame)])[0]
    assert result.labels == expected.labels
    np.testing.assert_allclose(result.probs, expected.probs, atol=1e-6)


def test_the_annotated_picture_is_the_frame_with_the_map_over_what_the_model_saw(rgb_image):
    """Issue 29, item 13: Play showed only the model's crop (32 px for the demo), enlarged. The picture is the
    frame, the map blended over the part the model saw (`crop_box`, read off its resize + centre crop) inside a
    box; resized back, that part is the model's own crop.

    `crop_box` places the model's resize + centre crop in the frame (resampled, it is the model's crop);
    `annotate(frame=…)` is the frame's shape, the map blended inside the box and the rest of the frame as it is (Play
    showed only the 32-px crop enlarged: issue 29, item 13). Its caption is drawn in an 18-px scalable font (the 11-px
    bitmap default was unreadable once a wide frame was fitted to the Play tab: the walk).
    """
    from PIL import Image

    from tests.conftest import TINY_SPEC
    from vitstudio.core.analysis import overlays
    from vitstudio.core.play.frames import CAPTION, DISPLAY, annotate, crop_box

    loaded = load_model(TINY_SPEC)  # 32 px, crop_pct 0.9: resize the short side to 35, centre-crop 32
    frame = np.asarray(rgb_image.resize((300, 200)), dtype=np.uint8)
    top, left, h, w = crop_box(loaded, frame.shape[:2])
    # torchvision: 200×300 → 35×52 (the long side int(35 * 300 / 200)), the crop's corner at round((52 - 32) / 2)
    assert (h, w) == (round(32 * 200 / 35), round(32 * 300 / 52)) and (top, left) == (round(2 * 200 / 35),
                                                                                       round(10 * 300 / 52))
    seen = Image.fromarray(frame[top:top + h, left:left + w]).resize((32, 32), Image.BILINEAR)
    crop = np.asarray(loaded.crop(Image.fromarray(frame)), np.float32)
    assert np.abs(np.asarray(seen, np.float32) - crop).mean() < 12  # the same part of the frame, resampled
    result = analyse_frame(loaded, frame, method="rollout")
    picture = annotate(result, 10.0, frame=frame)
    assert picture.shape == (DISPLAY + CAPTION, round(300 * DISPLAY / 200), 3)  # the frame's shape, not the crop's
    plain = annotate(result, 10.0, frame=frame)[:DISPLAY]
    scale = DISPLAY / 200
    inside = plain[round((top + h / 2) * scale), round((left + w / 2) * scale)].astype(int)
    expected = overlays.overlay(result.map, frame[top:top + h, left:left + w])[h // 2, w // 2].astype(int)
    assert np.abs(inside - expected).max() <= 40  # the map is blended there
    outside = plain[5, 5].astype(int)
    assert np.abs(outside - frame[0, 0].astype(int)).max() <= 40  # the rest is the frame as it is
    assert annotate(result, 10.0).shape[0] == DISPLAY + CAPTION  # without the frame: the crop, as before
    bar = picture[DISPLAY:].max(axis=2) > 180  # the caption's text: readable once a wide frame is fitted to the tab
    rows, cols = np.nonzero(bar)
    assert rows.max() - rows.min() >= 12 and cols.max() - cols.min() >= 150  # was Pillow's 11-px bitmap: 8 rows


def test_map_colours_are_matplotlibs_colormap():
    """Play colours each frame's map through a cached table instead of calling matplotlib per frame (4 ms a 448²
    frame): every colormap offered gives matplotlib's own colours (reference: `Colormap.__call__`, as uint8) at
    every bin edge, just either side of it, both ends, out of range and NaN.

    `overlays.colorize`'s cached table gives matplotlib's own colours (reference: `Colormap.__call__`) for every offered
    colormap at every bin edge, either side of it, both ends, out of range and NaN; an unknown colormap is refused (Play
    coloured each frame through matplotlib: 4 ms a 448² frame).
    """
    import matplotlib

    from vitstudio.core.analysis import overlays
    from vitstudio.core.fields import COLORMAPS

    edges = np.arange(257, dtype=np.float32) / 256
    values = np.concatenate([np.linspace(0, 1, 4099, dtype=np.float32), edges, np.nextafter(edges, np.float32(2)),
                             np.nextafter(edges, np.float32(-1)), np.float32([-0.5, 1.5, np.nan])])
    for cmap in COLORMAPS:
        expected = (matplotlib.colormaps[cmap](values)[:, :3] * 255 + 0.5).astype(np.uint8)
        got = overlays.colorize(values.reshape(-1, 1), cmap)
        assert got.shape == (len(values), 1, 3) and got.dtype == np.uint8
        assert np.abs(got[:, 0].astype(int) - expected).max() <= 1, cmap  # within 1/255 (equal today)
    with pytest.raises(ValueError, match="Unknown colormap"):
        overlays.colorize(values, "no-such-map")


def test_a_big_frame_is_shrunk_first_without_aliasing():
    """The annotated picture shrinks the frame to the size shown before blending the map (a 720-px frame took
    20 ms blended at full size). The shrink of a 1080p frame of 1-px stripes is as smooth as Pillow's antialiased
    bilinear resize (the reference): a plain bilinear shrink at 2.4× would draw moiré."""
    from PIL import Image

    from vitstudio.core.play.frames import CAPTION, DISPLAY, FrameResult, annotate

    frame = np.zeros((1080, 1920, 3), np.uint8)
    frame[:, ::2] = 255  # vertical 1-px stripes: grey once shrunk
    box = (0, 420, 1080, 1080)  # the model's square crop, centred
    result = FrameResult(0, 0.0, ("a",), (1.0,), 1.0, np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4),
                         frame[:32, :32], box)
    picture = annotate(result, 10.0, frame=frame)
    width = round(1920 * DISPLAY / 1080)
    assert picture.shape == (DISPLAY + CAPTION, width, 3)
    reference = np.asarray(Image.fromarray(frame).resize((width, DISPLAY), Image.BILINEAR), np.float32)
    outside = slice(0, round(420 * DISPLAY / 1080) - 2)  # left of the box and its outline: the frame alone
    assert np.abs(picture[:DISPLAY, outside].astype(np.float32) - reference[:, outside]).mean() < 4
    assert picture[:DISPLAY, outside].std() < 4  # no stripes left
    inside = picture[DISPLAY // 2, width // 2].astype(int)
    assert np.abs(inside - reference[DISPLAY // 2, width // 2]).max() > 20  # the map is blended there


def test_a_headless_model_plays_with_a_map_and_prediction_alone_is_refused(video, tmp_path, capsys):
    """A model without classes (a DINO backbone, CLIP before its classes are named) plays its attention, as DINO's
    attention videos do, captioned "no prediction"; asked for the prediction alone it is refused in one line.

    A CLIP-style model without classes plays rollout frames captioned "no prediction" (`top: []` in `--json`), its map
    equal to `attention.rollout` on the same crop; prediction alone raises NoClassifierHead, and `vitstudio play`
    without `--method` exits 2 in one line.
    """
    from tests.core.test_openclip import CLIP_CFG, _build
    from vitstudio.core.analysis.attention import rollout
    from vitstudio.core.inference import NoClassifierHead

    spec = str(_build(CLIP_CFG, tmp_path / "clip", safetensors=True))  # CLIP-style, its classes not named yet
    headless = load_model(spec, device="cpu", precision="fp32")
    assert headless.labels == []
    with FrameSource(str(video)) as src:
        _i, _t, frame = next(iter(src))
    result = analyse_frame(headless, frame, method="rollout")
    assert result.labels == () and result.top1 == "no prediction" and result.record()["top"] == []
    from PIL import Image

    x = headless.to_tensor(headless.crop(Image.fromarray(frame)))[None]
    np.testing.assert_allclose(result.map, rollout(headless, x)[0], rtol=1e-5, atol=1e-7)
    with pytest.raises(NoClassifierHead, match="no classes yet"):
        analyse_frame(headless, frame)
    records = tmp_path / "frames.jsonl"
    assert cli_main(["play", str(video), "--model", spec, "--method", "rollout", "--frames", "3", "--json",
                     str(records)]) == 0
    err = capsys.readouterr().err
    assert err.count("no prediction") == 3 and "3 frames analysed" in err
    assert [json.loads(line)["top"] for line in records.read_text().splitlines()] == [[], [], []]
    assert cli_main(["play", str(video), "--model", spec]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no classes yet" in err[0] and "Traceback" not in err[0]
