"""`vitstudio ARGS` in a process of its own, forked from a warm one: the kill and Ctrl+C tests need a real process
to SIGKILL or interrupt, not the ~4 s of importing torch and timm again for each one.

`ForkedCli` starts one server process that imports the command line's heavy modules and then, per request, forks a
child that sets the request's environment, working folder and output files and runs `vitstudio.cli.main(ARGS)` —
the same code `python -m vitstudio ARGS` runs, with Python's usual SIGINT handling. The server itself never runs a
command (its torch never starts a thread), so every child starts from the same pristine state; the child's exit
status (a negative signal number when it was killed) comes back as from `subprocess.run`.
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

    def start(self, args: list[str], env: dict[str, str] | None = None) -> int:
        """Fork a child running `vitstudio ARGS` (with `env`, default this process's); returns its pid."""
        request = dict(args=[str(a) for a in args], env=dict(os.environ if env is None else env), cwd=str(ROOT),
                       stdout=str(self._scratch / "out"), stderr=str(self._scratch / "err"))
        self._server.stdin.write(json.dumps(request) + "\n")
        self._server.stdin.flush()
        return json.loads(self._server.stdout.readline())["pid"]

    def wait(self) -> Result:
        """The started child's exit status (negative: the signal that killed it) and what it printed."""
        code = json.loads(self._server.stdout.readline())["returncode"]
        read = lambda name: (self._scratch / name).read_text(errors="replace")  # noqa: E731
        return Result(code, read("out"), read("err"))

    def run(self, args: list[str], env: dict[str, str] | None = None) -> Result:
        """Like `subprocess.run([python, -m, vitstudio, *args], env=env, capture_output=True, text=True)`."""
        self.start(args, env)
        return self.wait()

    def close(self) -> None:
        import shutil

        self._server.stdin.close()
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
        from vitstudio.cli import main

        sys.argv = ["vitstudio", *request["args"]]
        code = main(request["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - what `python -m vitstudio` would print
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)


def _serve() -> None:
    import signal

    # what every command imports anyway, so that no child pays for it
    import timm  # noqa: F401
    import torch  # noqa: F401

    import vitstudio.cli  # noqa: F401
    import vitstudio.core.inference  # noqa: F401
    import vitstudio.core.train.engine  # noqa: F401

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server outlives a Ctrl+C meant for a child
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(json.dumps(dict(pid=pid)), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps(dict(returncode=os.waitstatus_to_exitcode(status))), flush=True)


if __name__ == "__main__":
    _serve()
