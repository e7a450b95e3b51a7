"""The Play tab driven as a user would: a video file through the demo model shows annotated frames with frames per
second and latency, a map can be chosen while it plays, the annotated stream is recorded, a missing camera is said
on the tab, and Stop leaves no thread behind."""

from __future__ import annotations

from PySide6.QtWidgets import QFileDialog, QMessageBox

from tests.core.play_video import moving_digits_video
from vitstudio.core.models.demo import bundled_demo
from vitstudio.core.play.video import FrameSource
from vitstudio.gui import workers


def test_play_a_video_with_a_map_and_record_it(window, qtbot, tmp_path, monkeypatch):
    video = moving_digits_video(tmp_path / "digits.avi", frames=36, fps=12.0)
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(str(bundled_demo()))
    window.show_tab("play")
    panel = window.play
    assert window.tabs.currentWidget() is panel

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
        assert sum(1 for _ in src) == analysed  # the recording holds every frame shown
    assert not workers.running_jobs()


def test_no_camera_is_said_on_the_tab_and_stop_stops(window, qtbot, tmp_path):
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(str(bundled_demo()))
    panel = window.play
    window.show_tab("play")
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
