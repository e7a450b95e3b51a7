"""Producing on a background thread (`jobs.prefetched`): the consumer sees every item in order, the producer's
exception where it happened, and a consumer that stops early leaves no thread behind and closes the source; the
tensor decoding path uses it and still stops on cancel."""

from __future__ import annotations

import threading
import time

import pytest

from vitstudio.core.jobs import Cancelled, CancelToken, prefetched


def _alive(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name and t.is_alive()]


def test_order_is_kept_and_work_runs_ahead_on_another_thread():
    """Items arrive in order, produced on the named thread, which ends."""
    threads = set()

    def items():
        for i in range(20):
            threads.add(threading.current_thread().name)
            yield i

    got = []
    for item in prefetched(items(), depth=3, name="test-prefetch"):
        time.sleep(0.001)
        got.append(item)
    assert got == list(range(20))
    assert threads == {"test-prefetch"}
    assert not _alive("test-prefetch")


def test_the_producers_error_reaches_the_consumer_in_place():
    """A producer exception is raised after the items before it; the thread ends."""
    def items():
        yield 1
        yield 2
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        for item in prefetched(items(), name="test-prefetch-error"):
            got.append(item)
    assert got == [1, 2]
    assert not _alive("test-prefetch-error")


def test_stopping_early_closes_the_source_and_ends_the_thread():
    """Closing the stream closes the source generator, ends the thread, and it ran at most ~depth ahead."""
    closed = threading.Event()
    produced = []

    def items():
        try:
            for i in range(10_000):
                produced.append(i)
                yield i
        finally:
            closed.set()

    stream = prefetched(items(), depth=2, name="test-prefetch-stop")
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()
    assert closed.wait(5) and not _alive("test-prefetch-stop")
    assert len(produced) < 10  # it ran at most depth (+ the item in hand) ahead, not through the source


def test_tensor_batches_stop_on_cancel(photos, tmp_path):
    """`decoded_batches(decoder="tensor")` raises Cancelled after the first batch and leaves no decode thread."""
    from PIL import Image

    from vitstudio.core.inference import decoded_batches
    from vitstudio.core.models.loading import load_model

    files = []
    for i in range(12):
        path = tmp_path / f"{i}.jpg"
        Image.open(next(iter(photos.values()))).convert("RGB").save(path)
        files.append(str(path))
    loaded = load_model("custom:img=32,patch=8,width=32,depth=2,heads=2,classes=3")
    token = CancelToken()
    seen = []
    with pytest.raises(Cancelled):
        for batch in decoded_batches(loaded, files, batch_size=2, cancel=token, decoder="tensor"):
            seen.extend(p for p, _, _ in batch.items)
            token.cancel()
    assert seen == files[:2]
    assert not _alive("vitstudio-decode")


def test_a_process_that_never_closes_the_stream_exits_cleanly():
    """The producer is busy in torch kernels when the script ends without closing the stream: exit waits for its
    current item and ends it (a daemon thread killed inside a kernel aborts the process: 'terminate called').

    [subprocess]
    """
    import subprocess
    import sys

    code = ("import torch\n"
            "from vitstudio.core.jobs import prefetched\n"
            "def items():\n"
            "    while True:\n"
            "        yield torch.randn(1500, 1500) @ torch.randn(1500, 1500)\n"
            "stream = prefetched(items())\n"
            "next(stream)\n"
            "print('leaving', flush=True)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "leaving" in out.stdout, out.stderr[-2000:]
