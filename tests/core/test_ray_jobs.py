"""`--ray`: a folder command's model pass on a Ray cluster (core/folder/ray_jobs.py) gives what one process gives.

One two-node cluster (`ray.cluster_utils.Cluster`, one CPU per node, on 127.0.0.1 only) and two runs of one command
on it (`runs`: cut by Ctrl+C, then again losing a node) are shared by every test of the module; a tiny ViT over 20
generated images keeps each job to seconds (most of them the workers' start-up).
"""

from __future__ import annotations

import csv
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import TINY_SPEC
from vitstudio.cli import main

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="Ray is not installed (pip install 'vitstudio[cluster]')")
IMAGES = 20


@pytest.fixture(scope="module")
def cluster():
    """Head + one worker node, 1 CPU each, every address on the loopback interface."""
    # on Linux Ray resolves 127.0.0.1 to the machine's interface address unless this is 0 (set before it starts); no
    # usage report either (Ray Data starts an actor per cluster to collect one: a process importing Ray, for nothing)
    quiet = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
    before = {name: os.environ.get(name) for name in quiet}
    os.environ.update(quiet)
    import ray
    from ray.cluster_utils import Cluster

    # a lost node is noticed within ~1 s (health checks every 0.5 s, two missed), not Ray's default ~30 s; an idle
    # worker lives on for the module's next job (Ray's default kills it after 1 s, and each new one imports torch
    # again: 5 s of CPU a process, measured 15 -> 8 CPU-s a job)
    system = {"health_check_period_ms": 500, "health_check_failure_threshold": 2,
              "idle_worker_killing_time_threshold_ms": 600_000, "num_workers_soft_limit": 6}
    made = Cluster(initialize_head=True, connect=False,
                   head_node_args={"num_cpus": 1, "include_dashboard": False, "node_ip_address": "127.0.0.1",
                                   "_system_config": system})
    made.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    yield made
    ray.shutdown()
    made.shutdown()
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """20 small random images and one unreadable file."""
    folder = tmp_path_factory.mktemp("ray_images")
    rng = np.random.default_rng(0)
    for i in range(IMAGES):
        Image.fromarray(rng.integers(0, 255, (36 + i, 44, 3), np.uint8)).save(folder / f"{i:02d}.png")
    (folder / "broken.jpg").write_bytes(b"not a jpeg")
    return folder


def _predict(images, weights, out, *extra) -> int:
    return main(["predict", str(images), "--model", TINY_SPEC, "--weights", str(weights), "--csv", str(out),
                 "--quiet", *extra])


def _rows(path) -> list[dict]:
    return list(csv.DictReader(open(path)))


def _same_predictions(a, b) -> None:
    """The same rows in the same order, the same labels, probabilities within 1e-5."""
    rows_a, rows_b = _rows(a), _rows(b)
    assert [r["path"] for r in rows_a] == [r["path"] for r in rows_b] and len(rows_a) == IMAGES + 1
    for ra, rb in zip(rows_a, rows_b):
        assert ra["error"] == rb["error"]
        assert [ra[f"label_{k}"] for k in range(1, 6)] == [rb[f"label_{k}"] for k in range(1, 6)]
        for k in range(1, 6):
            if ra[f"prob_{k}"]:
                assert abs(float(ra[f"prob_{k}"]) - float(rb[f"prob_{k}"])) <= 1e-5


@dataclass
class Runs:
    """Two `predict FOLDER --csv --batch-size 4 --ray` runs of the same command into one cache: the first cut by
    Ctrl+C once its first batch came back, the second losing the cluster's worker node once its first batch came
    back."""

    weights: Path
    cache: Path
    exits: list[int] = field(default_factory=list)
    sent: list[list[str]] = field(default_factory=list)  # the paths each run handed to Ray Data, in order
    csv: Path | None = None  # the second run's
    nodes_left: int = -1  # worker nodes after the second run


@pytest.fixture(scope="module")
def runs(cluster, images, tmp_path_factory) -> Runs:
    """The two runs every cluster test reads (a cluster job costs seconds of worker start-up: two for the module)."""
    import ray.data
    from safetensors.torch import save_file

    from tests.conftest import make_tiny_vit
    from vitstudio.core.folder import ray_jobs

    work = tmp_path_factory.mktemp("ray_runs")
    made = Runs(work / "tiny.safetensors", work / "cache")
    save_file({k: v.contiguous() for k, v in make_tiny_vit().state_dict().items()}, str(made.weights))
    real_items, real_unpacked = ray.data.from_items, ray_jobs._unpacked

    def spy(items, *args, **kwargs):
        made.sent[-1].extend(item["path"] for item in items)
        return real_items(items, *args, **kwargs)

    def then(mp, step):
        def first(batch):
            done = real_unpacked(batch)
            mp.setattr(ray_jobs, "_unpacked", step)
            return done
        return first

    def interrupt(batch):
        raise KeyboardInterrupt

    def lose_a_node(batch):
        for node in list(cluster.worker_nodes):
            cluster.remove_node(node, allow_graceful=False)
        return real_unpacked(batch)

    with pytest.MonkeyPatch.context() as mp:  # module scope: the autouse per-test isolation is not set up yet
        mp.setenv("VITSTUDIO_CACHE_DIR", str(made.cache))
        mp.setenv("VITSTUDIO_DATA_DIR", str(work / "data"))
        mp.setattr(ray.data, "from_items", spy)
        for name, step in (("cut.csv", interrupt), ("ray.csv", lose_a_node)):
            made.sent.append([])
            mp.setattr(ray_jobs, "_unpacked", then(mp, step))
            made.exits.append(_predict(images, made.weights, work / name, "--ray", cluster.address,
                                       "--batch-size", "4"))
    made.csv, made.nodes_left = work / "ray.csv", len(cluster.worker_nodes)
    return made


@needs_ray
def test_predict_csv_on_a_cluster_equals_one_process(runs, images, tmp_path):
    """`predict FOLDER --csv --ray ADDRESS` on two nodes writes the CSV one process writes: the rows in the same
    order, the same labels, probabilities within 1e-5, the unreadable file's error row in its place (exit 1)."""
    assert runs.exits[1] == 1
    assert _predict(images, runs.weights, tmp_path / "plain.csv") == 1
    _same_predictions(runs.csv, tmp_path / "plain.csv")


@needs_ray
def test_ctrl_c_keeps_the_cache_and_the_same_command_again_sends_only_the_missing_files(runs, images):
    """Ctrl+C once a batch came back: exit 130, and every file went out as an explicit path (the folder's, nothing
    else); the same command again sends only what the cache lacks: not the first batch (4 images), each file at most
    once, the unreadable one again."""
    first, again = runs.sent
    assert runs.exits[0] == 130
    assert sorted(first) == sorted(str(p) for p in images.iterdir())
    assert 1 <= len(again) <= len(first) - 4 and len(set(again)) == len(again)
    assert set(again) <= set(first) and str(images / "broken.jpg") in again


@needs_ray
def test_a_node_lost_mid_job_and_the_command_finishes_with_every_row(runs):
    """The worker node removed once the rerun's first batch came back: the job finishes on the head node (tasks
    retried, the actor restarted) with a row for every file (the CSV's equality: the test above)."""
    rows = _rows(runs.csv)
    assert runs.nodes_left == 0 and len(rows) == IMAGES + 1
    assert sum(bool(r["label_1"]) for r in rows) == IMAGES


@needs_ray
def test_a_plain_embed_after_cluster_runs_computes_nothing(runs, images, tmp_path, monkeypatch, capsys):
    """The cluster filled this machine's embedding cache: a plain `embed` after the --ray runs computes nothing, and
    the features it reads are within 1e-5 of one process's own."""
    embed = ["embed", str(images), "--model", TINY_SPEC, "--weights", str(runs.weights), "--quiet", "--out"]
    assert main([*embed, str(tmp_path / "own.npz")]) == 1
    monkeypatch.setenv("VITSTUDIO_CACHE_DIR", str(runs.cache))
    capsys.readouterr()
    assert main([*embed, str(tmp_path / "after.npz")]) == 1
    assert f"{IMAGES} images embedded (0 computed, {IMAGES} from the cache)" in capsys.readouterr().err
    own, after = np.load(tmp_path / "own.npz"), np.load(tmp_path / "after.npz")
    assert list(own["paths"]) == list(after["paths"])
    np.testing.assert_allclose(after["features"], own["features"], atol=1e-5)


@needs_ray
def test_a_cluster_that_cannot_be_reached_is_one_line_at_once(images, capsys):
    """`--ray HOST:PORT` where nothing listens: exit 2 and one line naming the address, before any model loads
    (Ray's own client retries for minutes)."""
    rc = main(["embed", str(images), "--model", TINY_SPEC, "--ray", "127.0.0.1:1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: cannot reach the Ray cluster at 127.0.0.1:1")


def test_a_batch_delivered_twice_is_appended_once():
    """A batch that comes back again (a retried task) adds nothing: the driver appends each file of a job once,
    counted once (no cluster needed: the stream is fed the same block twice)."""
    from vitstudio.core.folder import ray_jobs

    block = {"path": np.asarray(["a.png", "b.png", "c.jpg"], object), "error": np.asarray(["", "", "bad"], object),
             "ok": np.asarray([True, True, False]), "has_also": np.zeros(3, bool),
             "out_0": np.arange(6, dtype=np.float32).reshape(3, 2)}
    again = dict(block, path=np.asarray(["b.png", "d.png", "c.jpg"], object))

    class Results:
        def iter_batches(self, **_):
            yield from (block, block, again)

    done = list(ray_jobs._streamed(Results(), None))
    assert [d.good for d in done] == [["a.png", "b.png"], [], ["d.png"]]
    assert [d.count for d in done] == [3, 0, 1] and done[2].errors == {}
    np.testing.assert_array_equal(done[2].arrays[0], [[2.0, 3.0]])


def test_without_ray_the_option_says_how_to_install_it_in_one_line(images, tiny_weights, monkeypatch, capsys):
    """`--ray` where Ray is not installed: exit 2 and one line naming the extra to install, no traceback."""
    for name in [m for m in sys.modules if m == "ray" or m.startswith("ray.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    rc = main(["embed", str(images), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]), "--ray"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert err[0].startswith("error: --ray needs Ray") and "pip install 'vitstudio[cluster]'" in err[0]


@needs_ray
def test_the_folder_tab_runs_its_embedding_pass_on_the_cluster_the_setting_names(runs, cluster, images, tmp_path,
                                                                                monkeypatch):
    """The App's setting "Run folder work on: a Ray cluster at ADDRESS" (app.folder_work): the Folder model's
    embedding pass runs there — every file sent to the cluster, progress reported as files done — and shows what one
    process shows (the same paths in order, features within 1e-5, the unreadable file said); Test connection says
    the nodes and CPUs it sees; "this machine" again computes here."""
    import ray.data

    from vitstudio.app.app import App
    from vitstudio.app.jobs import ScriptRunner

    sent = []
    real_items = ray.data.from_items
    monkeypatch.setattr(ray.data, "from_items", lambda items, *a, **k: sent.extend(items) or real_items(items, *a, **k))
    scans = {}
    for where, cache in (("cluster", tmp_path / "on_cluster"), ("here", tmp_path / "here")):
        monkeypatch.setenv("VITSTUDIO_CACHE_DIR", str(cache))
        app = App(ScriptRunner())
        app.load_model(TINY_SPEC, weights=str(runs.weights))
        app.folder_work.state.update(where=where, address=cluster.address)
        progress = []
        app.folder.progress.connect(progress.append)
        app.folder.open_paths([str(images)])
        scans[where] = app.folder
        if where == "cluster":
            assert len(sent) == IMAGES + 1 and progress  # every file went out once; the bar moved
            app.folder_work.test()
            assert app.folder_work.line.startswith("Connected: ") and "CPU(s)" in app.folder_work.line
    assert len(sent) == IMAGES + 1  # "this machine": nothing more sent
    there, here = scans["cluster"], scans["here"]
    assert list(there.results.paths) == list(here.results.paths)
    np.testing.assert_allclose(there.embedded.view(), here.embedded.view(), atol=1e-5)


def test_on_cpus_the_model_actors_use_every_core_and_decoding_one_task_a_node():
    """A CPU-only cluster: the actors' torch threads together take every core of a node (the forward is the costly
    stage), and decoding runs one task per node at a time (each more is a process importing torch); a GPU cluster
    runs an actor per GPU and decodes on as many tasks as its CPUs allow. (No cluster needed: the plan alone.)"""
    from vitstudio.core.folder.ray_jobs import ClusterInfo, _plan

    laptop = _plan(ClusterInfo("local", nodes=1, cpus=8, gpus=0))
    assert laptop["actors"] * laptop["threads"] == 8 and laptop["decoders"] == 1
    two = _plan(ClusterInfo("a:1", nodes=2, cpus=2, gpus=0))  # the module's cluster: 1 CPU a node
    assert (two["actors"], two["threads"], two["decoders"]) == (1, 1, 2)
    wide = _plan(ClusterInfo("a:1", nodes=4, cpus=64, gpus=0))
    assert wide["actors"] // 4 * wide["threads"] == 16 and wide["decoders"] == 4
    gpus = _plan(ClusterInfo("a:1", nodes=2, cpus=32, gpus=4))
    assert (gpus["actors"], gpus["gpus"], gpus["decoders"]) == (4, 1, None)


def test_ray_starts_on_one_thread_that_outlives_the_threads_that_ask(monkeypatch):
    """Ray kills a local instance's processes when the *thread* that started them ends (PR_SET_PDEATHSIG): `connect`
    called from threads that then end (the window's pool retires idle ones) runs Ray's start on the module's own
    thread, the same one each time, alive after they are gone. (No cluster needed: Ray's part is stood in for.)"""
    import threading

    from vitstudio.core.folder import ray_cluster

    seen = []
    monkeypatch.setattr(ray_cluster, "_connect", lambda address: seen.append(threading.current_thread()) or address)
    for address in ("a:1", "b:2"):
        asker = threading.Thread(target=lambda a=address: seen.append(ray_cluster.connect(a)))
        asker.start()
        asker.join()
    keeper = seen[0]
    assert seen == [keeper, "a:1", keeper, "b:2"]
    assert keeper.is_alive() and keeper is not threading.main_thread()


def test_the_command_goes_on_while_ray_starts_and_its_first_pass_waits_for_it(monkeypatch):
    """`on_cluster`: the command's own work (imports, model, scan) runs while the connection is made; `active()`
    waits for it and gives the cluster; outside, nothing is active. A start that fails is raised where the cluster is
    first needed."""
    import threading

    from vitstudio.core.folder import ray_cluster

    gate, info = threading.Event(), ray_cluster.ClusterInfo("auto", 1, 2.0, 0.0)
    monkeypatch.setattr(ray_cluster, "_installed", lambda name: True)
    monkeypatch.setattr(ray_cluster, "_connect", lambda address: info if gate.wait(10) else None)
    with ray_cluster.on_cluster("auto"):
        assert not gate.is_set()  # the body runs before the connection is made
        gate.set()
        assert ray_cluster.active() is info
    assert ray_cluster.active() is None

    def refuse(address):
        raise ray_cluster.RayJobError("the Ray cluster at auto runs another version")

    monkeypatch.setattr(ray_cluster, "_connect", refuse)
    with pytest.raises(ray_cluster.RayJobError, match="another version"), ray_cluster.on_cluster("auto"):
        ray_cluster.active()


@needs_ray
def test_without_an_address_a_running_instance_is_joined_and_a_stale_one_is_not(monkeypatch):
    """`--ray` alone joins the instance `ray start --head` left on this machine (where Ray records it) when it answers;
    one recorded but gone (a crash, no `ray stop`) is passed over at once: Ray's client would retry it for minutes."""
    import socket

    import ray._private.utils as ray_utils

    from vitstudio.core.folder.ray_cluster import _running_here

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        monkeypatch.setattr(ray_utils, "read_ray_address", lambda *a: f"127.0.0.1:{port}")
        assert _running_here() == "auto"
    monkeypatch.setattr(ray_utils, "read_ray_address", lambda *a: f"127.0.0.1:{port}")  # closed now
    assert _running_here() is None
    monkeypatch.setattr(ray_utils, "read_ray_address", lambda *a: None)
    assert _running_here() is None
