"""Benchmark: `predict FOLDER --csv` in one process beside `--ray` (a local instance the command starts; the instance
`ray start --head` keeps running on this machine, which `--ray` alone joins; a two-node cluster on this machine), each
beside the bare script, as whole processes (imports and model load included).

    python tests/benchmarks/folder_cluster.py                     (1k images)
    python tests/benchmarks/folder_cluster.py --sizes 10000 100000

Images and the bare script are folder_scale.py's (generated 32×32 PNGs, the bundled demo model, PIL decode + timm's
eval transform + forward in batches of 256). Every command runs cold (an empty cache folder). Printed per run: wall
seconds and the ratio to the bare script run right before it, the driver's CPU seconds and peak RSS (the command's
own process: rusage), and the peak RSS of the Ray workers it used (model actors, decode workers: sampled every
0.2 s). The CSVs of the --ray runs are checked equal to the single process's (probabilities within 1e-5).

Then the stages on their own, in this process: decode + preprocess (images/s on one core, as the cluster's decode
stage reads: `decode_and_crop` with the model's plain steps), the forward at the memory plan's batch size (images/s
with one torch thread), and the driver's share (appending results to the cache, images/s); and from those a
projection of images/s on N nodes of one GPU each:
    min(N · gpu_rate, N · cores_per_node · decode_rate, append_rate)
assuming a GPU's forward rate (--gpu-rate, default 2,000 images/s: a ViT-B/16 at 224 px in fp16 on one A100-class
GPU), decoding on the node's cores with nothing else on them, and the driver's cache appends as the only serial part
(the network and the object store are not modelled).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from folder_scale import BARE, ROOT, make_images  # noqa: E402


class WorkerPeaks:
    """Peak RSS (MB) of the Ray worker processes under this process and under `extra` pids, by kind."""

    def __init__(self, extra: list[int] = ()) -> None:
        self.extra, self.peaks, self.stop = list(extra), {"actor": 0.0, "decode": 0.0}, threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def _sample(self) -> None:
        import psutil

        roots = [psutil.Process(os.getpid())] + [psutil.Process(p) for p in self.extra if psutil.pid_exists(p)]
        while not self.stop.wait(0.2):
            for root in roots:
                try:
                    children = root.children(recursive=True)
                except psutil.Error:
                    continue
                for child in children:
                    try:
                        name, rss = " ".join(child.cmdline()[:1]), child.memory_info().rss / 2**20
                    except psutil.Error:
                        continue
                    kind = "actor" if "ModelStage" in name else "decode" if name.startswith("ray::") else None
                    if kind is not None:
                        self.peaks[kind] = max(self.peaks[kind], rss)


def timed(argv: list[str], env: dict, workers_under: list[int] = ()) -> dict:
    """wall s, driver cpu s, driver peak RSS MB, workers' peak RSS MB (actor, decode) of one process (its Ray
    workers found under it and under `workers_under`)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=str(ROOT))
    with WorkerPeaks([proc.pid, *workers_under]) as peaks:
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(argv[2:])} failed:\n{err[-3000:]}")
    return {"wall": seconds, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024,
            "actor": peaks.peaks["actor"], "decode": peaks.peaks["decode"]}


def same_csv(a: Path, b: Path) -> bool:
    rows_a, rows_b = list(csv.DictReader(a.open())), list(csv.DictReader(b.open()))
    if [r["path"] for r in rows_a] != [r["path"] for r in rows_b]:
        return False
    return all(abs(float(x[k] or 0) - float(y[k] or 0)) <= 1e-5 and x[k.replace("prob", "label")] ==
               y[k.replace("prob", "label")] for x, y in zip(rows_a, rows_b) for k in x if k.startswith("prob_"))


def cluster(nodes: int):
    """A Ray cluster of `nodes` nodes on 127.0.0.1 sharing this machine's cores."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray.cluster_utils import Cluster

    cpus = max(1, (os.cpu_count() or 2) // nodes)
    made = Cluster(initialize_head=True, connect=False,
                   head_node_args={"num_cpus": cpus, "include_dashboard": False, "node_ip_address": "127.0.0.1"})
    for _ in range(nodes - 1):
        made.add_node(num_cpus=cpus, node_ip_address="127.0.0.1")
    return made


@contextlib.contextmanager
def running_instance(env: dict):
    """`ray start --head` on this machine, as a user keeps one up between commands (`--ray` alone joins it);
    `--block`: it ends with this process's signal. Yields its pid."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    head = subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--port",
                             str(port), "--num-cpus", str(os.cpu_count() or 1), "--include-dashboard", "false",
                             "--node-ip-address", "127.0.0.1", "--disable-usage-stats"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # up once the port answers and Ray recorded it for `ray.init()`
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                if Path("/tmp/ray/ray_current_cluster").read_text().strip().endswith(f":{port}"):
                    break
            time.sleep(0.5)
        else:
            raise SystemExit("ray start --head did not come up in 120 s")
        time.sleep(2)  # its own workers started
        yield head.pid
    finally:
        head.terminate()
        head.wait(60)


RUNS = ("ray local", "ray running", "ray 2 nodes")  # each beside the single process, which always runs


def measure(n: int, work: Path, runs=RUNS) -> dict:
    folder = make_images(work, n)
    env = {**os.environ, "VITSTUDIO_DATA_DIR": str(work / "data"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    env.pop("RAY_ADDRESS", None)
    rows = {}

    def run(name: str, extra: list[str], workers_under: list[int] = ()) -> None:
        cache = work / f"cache-{n}-{name.replace(' ', '-')}"
        shutil.rmtree(cache, ignore_errors=True)
        out = work / f"{name.replace(' ', '-')}-{n}.csv"
        bare = timed([sys.executable, "-c", BARE, str(folder)], env)["wall"]
        figures = timed([sys.executable, "-m", "vitstudio", "predict", str(folder), "--csv", str(out), "--quiet",
                         *extra], {**env, "VITSTUDIO_CACHE_DIR": str(cache)}, workers_under)
        shutil.rmtree(cache, ignore_errors=True)
        figures["bare"] = bare
        figures["equal"] = "" if not extra else ("same CSV" if same_csv(out, work / f"single-{n}.csv")
                                                 else "CSV DIFFERS")
        rows[name] = figures
        single = f" {figures['wall'] / rows['single']['wall']:5.2f}× single" if extra else " " * 14
        print(f"{n:>7} {name:<14} {figures['wall']:7.1f} s{single} {figures['wall'] / bare:5.2f}× bare "
              f"({bare:5.1f} s)  "
              f"driver cpu {figures['cpu']:6.1f} s rss {figures['rss']:6.0f} MB  workers: actor "
              f"{figures['actor']:5.0f} MB decode {figures['decode']:5.0f} MB  {figures['equal']}", flush=True)

    run("single", [])  # always: the CSV the --ray runs are checked against
    if "ray local" in runs:
        run("ray local", ["--ray"])
    if "ray running" in runs:  # `--ray` alone, joining the instance `ray start --head` keeps up on this machine
        with running_instance(env) as head:
            run("ray running", ["--ray"], [head])
    if "ray 2 nodes" in runs:
        made = cluster(2)
        try:
            run("ray 2 nodes", ["--ray", made.address])
        finally:
            made.shutdown()
    return rows


def stage_rates(work: Path, n: int = 512) -> dict:
    """images/s of each stage alone, in this process: decode (one core), forward (one thread), driver appends."""
    import numpy as np
    import torch

    from vitstudio.core.data.preprocess import decode_and_crop
    from vitstudio.core.folder.embedcache import EmbeddingCache
    from vitstudio.core.folder.ray_jobs import plain_preprocess
    from vitstudio.core.inference import folder_batch_size
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.core.models.loading import load_model

    torch.set_num_threads(1)
    loaded = load_model(str(bundled_demo()), device="cpu")
    files = sorted(str(p) for p in make_images(work, 1000).rglob("*.png"))[:n]
    t0 = time.perf_counter()
    prep = plain_preprocess(loaded) or loaded  # as the cluster's decode stage reads
    tensors = [torch.as_tensor(decode_and_crop(prep, f)[2]) for f in files]
    decode = n / (time.perf_counter() - t0)
    batch = folder_batch_size(loaded)
    x = torch.stack(tensors[:batch])
    from vitstudio.core.analysis.embeddings import pooled_features

    pooled_features(loaded, x)  # warm
    t0 = time.perf_counter()
    reps = 3
    for _ in range(reps):
        features, logits = pooled_features(loaded, x)
    forward = reps * len(x) / (time.perf_counter() - t0)
    cache = EmbeddingCache(loaded, work / "stage-cache")
    rows = np.repeat(features, (n + len(x) - 1) // len(x), 0)[:n]
    t0 = time.perf_counter()
    from pathlib import Path as P

    for start in range(0, n, batch):
        cache.append([P(f) for f in files[start:start + batch]], rows[start:start + batch],
                     np.zeros((len(files[start:start + batch]), logits.shape[1]), np.float32))
    append = n / (time.perf_counter() - t0)
    return {"decode": decode, "forward": forward, "append": append}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000])
    parser.add_argument("--gpu-rate", type=float, default=2000.0, help="images/s of one GPU's forward (assumed)")
    parser.add_argument("--cores", type=int, default=8, help="CPU cores per node that decode (assumed)")
    parser.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS), metavar="RUN",
                        help=f"which commands to run (default: all of {', '.join(RUNS)})")
    parser.add_argument("--work", help="where the images and caches go (default: a temporary folder, removed)")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="vitstudio-cluster-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
        results = {n: measure(n, work, args.runs) for n in args.sizes}
        if len(args.sizes) > 1:
            a, b = args.sizes[0], args.sizes[-1]
            for name in results[a]:
                ra, rb = results[a][name]["rss"], results[b][name]["rss"]
                print(f"driver peak RSS {name}: {ra:.0f} MB at {a}, {rb:.0f} MB at {b} "
                      f"({(rb - ra) * 2**20 / (b - a):.0f} bytes per extra file)")
        rates = stage_rates(work)
        print(f"stages alone: decode {rates['decode']:.0f} images/s per core, forward {rates['forward']:.0f} "
              f"images/s (one CPU thread, the demo model), driver appends {rates['append']:.0f} images/s")
        for nodes in (1, 2, 4, 8, 16, 32, 64):
            bound = {"GPUs": nodes * args.gpu_rate, "decode": nodes * args.cores * rates["decode"],
                     "driver": rates["append"]}
            limit = min(bound, key=bound.get)
            print(f"projection {nodes:>3} node(s) × 1 GPU: {bound[limit]:>9,.0f} images/s (bound by {limit})")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
