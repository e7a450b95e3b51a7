"""Issue 53's hostile table, compact, on today's code: tried / clean / failed per category. A case is clean when the
command ends as it must (a refusal: its exit code and exactly one `error:` line; an input it must take: exit 0) with no
traceback, on strict UTF-8 streams (a desktop locale's). The hostile inputs are the tests' generators, imported.

    .venv/bin/python tests/benchmarks/hostile_table.py          (~1 min on 2 busy cores; kills run in subprocesses)
    .venv/bin/python tests/benchmarks/hostile_table.py onto outputs      (only these steps: outputs onto inputs, kills
                                                                          over earlier outputs and races, ~2 min)
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from tests.conftest import TINY_SPEC, make_tiny_vit  # noqa: E402
from tests.core import test_concepts_files as concepts_files  # noqa: E402
from tests.core import test_hostile_adapters as hostile_adapters  # noqa: E402
from tests.core.synthetic_data import make_dataset  # noqa: E402
from tests.core.test_non_utf8_classes import NAME, non_utf8_dataset  # noqa: E402
from tests.core.test_output_folders import segment_data, snapshot  # noqa: E402
from tests.core.test_seam_bad_inputs import MODEL_COMMANDS, ONTO_INPUTS, _argv, filled, onto_inputs_tree  # noqa: E402

TALLY: dict[str, Counter] = {}
FAILED: list[str] = []


def cli(args: list[str]) -> tuple[object, str, str]:
    """(exit code, stdout, stderr) of `vitstudio ARGS` in-process on strict UTF-8 streams; 'traceback' if it raised."""
    from vitstudio.cli import main

    out, err = (io.TextIOWrapper(io.BytesIO(), "utf-8", "strict", write_through=True) for _ in range(2))
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except BaseException:  # noqa: BLE001 - the table counts it
            code = "traceback"
            err.write(traceback.format_exc().encode("ascii", "backslashreplace").decode())
    return code, out.buffer.getvalue().decode("utf-8"), err.buffer.getvalue().decode("utf-8")


def record(category: str, case: str, result, expected: int, says: str = "") -> None:
    code, out, err = result
    lines = [line for line in err.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    clean = code == expected and "Traceback" not in out + err and (
        expected == 0 or (errors == lines[-1:] and says in errors[0]))
    TALLY.setdefault(category, Counter())["clean" if clean else "failed"] += 1
    if not clean:
        FAILED.append(f"{category} | {case}: exit {code}; {err.strip()[-300:]!r}")


def adapters(root: Path) -> None:
    class Factory:
        def mktemp(self, name):
            (root / name).mkdir()
            return root / name

    good, image = hostile_adapters.adapter.__wrapped__(Factory())
    make_dataset(root / "data", per_class=2)
    for spoil, (spoiler, says) in hostile_adapters.SPOILS.items():
        folder = shutil.copytree(good, root / spoil / "adapter")
        spoiler(folder)
        category = "malicious adapter files" if spoil in ("pickled-bin",) else "hostile adapter folders"
        for command in MODEL_COMMANDS:
            shutil.rmtree(root / "out", ignore_errors=True)
            record(category, f"{spoil} × {command}", cli(_argv(command, str(folder), image, root / "data",
                                                                root / "out")), 2, says)
    legacy = root / "legacy.pth"
    torch.save({"head.bias": torch.zeros(5), "x": hostile_adapters._RunsCode(root / "ran")}, legacy,
               _use_new_zipfile_serialization=False)
    for command in ("predict", "card", "embed"):
        args = _argv(command, TINY_SPEC, image, root / "data", root / "out")
        record("malicious adapter files", f"legacy pickle × {command}", cli([*args, "--weights", legacy]), 2,
               "contains pickled Python objects")
    assert not (root / "ran").exists() and not (root / "pickled-bin" / "ran").exists(), "a payload ran"


def concepts(root: Path, weights: Path) -> None:
    from PIL import Image

    from vitstudio.core.concepts.concepts_file import save_concepts
    from vitstudio.core.folder.embedcache import model_fingerprint
    from vitstudio.core.models.loading import load_model

    model = ["--model", TINY_SPEC, "--weights", str(weights)]
    good = concepts_files.made(layer=1)
    good.meta["fingerprint"] = model_fingerprint(load_model(TINY_SPEC, str(weights), "cpu"))
    save_concepts(good, root / "good")
    image = root / "a.png"
    Image.new("RGB", (32, 32), (200, 30, 90)).save(image)
    for spoil, (spoiler, says) in concepts_files.SPOILS.items():
        concepts_files._pair(root / spoil, *concepts_files._spoiled(root / "good", spoiler))
        for args in (["predict", image, "--quiet"],
                     ["explain", image, "--method", "concept", "--concept", "0", "--out", root / "m.npy"]):
            record("hostile concepts files", f"{spoil} × {args[0]}", cli([*args, *model, "--concepts", root / spoil]),
                   2, says)
    for scale in ("3=nan", "3=inf"):
        record("hostile concepts files", f"--scale {scale}", cli(["predict", image, *model, "--concepts",
                                                                  root / "good", "--scale", scale]), 2, "finite")
    for out, says in (("", "names no file"), (str(root / "dir"), "is a folder")):
        (root / "dir.safetensors").mkdir(exist_ok=True)
        record("concepts outputs", f"--out {out!r}", cli(["concepts", root, *model, "--size", "4", "--k", "2",
                                                          "--out", out, "--quiet"]), 2, says)
    torch.save([1, 2, 3], root / "p.safetensors.partial")
    record("concepts outputs", ".partial a list", cli(["concepts", root, *model, "--size", "4", "--k", "2", "--out",
                                                        root / "p", "--quiet"]), 0)


def full_disks(root: Path, weights: Path) -> None:
    from vitstudio.core import files

    data = make_dataset(root / "data", per_class=3)
    points = {"concepts": ["cache-append", "before-rename-c.safetensors.partial", "before-rename-c.safetensors",
                           "before-rename-c.json"], "embed": ["cache-append"], "layers": ["cache-append"]}
    for command, where in points.items():
        for point in where:
            for n in (1, 2):  # the first write there, then a later one (the disk fills further on)
                files._passes.clear()
                os.environ["VITSTUDIO_FULL_AT"] = f"{point}:{n}"
                os.environ["VITSTUDIO_CACHE_DIR"] = str(root / f"cache-{command}-{point}-{n}")
                extra = {"concepts": ["--size", "4", "--k", "2", "--epochs", "2", "--out", root / "c", "--quiet"],
                         "embed": ["--quiet", "--batch-size", "2"], "layers": ["--folds", "2", "--batch-size", "2"]}
                result = cli([command, data, "--model", TINY_SPEC, "--weights", weights, *extra[command]])
                os.environ.pop("VITSTUDIO_FULL_AT")
                if result[0] == 0:  # the point is passed fewer than n times by this command: not a case
                    continue
                record("full disks", f"{command} at {point}:{n}", result, 1, "could not write ")
                record("full disks, then resumed", f"{command} at {point}:{n}",
                       cli([command, data, "--model", TINY_SPEC, "--weights", weights, *extra[command]]), 0)


def non_utf8(root: Path) -> None:
    data = non_utf8_dataset(root / "data", per_class=4)
    run = root / "run"
    record("non-UTF-8 class folders", "finetune", cli(["finetune", data, "--model", TINY_SPEC, "--out", run,
                                                        "--epochs", "1", "--device", "cpu", "--quiet"]), 0)
    image = data / NAME / "000.png"
    cases = {"predict": ["predict", image, "--quiet"], "predict --json": ["predict", image, "--json", "--quiet"],
             "predict --csv": ["predict", data, "--csv", root / "p.csv", "--quiet"], "eval": ["eval", data],
             "audit": ["audit", data, "--quiet"], "audit --json": ["audit", data, "--json", "--quiet"],
             "layers": ["layers", data, "--folds", "2"], "layers --json": ["layers", data, "--folds", "2", "--json"],
             "sort": ["sort", data, "--out", root / "s", "--quiet"], "suggest": ["suggest", data, "--quiet"],
             "embed": ["embed", data, "--quiet"], "concepts": ["concepts", data, "--size", "4", "--k", "2", "--out",
                                                               root / "c", "--quiet"],
             "explain --json": ["explain", image, "--method", "rollout", "--json"], "card": ["card"]}
    for case, args in cases.items():
        record("non-UTF-8 class folders", case, cli([*args, "--model", run]), 0)


def kills(root: Path, weights: Path) -> None:
    """`concepts` killed (SIGKILL) at each of its atomic writes, the leftovers aged past a minute, then run again:
    clean when the rerun ends with a pair that loads and no temp file of ours is left."""
    from vitstudio.core.concepts.concepts_file import load_concepts

    data = make_dataset(root / "data", per_class=3)
    for point in ("before-rename-c.safetensors.partial", "before-rename-c.safetensors", "before-rename-c.json"):
        out = root / point / "c"
        out.parent.mkdir()
        args = [sys.executable, "-m", "vitstudio", "concepts", str(data), "--model", TINY_SPEC, "--weights",
                str(weights), "--size", "4", "--k", "2", "--epochs", "1", "--out", str(out), "--quiet"]
        env = dict(os.environ, VITSTUDIO_DIE_AT=point)
        killed = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True)
        old = time.time() - 120
        for leftover in out.parent.glob(".*.tmp"):
            os.utime(leftover, (old, old))
        again = cli(args[3:])
        left = sorted(p.name for p in out.parent.glob(".*.tmp"))
        ok = killed.returncode == -9 and again[0] == 0 and not left and load_concepts(out).size == 4
        TALLY.setdefault("kills (concepts)", Counter())["clean" if ok else "failed"] += 1
        if not ok:
            FAILED.append(f"kills | {point}: killed {killed.returncode}, rerun {again[0]}, left {left}")


def onto_inputs(root: Path) -> None:
    """Each outputs-onto-inputs cell of test_seam_bad_inputs: clean when refused in one line and no byte under its
    folder changed."""
    for i, (case, (argv, says)) in enumerate(ONTO_INPUTS.items()):
        fill = onto_inputs_tree(root / str(i))
        before = {p: p.read_bytes() for p in sorted((root / str(i)).rglob("*")) if p.is_file()}
        model = [] if argv[0] == "views" else ["--model", TINY_SPEC]
        result = cli([*filled(argv, fill), *model])
        if {p: p.read_bytes() for p in sorted((root / str(i)).rglob("*")) if p.is_file()} != before:
            result = ("wrote onto an input", *result[1:])
        record("outputs onto inputs", case, result, 2, says.format(**fill))


def _started(out: Path, since: float, timeout: float = 60.0) -> bool:
    """Wait until the output starts changing: a file in the folder being built beside OUT, or a file of OUT written
    after `since` (where it is written in place)."""
    end = time.time() + timeout
    while time.time() < end:
        building = [p for p in out.parent.glob(f".{out.name}.partial-*") if any(p.iterdir())]
        if building or (out.is_dir() and any(p.stat().st_mtime > since for p in out.iterdir())):
            return True
        time.sleep(0.005)
    return False


def _over_earlier(forked, args: list[str], out: Path, earlier_copy: Path, delay: float | None) -> tuple[int, float]:
    """`args` started over a fresh copy of the earlier output and SIGKILLed `delay` s after its output started
    changing (None: left to end); (its exit status, seconds from that start to its end or kill)."""
    import signal

    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(earlier_copy, out)
    since = time.time()
    time.sleep(0.01)  # the copy's mtimes are before `since`
    pid = forked.start(args)
    started = time.time() if _started(out, since) else None
    if delay is not None:
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    code = forked.wait().returncode
    return code, time.time() - (started or since)


def _timed_kills(category: str, forked, args: list[str], out: Path, earlier_copy: Path, whole,
                 kills: int = 12) -> None:
    """`args` run once to the end over the earlier output (how long it writes, from the moment its output starts
    changing), then `kills` times SIGKILLed at instants spread evenly over that span: clean when OUT is then whole
    (`whole(out)`: the earlier output or the new one, not a mix)."""
    _, span = _over_earlier(forked, args, out, earlier_copy, None)
    KILLED.setdefault(category, Counter())[f"over {span:.2f} s"] += 1
    for k in range(kills):
        delay = k * span / kills
        code, _ = _over_earlier(forked, args, out, earlier_copy, delay)
        verdict = whole(out)
        TALLY.setdefault(category, Counter())["clean" if verdict else "failed"] += 1
        KILLED.setdefault(category, Counter())["killed" if code == -9 else f"ended {code}"] += 1
        if not verdict:
            FAILED.append(f"{category} | kill {k} at +{delay:.2f} s of {span:.2f} s (exit {code}): a mixed folder")


def _races(category: str, forked, runs: list[list[str]], out: Path, whole, rounds: int) -> None:
    """The runs started together into one OUT, `rounds` times: clean when each ends 0 or is refused in one line
    saying another run is writing, and OUT is whole."""
    for r in range(rounds):
        shutil.rmtree(out, ignore_errors=True)
        results = forked.run_together(runs)
        refused = [x for x in results if x.returncode == 2 and "being written by another run" in x.stderr]
        ok = all(x.returncode == 0 or x in refused for x in results) and whole(out)
        TALLY.setdefault(category, Counter())["clean" if ok else "failed"] += 1
        KILLED.setdefault(category, Counter())[f"{len(refused)} refused"] += 1
        if not ok:
            FAILED.append(f"{category} | round {r}: exits {[x.returncode for x in results]}, whole {whole(out)}")


def output_kills(root: Path, weights: Path) -> None:
    """`segment --out` and `teach --export` over an earlier output, killed at timed instants after the output starts
    changing, and two runs into one folder at once."""
    from tests.core.forked_cli import ForkedCli

    forked = ForkedCli()
    try:
        _segment_kills(root / "segment", weights, forked)
        _export_kills(root / "teach", weights, forked)
    finally:
        forked.close()


def _segment_kills(root: Path, weights: Path, forked) -> None:
    images, a, b = segment_data(root, n=400)
    base = ["segment", images, "--model", TINY_SPEC, "--weights", weights, "--csv", "--coco", "--quiet"]
    references = {}
    for name, painted in (("a", a), ("b", b)):
        assert cli([*base, "--masks", painted, "--out", root / name])[0] == 0
        references[name] = snapshot(root / name, manifest=False)

    def whole(out: Path) -> bool:
        return out.is_dir() and snapshot(out, manifest=False) in references.values()

    out = root / "out"
    _timed_kills("kills over an earlier segment", forked, [*base, "--masks", b, "--out", out], out,
                 root / "a", whole)
    assert cli([*base, "--masks", b, "--out", out])[0] == 0
    left = [p.name for p in root.iterdir() if p.name.startswith(".out.")]
    ok = snapshot(out, manifest=False) == references["b"] and not left
    TALLY.setdefault("kills over an earlier segment", Counter())["clean" if ok else "failed"] += 1
    if not ok:
        FAILED.append(f"kills over an earlier segment | the rerun: left {left}")
    _races("two segments into one folder", forked, [[*base, "--masks", p, "--out", out] for p in (a, b)], out,
           whole, 10)


def _export_kills(root: Path, weights: Path, forked) -> None:
    projects = {"p": make_dataset(root / "p", per_class=4, classes={"ants": (200, 40, 40), "bees": (40, 200, 40)}),
                "q": make_dataset(root / "q", per_class=4, seed=1,
                                  classes={"cats": (40, 40, 200), "dogs": (200, 200, 40), "owls": (90, 90, 90)})}
    model = ["--model", TINY_SPEC, "--weights", weights, "--quiet"]
    references = {}
    for name, project in projects.items():
        assert cli(["teach", project, "--export", root / f"ref-{name}", *model])[0] == 0
        references[name] = _export_files(root / f"ref-{name}")

    def whole(out: Path) -> bool:
        if not out.is_dir():
            return False
        check = json.loads((out / "check.json").read_text())
        return check["folder"] == str(out) and _export_files(out) in references.values()

    out = root / "out"
    shutil.copytree(root / "ref-p", root / "earlier")
    (root / "earlier" / "check.json").write_text((root / "earlier" / "check.json").read_text().replace(
        str(root / "ref-p"), str(out)))
    _timed_kills("kills over an earlier export", forked, ["teach", projects["q"], "--export", out, *model], out,
                 root / "earlier", whole)
    _races("two exports into one folder", forked, [["teach", projects[n], "--export", out, *model] for n in "pq"],
           out, whole, 5)


def _export_files(folder: Path) -> dict[str, bytes]:
    """An export's artefacts, less what names the save rather than the model: check.json and the manifest name the
    folder and the run (compared apart), a model folder's pair token is new with each save."""
    from safetensors.torch import load

    from vitstudio.core.models.checkpoints import PAIR_KEY

    files = {k: v for k, v in snapshot(folder, manifest=False).items() if k != "check.json"}
    for name, data in files.items():
        if name.endswith(".safetensors"):
            files[name] = b"".join(k.encode() + t.numpy().tobytes() for k, t in sorted(load(data).items()))
        elif name.endswith("config.json"):
            config = json.loads(data)
            config.get("vitstudio", {}).pop(PAIR_KEY, None)
            files[name] = json.dumps(config, sort_keys=True).encode()
    return files


KILLED: dict[str, Counter] = {}


def _within(seconds: int, args: list) -> tuple[object, str, str]:
    """cli(args), stopped after `seconds` (a read of a FIFO blocks for ever): exit 'hung' then."""
    import signal

    class Hung(BaseException):
        pass

    def stop(*_):
        raise Hung

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        result = cli(args)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return ("hung", *result[1:]) if "Hung" in result[2] else result


def hostile_records(root: Path) -> None:
    """Issue 64's items 4-8 on the command line: hostile tags.json/views.json (FIFOs, devices, over the size limit,
    wrong shapes: set aside in one warning, exit 0), saved views of the wrong shape, a 10,000-character view name,
    hostile painted masks, hostile Teach settings, escapes in class names, a labels file of many missing rows."""
    import re

    from tests.core import test_hostile_records as bad

    data, records = bad.records_folder(root / "records")
    for name, argv in bad.RECORD_COMMANDS.items():
        for spoil, (spoiler, says) in bad.RECORD_SPOILS.items():
            for old in records.glob(f"{name}*"):
                old.unlink()
            spoiler(records / name)
            result = _within(30, [a.replace("DATA", str(data)) for a in argv])
            warned = [line for line in result[2].splitlines() if line.startswith("warning: ")]
            if not (len(warned) == 1 and says in warned[0] and f"set aside as {name}" in warned[0]):
                result = (f"{result[0]}, not one warning", *result[1:])
            record("hostile tags/views records", f"{spoil} as {name}", result, 0)
    for spoil, (rule, says) in bad.VIEW_SPOILS.items():
        (records / "views.json").write_text(json.dumps({"views": {"bad": [rule]}}))
        listed = cli(["views", data, "--json"])
        record("views of the wrong shape", f"{spoil}: views --json", listed if "left out" in listed[2] else
               ("silent", *listed[1:]), 0)
        record("views of the wrong shape", f"{spoil}: views --export", cli(["views", data, "--export", "bad",
                                                                           "--labels-csv", root / "l.csv"]), 2, says)
    record("views of the wrong shape", "a 10,000-character name", cli(["views", data, "--save", "x" * 10_000,
                                                                       "--path", "*"]), 2, "at most 200 characters")
    for i, (spoil, (spoiler, says)) in enumerate(bad.MASK_SPOILS.items()):
        masks = root / f"masks-{i}"
        masks.mkdir()
        bad._mask(masks / "0.png")
        spoiler(masks / "1.png")
        record("hostile painted masks", spoil, _within(60, ["segment", data, "--masks", masks, "--model", TINY_SPEC,
                                                            "--out", root / "out", "--quiet"]), 2, says)
    record("hostile painted masks", "segment /no/such/folder", cli(["segment", root / "no" / "such", "--masks",
                                                                     root / "masks-0", "--model", TINY_SPEC, "--out",
                                                                     root / "out"]), 2, "is not a folder")
    names = make_dataset(root / "names", per_class=3, classes=dict(zip(bad.ESCAPED, [(220, 40, 40), (40, 200, 60),
                                                                                      (40, 60, 220)])))
    (root / "afile").write_text("a file")
    for case, argv, says in (
            ("segment --out afile/sub", ["segment", data, "--masks", root / "masks-0", "--out", root / "afile" / "s"],
             "is a file, not a folder"),
            ("teach --export afile/sub", ["teach", root / "names", "--export", root / "afile" / "s"],
             "is a file, not a folder"),
            ("teach --export /proc/self/x", ["teach", root / "names", "--export", "/proc/self/x"], "could not write")):
        record("outputs where no folder can be made", case, cli([*argv, "--model", TINY_SPEC, "--quiet"]), 2, says)
    from vitstudio.core.teach.project import SETTINGS, create_project

    project = create_project(root / "p", ["ants", "bees"]).root
    make_dataset(project / "images", per_class=2, classes={"ants": (200, 40, 40), "bees": (40, 200, 40)})
    for settings, says in bad.SETTINGS_SPOILS.items():
        (project / SETTINGS).write_text(settings)
        record("hostile Teach settings", settings, cli(["teach", project, "--quiet"]), 2, says)
    raw = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
    for command in (["teach", names], ["audit", names], ["layers", names, "--folds", "2"], ["suggest", names],
                    ["sort", names, "--out", root / "sorted", "--dry-run"]):
        result = cli([*command, "--model", TINY_SPEC])
        taken = result[0] in (0, 1) and not raw.search(result[1] + result[2])  # 1: some images left out
        record("escapes in class names", command[0], (0 if taken else f"{result[0]}, raw", *result[1:]), 0)
    rows = [f"{p},{p.parent.name}" for p in sorted((root / "names").rglob("*.png"))]
    (root / "labels.csv").write_text("path,label\n" + "\n".join([*rows, *(f"gone/{i}.png,x" for i in range(10_000))]))
    result = cli(["suggest", names, "--labels", root / "labels.csv", "--model", TINY_SPEC, "--quiet"])
    lines = [line for line in result[2].splitlines() if line.startswith("skipped ")]
    os.mkfifo(root / "fifo.csv")
    os.symlink("/dev/zero", root / "zero.csv")
    for name in ("fifo.csv", "zero.csv"):
        record("hostile labels files", f"suggest --labels {name}", _within(30, [
            "suggest", names, "--labels", root / name, "--model", TINY_SPEC, "--quiet"]), 2, "is not a regular file")
    counted = result[0] == 1 and len(lines) == 21 and re.fullmatch(r"skipped [\d,]+ more \(file not found\)", lines[-1])
    record("a labels file of 10,000 bad rows", "suggest", (0 if counted else f"{result[0]}, {len(lines)} lines",
                                                            *result[1:]), 0)


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in ("VITSTUDIO_CACHE_DIR", "VITSTUDIO_DATA_DIR", "VITSTUDIO_MODELS_DIR"):
            os.environ[name] = str(root / name)
        os.environ["HF_HUB_OFFLINE"] = "1"
        weights = root / "tiny.safetensors"
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in make_tiny_vit().state_dict().items()}, str(weights))
        start = time.time()
        chosen = set(sys.argv[1:])  # step names to run (default: every step)
        for name, step in (("adapters", lambda d: adapters(d)), ("concepts", lambda d: concepts(d, weights)),
                           ("full", lambda d: full_disks(d, weights)), ("utf8", non_utf8),
                           ("kills", lambda d: kills(d, weights)), ("onto", onto_inputs),
                           ("outputs", lambda d: output_kills(d, weights)), ("records", hostile_records)):
            if chosen and name not in chosen:
                continue
            (root / name).mkdir()
            step(root / name)
        print(f"{'category':30s} {'tried':>6s} {'clean':>6s} {'failed':>7s}")
        for category, tally in TALLY.items():
            print(f"{category:30s} {sum(tally.values()):6d} {tally['clean']:6d} {tally['failed']:7d}")
        total = sum((t for t in TALLY.values()), Counter())
        print(f"{'all':30s} {sum(total.values()):6d} {total['clean']:6d} {total['failed']:7d}   "
              f"({time.time() - start:.0f} s)")
        for line in FAILED:
            print("FAILED", line)
        for category, outcomes in KILLED.items():
            print(f"{category}: {dict(outcomes)}")
        print(json.dumps({c: dict(t) for c, t in TALLY.items()}))


if __name__ == "__main__":
    main()
