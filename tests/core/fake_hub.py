"""A minimal Hugging Face hub on 127.0.0.1, enough for huggingface_hub's HEAD + GET of one file.

Run as a script by test_hub_online.py in a fresh interpreter (huggingface_hub reads HF_ENDPOINT at import):
    python fake_hub.py MODE [MODE …]   with MODE = safetensors | bin-only | broken
For each mode, in turn and each with a cache of its own (one interpreter: torch and timm load once), it serves
random weights of timm's own test ViT (test_vit: 0.4 M parameters at 160 px, built in ~10 ms where ViT-Ti's 5.7 M
took ~0.7 s of weight init per build), loads "test_vit.r160_in1k" (a pretrained name timm resolves to the hub repo
timm/test_vit.r160_in1k) through vitstudio.core.models.loading with a progress callback, and prints one JSON line
with what happened.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import socket
import sys
import tempfile
import threading
import time

MODES = sys.argv[1:]
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
PORT = sock.getsockname()[1]
sock.close()
os.environ["HF_ENDPOINT"] = f"http://127.0.0.1:{PORT}"
os.environ.pop("HF_HUB_OFFLINE", None)
os.environ["HF_HUB_CACHE"] = tempfile.mkdtemp()

import timm  # noqa: E402
import torch  # noqa: E402
from huggingface_hub import constants, file_download  # noqa: E402
from safetensors.torch import save as save_safetensors  # noqa: E402


class _NoBackOff:
    """huggingface_hub's `time`, less the second it sleeps before each resume of a dropped download (its courtesy to
    a real hub: 5 s of the "broken" mode's 5.2 s here). The resumes themselves still happen, one after another."""

    sleep = staticmethod(lambda seconds: None)

    def __getattr__(self, name):
        return getattr(time, name)


file_download.time = _NoBackOff()
# read at each download: the 1.5 MB of weights arrive in three chunks, so progress moves before it reaches 100 %
constants.DOWNLOAD_CHUNK_SIZE = 512 * 1024

torch.manual_seed(0)
MODEL = timm.create_model("test_vit").eval()
MODE = BLOB = NAME = ETAG = None
REQUESTS = []


def serve(mode: str) -> None:
    """What the hub serves from now on, and a fresh cache to download into."""
    global MODE, BLOB, NAME, ETAG
    MODE = mode
    if mode == "bin-only":
        buffer = io.BytesIO()
        torch.save(MODEL.state_dict(), buffer)
        BLOB, NAME = buffer.getvalue(), "pytorch_model.bin"
    else:
        BLOB, NAME = save_safetensors(MODEL.state_dict()), "model.safetensors"
    ETAG = hashlib.sha256(BLOB).hexdigest()
    REQUESTS.clear()
    constants.HF_HUB_CACHE = tempfile.mkdtemp()  # read at each download: every mode starts with nothing cached


class Hub(http.server.BaseHTTPRequestHandler):
    def _ok(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(BLOB)))
        self.send_header("ETag", f'"{ETAG}"')
        self.send_header("X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567")
        self.end_headers()

    def _missing(self):
        self.send_response(404)
        self.send_header("X-Error-Code", "EntryNotFound")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        REQUESTS.append(("HEAD", self.path))
        self._ok() if self.path.endswith("/" + NAME) else self._missing()

    def do_GET(self):
        REQUESTS.append(("GET", self.path))
        if not self.path.endswith("/" + NAME):
            return self._missing()
        self._ok()
        if MODE == "broken":
            self.wfile.write(BLOB[: len(BLOB) // 3])  # the connection drops mid-download
            self.wfile.flush()
            self.connection.close()
            return
        self.wfile.write(BLOB)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Hub)
threading.Thread(target=server.serve_forever, daemon=True).start()

from vitstudio.core.models.loading import ModelLoadError, load_model  # noqa: E402


def load(mode: str) -> dict:
    serve(mode)
    progress = []
    result = {"mode": mode}
    try:
        loaded = load_model("test_vit.r160_in1k",
                            progress=lambda done, total, message: progress.append([done, total, message]))
        x = torch.randn(1, 3, 160, 160)
        with torch.no_grad():
            same = bool(torch.allclose(loaded.model(x), MODEL(x), atol=1e-5))
        result.update(ok=True, same_logits=same, source=loaded.weights_source)
    except ModelLoadError as exc:
        result.update(ok=False, error=str(exc))
    result.update(progress=progress[-1] if progress else None, updates=len(progress), size=len(BLOB),
                  requests=[f"{m} {p.split('/')[-1]}" for m, p in REQUESTS if "resolve" in p])
    return result


for each in MODES:
    print(json.dumps(load(each)), flush=True)
server.shutdown()
