"""`vitstudio ARGS` in a process of its own, forked from a warm one: the kill and Ctrl+C tests need a real process
to SIGKILL or interrupt, not the ~4 s of importing torch and timm again for each one.

`ForkedCli` starts one server process that imports the command line's heavy modules and then, per request, forks a
child that sets the request's environment, working folder and output files and runs `vitstudio.cli.main(ARGS)` —
the same code `python -m vitstudio ARGS` runs, with Python's usual SIGINT handling (or, with `python`, a module or
code as `python -m`/`-c` runs it: a headless script's own process, its imports already made, and no Qt in it).
The server itself never runs a command (its torch never starts a thread), so every child starts from the same
pristine state; the child's exit status (a negative signal number when it was killed) comes back as from
`subprocess.run`.

`run_ranks(ARGS, world)` forks `world` children at once with the environment torchrun gives its processes (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT): what `torchrun --standalone --nproc-per-node N -m
vitstudio ARGS` runs, without the launcher and N fresh interpreters (~15 s of imports per launch on 2 cores). The
launcher itself is exercised by the finetune tests in test_fast_data.py. `run_together([ARGS, …])` forks one child
per command at once with no such environment: independent commands racing on the same files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


class ForkedCli:
    def __init__(self) -> None:
        self._server = subprocess.Popen([sys.executable, "-m", "tests.core.forked_cli"], cwd=ROOT,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._server.stdout.readline().strip() == "ready"
        self._scratch = Path(tempfile.mkdtemp(prefix="vitstudio-forked-"))
        self._stdout: Path | None = None

    def start(self, args: list[str], env: dict[str, str] | None = None, address_space: int | None = None,
              stdout: Path | None = None) -> int:
        """Fork a child running `vitstudio ARGS` (with `env`, default this process's; its address space capped at
        `address_space` bytes, RLIMIT_AS, where given; its stdout into `stdout` where given, e.g. a FIFO the caller
        reads as `| head` would, and then `wait()` gives '' for it); returns its pid."""
        self._stdout = stdout
        request = dict(args=[str(a) for a in args], env=dict(os.environ if env is None else env), cwd=str(ROOT),
                       stdout=str(stdout or self._scratch / "out"), stderr=str(self._scratch / "err"),
                       address_space=address_space)
        self._server.stdin.write(json.dumps(request) + "\n")
        self._server.stdin.flush()
        return json.loads(self._server.stdout.readline())["pid"]

    def wait(self) -> Result:
        """The started child's exit status (negative: the signal that killed it) and what it printed."""
        code = json.loads(self._server.stdout.readline())["returncode"]
        read = lambda name: (self._scratch / name).read_text(errors="replace")  # noqa: E731
        return Result(code, "" if self._stdout else read("out"), read("err"))

    def run(self, args: list[str], env: dict[str, str] | None = None, address_space: int | None = None) -> Result:
        """Like `subprocess.run([python, -m, vitstudio, *args], env=env, capture_output=True, text=True)`."""
        self.start(args, env, address_space)
        return self.wait()

    def python(self, argv: list[str], env: dict[str, str] | None = None) -> Result:
        """`python -m MODULE ARGS` or `python -c CODE ARGS` (argv without the interpreter) in a forked child: a
        headless script that needs a process of its own and no Qt, without importing torch and timm again."""
        request = dict(python=[str(a) for a in argv], args=[], env=dict(os.environ if env is None else env),
                       cwd=str(ROOT), stdout=str(self._scratch / "out"), stderr=str(self._scratch / "err"))
        self._stdout = None
        self._server.stdin.write(json.dumps(request) + "\n")
        self._server.stdin.flush()
        json.loads(self._server.stdout.readline())  # the child's pid
        return self.wait()

    def run_ranks(self, args: list[str], world: int, env: dict[str, str] | None = None) -> list[Result]:
        """`vitstudio ARGS` in `world` processes joined as torchrun joins them; each rank's Result, rank 0 first."""
        base = dict(os.environ if env is None else env)
        return self._at_once([args] * world, [
            {**base, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
             "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1"} for rank in range(world)])

    def run_together(self, runs: list[list[str]], env: dict[str, str] | None = None) -> list[Result]:
        """Each `vitstudio ARGS` of `runs` in a process of its own, all forked at once and knowing nothing of each
        other (two terminals started together); each one's Result, in order."""
        return self._at_once(runs, [dict(os.environ if env is None else env)] * len(runs))

    def _at_once(self, runs: list[list[str]], envs: list[dict[str, str]]) -> list[Result]:
        requests = [dict(args=[str(a) for a in args], cwd=str(ROOT), stdout=str(self._scratch / f"out{i}"),
                         stderr=str(self._scratch / f"err{i}"), env=env)
                    for i, (args, env) in enumerate(zip(runs, envs, strict=True))]
        self._server.stdin.write(json.dumps(dict(ranks=requests)) + "\n")
        self._server.stdin.flush()
        codes = json.loads(self._server.stdout.readline())["returncodes"]
        read = lambda name: (self._scratch / name).read_text(errors="replace")  # noqa: E731
        return [Result(code, read(f"out{i}"), read(f"err{i}")) for i, code in enumerate(codes)]

    def close(self) -> None:
        import shutil

        self._server.stdin.close()
        self._server.kill()  # it holds nothing to save; its own exit, torch's teardown included, took ~1 s
        self._server.wait(timeout=30)
        shutil.rmtree(self._scratch, ignore_errors=True)


def _child(request: dict) -> None:
    """Runs in the forked child; never returns."""
    import signal
    import traceback

    code = 1
    try:
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        for fd, name in ((1, request["stdout"]), (2, request["stderr"])):
            target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(target, fd)
            os.close(target)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a Ctrl+C is a KeyboardInterrupt, as in a shell
        if request.get("address_space"):  # as a capped `python -m vitstudio` after its imports: they count too
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (request["address_space"],) * 2)
        if request.get("python"):  # `python -m MODULE ARGS` or `python -c CODE ARGS`
            code = _python(request["python"])
        else:
            from vitstudio.cli import main

            sys.argv = ["vitstudio", *request["args"]]
            code = main(request["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - what `python -m vitstudio` would print
        traceback.print_exc()
        code = 1
    finally:
        code = _flushed(code)
        os._exit(code if isinstance(code, int) else 1)


def _python(argv: list[str]) -> int:
    import runpy

    flag, target, *rest = argv
    sys.argv = [target if flag == "-m" else "-c", *rest]
    if flag == "-m":
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102 - the test's own code
    return 0


def _flushed(code):
    """Flush as Python does at exit: a stdout it cannot flush (its reader left) is reported and exits 120."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        print(f"Exception ignored in: {sys.stdout!r}\n{type(exc).__name__}: {exc}", file=sys.stderr)
        code = 120
    sys.stderr.flush()
    return code


def _serve() -> None:
    import signal

    # what every command imports anyway, so that no child pays for it; and what a training run imports as it goes
    # (its TensorBoard writer, the attention probe: ~0.2 s a run; its VM stays within the hostile tests' cap)
    import timm  # noqa: F401
    import torch  # noqa: F401
    import torch.utils.tensorboard  # noqa: F401

    import vitstudio.cli  # noqa: F401
    import vitstudio.core.analysis.attention  # noqa: F401
    import vitstudio.core.analysis.registers  # noqa: F401
    import vitstudio.core.inference  # noqa: F401
    import vitstudio.core.train.engine  # noqa: F401

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server outlives a Ctrl+C meant for a child
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "ranks" in request:
            _serve_ranks(request["ranks"])
            continue
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(json.dumps(dict(pid=pid)), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps(dict(returncode=os.waitstatus_to_exitcode(status))), flush=True)


def _serve_ranks(requests: list[dict]) -> None:
    import socket

    with socket.socket() as probe:  # a free port for rank 0's rendezvous store, as --standalone picks one
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    pids = []
    for request in requests:
        if "RANK" in request["env"]:  # torchrun's ranks; runs started together know nothing of each other
            request["env"]["MASTER_PORT"] = port
        pid = os.fork()
        if pid == 0:
            _child(request)
        pids.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    print(json.dumps(dict(returncodes=codes)), flush=True)


if __name__ == "__main__":
    _serve()
