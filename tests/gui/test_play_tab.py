"""The Play tab driven as a user would: a video file through the demo model shows annotated frames with frames per
second and latency, a map can be chosen while it plays, the annotated stream is recorded, a missing camera is said
on the tab, and Stop leaves no thread behind."""

from __future__ import annotations

from PySide6.QtWidgets import QFileDialog, QMessageBox

from tests.core.play_video import moving_digits_video
from vitstudio.core.models.demo import bundled_demo
from vitstudio.core.play.video import FrameSource
from vitstudio.gui import workers


def test_play_a_video_with_a_map_and_record_it(panel, qtbot, tmp_path, monkeypatch):
    """Playing a video with rollout shows frames/s and latency, finishes, and the recording holds every frame of the
    source (36 of 36, analysed or held); no job left. [panel]
    """
    # the Play tab alone on the demo (the window's show_tab("play") showing this panel: test_the_window_fits_1280_…)
    from vitstudio.gui.explore.play_panel import PlayPanel

    video = moving_digits_video(tmp_path / "digits.avi", frames=36, fps=12.0)
    panel = panel(PlayPanel, model=bundled_demo())

    record = tmp_path / "out" / "played.mp4"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(record), ""))
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Yes)  # "…/out does not exist. Create it?"
    panel.record_button.setChecked(True)  # before playing: the whole session is recorded
    panel.method.setCurrentIndex(panel.method.findData("rollout"))
    panel.play(str(video))
    qtbot.waitUntil(lambda: "frames/s" in panel.stats.text(), timeout=30000)
    assert panel.screen.pixmap() is not None and not panel.screen.pixmap().isNull()
    assert "latency" in panel.stats.text()
    qtbot.waitUntil(lambda: "Finished" in panel.stats.text(), timeout=60000)
    analysed = int(panel.stats.text().split("Finished: ")[1].split(" of ")[0])
    assert 1 <= analysed <= 36
    with FrameSource(str(record)) as src:
        assert sum(1 for _ in src) == 36  # every frame of the source, at its rate (an analysed one held over those
    assert not workers.running_jobs()  # skipped after it)


def test_no_camera_is_said_on_the_tab_and_stop_stops(panel, qtbot, tmp_path):
    """A missing camera says "No camera 3 … video file" with Stop disabled; Stop during a long video ends the job and
    says "stopped". [panel]
    """
    from vitstudio.gui.explore.play_panel import PlayPanel

    panel = panel(PlayPanel, model=bundled_demo())
    panel.camera.setCurrentIndex(3)  # camera:3: none on this machine
    panel.camera_button.click()
    qtbot.waitUntil(lambda: "No camera 3" in panel.screen.text(), timeout=20000)
    assert "video file" in panel.screen.text()
    assert not panel.stop_button.isEnabled()

    video = moving_digits_video(tmp_path / "long.avi", frames=240, fps=12.0)  # 20 s of video
    panel.play(str(video))
    qtbot.waitUntil(lambda: "frames/s" in panel.stats.text(), timeout=30000)
    panel.stop_button.click()
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=10000)
    assert "stopped" in panel.stats.text()


class _BusyFrom3To8:
    """LatestFrame's part the Play tab uses, handing over every frame but 3 to 8 (they arrive while the model is
    busy), whatever this machine's speed."""

    def __init__(self, source, paced=None) -> None:
        self.source, self.read_count, self._frames = source, 0, iter(source)

    def take(self, timeout: float = 5.0):
        for taken in self._frames:
            self.read_count += 1
            if not 3 <= taken[0] <= 8:
                return taken
        return None

    def close(self) -> None:
        self.source.close()


def test_a_recording_keeps_the_sources_timing_and_the_next_session_never_writes_over_it(panel, qtbot, tmp_path,
                                                                                         monkeypatch):
    """Issue 49 item 10: the recording held only the analysed frames (181 of 200 at 10 fps: a shorter, faster video)
    and "Record to…" stayed armed, so the next session silently wrote over it.

    A session that skips frames 3–8 (a reader standing in for a busy model) records all 12 frames at the source's 12
    frames/s, frames 3–8 the held frame 2 and frame 9 its own, and says so; Record is disarmed after the session and the
    next one leaves the file untouched (it held only the analysed frames and stayed armed, writing over it: issue 49
    item 10). [panel]
    """
    import numpy as np

    from vitstudio.core.play import video as video_module
    from vitstudio.gui.explore.play_panel import PlayPanel

    video = moving_digits_video(tmp_path / "digits.avi", frames=12, fps=12.0)
    play = panel(PlayPanel, model=bundled_demo())
    monkeypatch.setattr(video_module, "LatestFrame", _BusyFrom3To8)
    record = tmp_path / "played.avi"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(record), ""))
    play.record_button.setChecked(True)
    play.play(str(video))
    qtbot.waitUntil(lambda: "Finished" in play.stats.text(), timeout=60000)
    assert play.stats.text().startswith("Finished: 6 of 12 frames analysed")
    assert f"recorded to {record}: 12 frames at the source's 12 frames/s, each analysed frame held over the 6 " \
           f"skipped after it" in play.stats.text()
    with FrameSource(str(record)) as src:
        frames = [frame for _, _, frame in src]
    assert len(frames) == 12  # as long as its source
    same = [float(np.abs(frames[i].astype(int) - frames[2].astype(int)).mean()) for i in range(3, 9)]
    assert max(same) < 2.0 and float(np.abs(frames[9].astype(int) - frames[2].astype(int)).mean()) > 2.0
    assert not play.record_button.isChecked() and play.view_state.record is None  # disarmed after its session
    written = record.stat().st_mtime_ns, record.stat().st_size
    play.play(str(video))
    qtbot.waitUntil(lambda: "Finished" in play.stats.text() and "recorded" not in play.stats.text(), timeout=60000)
    assert (record.stat().st_mtime_ns, record.stat().st_size) == written


def test_only_the_newest_frame_is_drawn(panel, qtbot, monkeypatch):
    """Frames handed over while the window was busy are passed over: of three waiting, one pixmap is made, the
    newest's, and the job is told the screen is free.

    Three annotated frames handed over before the window gets to them: one pixmap is made, the newest's (its colour on
    the screen, "frame 2" in the line), and the job is told the screen is free. [panel]
    """
    import numpy as np

    from vitstudio.core.play.frames import FrameResult
    from vitstudio.gui.explore import play_panel
    from vitstudio.gui.explore.play_panel import PlayPanel
    from vitstudio.gui.imaging import pil_to_pixmap

    play = panel(PlayPanel)
    made = []
    monkeypatch.setattr(play_panel, "pil_to_pixmap", lambda picture: made.append(picture) or pil_to_pixmap(picture))
    colours = ((255, 0, 0), (0, 255, 0), (0, 0, 255))
    with qtbot.waitSignal(play._draw_timer.timeout, timeout=5000):
        for i, colour in enumerate(colours):  # three yields queued before the window gets to them
            result = FrameResult(i, i / 10, ("a",), (1.0,), 5.0)
            play._on_frame((np.full((40, 60, 3), colour, np.uint8), result, 10.0))
    assert len(made) == 1 and tuple(made[0][0, 0]) == (0, 0, 255)
    shown = play.screen.pixmap().toImage()
    assert shown.pixelColor(shown.width() // 2, shown.height() // 2).getRgb()[:3] == (0, 0, 255)
    assert "frame 2" in play.stats.text() and play._shown.is_set()


def test_frames_are_analysed_and_annotated_off_the_gui_thread(panel, qtbot, tmp_path, monkeypatch):
    """The GUI thread only turns the annotated picture into a pixmap: the analysis and the annotated picture (map
    coloured and blended, caption) are made on the job's threads, and the analysis of the next frame overlaps
    the picture of this one (a thread of its own).

    [panel]
    """
    import threading

    from vitstudio.core.play import frames
    from vitstudio.gui.explore.play_panel import PlayPanel

    threads = {"analyse_frame": set(), "annotate": set()}
    for name in threads:
        real = getattr(frames, name)
        monkeypatch.setattr(frames, name, lambda *a, _real=real, _name=name, **k: threads[_name].add(
            threading.current_thread().name) or _real(*a, **k))
    video = moving_digits_video(tmp_path / "digits.avi", frames=6, fps=12.0)
    play = panel(PlayPanel, model=bundled_demo())
    play.view_state.method = "rollout"
    play.play(str(video))
    qtbot.waitUntil(lambda: "Finished" in play.stats.text(), timeout=30000)
    gui = threading.main_thread().name
    assert threads["analyse_frame"] and threads["annotate"]
    assert gui not in threads["analyse_frame"] | threads["annotate"]
    assert not threads["analyse_frame"] & threads["annotate"]  # two stages, two threads
    assert not workers.running_jobs()


def test_a_headless_model_plays_with_a_map_only(panel):
    """A model with no classes greys out "Prediction only" with the reason it cannot predict as its tooltip (the
    core's NoClassifierHead sentence), and the map box falls back to the first map it has; the same model with its
    classes offers "Prediction only" again. [panel]
    """
    import dataclasses

    from PySide6.QtCore import Qt

    from vitstudio.core.models.loading import load_model
    from vitstudio.gui.explore.play_panel import PlayPanel

    loaded = load_model(str(bundled_demo()), device="cpu", precision="fp32")
    panel = panel(PlayPanel, model=dataclasses.replace(loaded, labels=[]))
    assert not panel.method.model().item(0).isEnabled()
    assert "has no classifier head" in panel.method.itemData(0, Qt.ToolTipRole)
    assert panel.method.currentIndex() != 0 and panel.method.model().item(panel.method.currentIndex()).isEnabled()
    panel.state.set_model(loaded)
    assert panel.method.model().item(0).isEnabled()
