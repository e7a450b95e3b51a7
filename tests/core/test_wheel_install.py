"""`pip install .` (a wheel, not editable) gives a working ViT Studio away from the checkout: both commands, the
bundled demo model and the sample images (issue 29, item 20: the demo lived in the checkout's models/ only), the
demo listed and named as in a checkout (issue 49, item 2), and the build writes nothing into the checkout (item 14)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

INSTALLED = r"""
import contextlib, io, json, runpy, sys
import vitstudio
from vitstudio.core.models.demo import bundled_demo, sample_images


def command(*args):  # `python -m vitstudio ARGS` as -m runs it: the installed package's __main__, its stdout
    out, sys.argv = io.StringIO(), ["vitstudio", *args]
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_module("vitstudio", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            assert exc.code == 0, (args, exc.code)
    return out.getvalue()


samples = [str(p) for p in sample_images()]
found = {"package": vitstudio.__file__, "demo": str(bundled_demo()), "samples": samples,
         "listed": command("models", "--local", "--filter", "digits", "--json"),
         "predicted": command("predict", samples[0], "--model", "digits-vit", "--top", "1")}
print(json.dumps(found))
"""


def _run(args, **kw):
    kw.setdefault("env", {k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    res = subprocess.run(args, capture_output=True, text=True, timeout=240, **kw)
    assert res.returncode == 0, (args, res.stdout[-1500:], res.stderr[-3000:])
    return res


def _build_leftovers() -> dict:
    """What setuptools writes into a tree it builds in: build/ and the egg-info, with each file's time."""
    found = [p for pattern in ("build", "*.egg-info") for p in ROOT.glob(pattern)]
    return {str(f): f.stat().st_mtime_ns for p in found for f in (p, *p.rglob("*"))}


def test_a_wheel_installs_the_commands_the_demo_and_the_samples(tmp_path):
    """A wheel built from the checkout and installed with `--prefix` gives `vitstudio` and `vitstudio-gui`, the bundled
    demo and the six sample images under the prefix's share/vitstudio, found by the package alone (run from another
    folder), `models --local` lists the installed demo and `predict --model digits-vit` predicts a sample's digit (issue
    49 item 2; both through the installed package's `python -m vitstudio`, run by runpy in the one process that finds
    the package, demo and samples: was three processes); building the wheel writes no build/ or egg-info into the
    checkout (item 14). [subprocess]
    """
    import json

    before = _build_leftovers()
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "w"),
          str(ROOT)], cwd=tmp_path)
    assert _build_leftovers() == before  # built out of the tree: no build/, no egg-info written in the checkout
    wheel = next((tmp_path / "w").glob("vitstudio-*.whl"))
    prefix = tmp_path / "prefix"
    # --ignore-installed: the checkout's own (editable) vitstudio of the same version must not make pip skip it
    _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q", "--prefix",
          str(prefix), str(wheel)], cwd=tmp_path)
    site = next(prefix.glob("lib/python*/site-packages"))
    assert (prefix / "bin" / "vitstudio").is_file() and (prefix / "bin" / "vitstudio-gui").is_file()
    elsewhere = tmp_path / "elsewhere"  # no checkout around: the installed package alone
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"}
    # one process for the installed package (importing torch again per command adds nothing): where it finds
    # itself, the demo and the samples, then `models` and `predict` run through its own `python -m vitstudio`
    found = json.loads(_run([sys.executable, "-c", INSTALLED], cwd=elsewhere, env=env).stdout.strip().splitlines()[-1])
    assert Path(found["package"]).is_relative_to(site), found
    assert Path(found["demo"]).is_relative_to(prefix / "share" / "vitstudio"), found
    assert len(found["samples"]) == 6 and all(Path(p).is_relative_to(prefix) for p in found["samples"]), found
    assert [json.loads(line)["name"] for line in found["listed"].splitlines()] == [found["demo"]]
    digit = Path(found["samples"][0]).name.split("-")[1]  # digit-0-0010.png is a 0
    predicted = found["predicted"].splitlines()
    top = next(line.split() for line in predicted if line.strip().endswith("]"))  # "92.45%  0  [0]"
    assert top[1] == digit, found["predicted"]
