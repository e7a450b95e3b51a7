"""Check by hand: the `--ray` driver SIGKILLed mid-job, again and again, then the same command once more.

    python tests/benchmarks/folder_cluster_kill.py [--images 3000] [--kills 3]

A two-node cluster on this machine (`ray.cluster_utils.Cluster`, 1 CPU a node, loopback only) and folder_scale.py's
generated images. `embed FOLDER --ray ADDRESS` is started and SIGKILLed once the embedding cache has grown by
~200 KB (a few batches back from the cluster), `--kills` times; then the same command runs to its end, then a plain
`embed`, then one process on a cold cache. Printed: the cache's size after each kill, what the rerun computed and
took from the cache (it must compute only what the kills left out), that the plain run after computes nothing, and
the largest difference between the features and one process's (0 expected: the same model, the same inputs).
Not in the suite: each kill is a fresh driver process and a cluster job (~20 CPU-s on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from folder_scale import ROOT, make_images  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()
    os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
    from ray.cluster_utils import Cluster

    work = Path(tempfile.mkdtemp(prefix="vitstudio-kill-"))
    folder = make_images(work, args.images)
    made = Cluster(initialize_head=True, connect=False,
                   head_node_args={"num_cpus": 1, "include_dashboard": False, "node_ip_address": "127.0.0.1"})
    made.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    env = {**os.environ, "VITSTUDIO_CACHE_DIR": str(work / "cache"), "VITSTUDIO_DATA_DIR": str(work / "data"),
           "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}

    def embed(out: str, *extra: str, cache: str = "cache"):
        return [sys.executable, "-m", "vitstudio", "embed", str(folder), "--out", str(work / out), "--batch-size",
                "64", *extra], {**env, "VITSTUDIO_CACHE_DIR": str(work / cache)}

    def cache_bytes() -> int:
        return sum(p.stat().st_size for p in (work / "cache").rglob("*") if p.is_file())

    def said(command) -> str:
        done = subprocess.run(command[0], env=command[1], capture_output=True, text=True)
        return f"exit {done.returncode}: " + " ".join(line for line in done.stderr.splitlines() if "embedded" in line)

    try:
        (work / "cache").mkdir()
        for kill in range(args.kills):
            command, environment = embed("ray.npz", "--ray", made.address)
            before, started = cache_bytes(), time.time()
            process = subprocess.Popen(command, env=environment, stderr=subprocess.DEVNULL)
            while process.poll() is None and cache_bytes() <= before + 200_000 and time.time() - started < 300:
                time.sleep(0.05)
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            print(f"kill {kill + 1}: SIGKILL after {time.time() - started:.1f} s, cache {before:,} -> "
                  f"{cache_bytes():,} bytes", flush=True)
        print("the same command again:", said(embed("ray.npz", "--ray", made.address)), flush=True)
        print("a plain embed after:", said(embed("plain.npz")), flush=True)
        print("one process, a cold cache:", said(embed("single.npz", cache="cache-single")), flush=True)
        ray_out, single = np.load(work / "ray.npz"), np.load(work / "single.npz")
        print(f"paths equal: {list(ray_out['paths']) == list(single['paths'])}, features' largest difference: "
              f"{float(np.abs(ray_out['features'] - single['features']).max()):.2g}")
    finally:
        made.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
