"""Getting pretrained weights from the Hugging Face hub, failing fast and clearly when offline.

timm downloads through huggingface_hub, whose retries take ~47 s without a network. We look in the cache
first, probe the network once with a short timeout, and only then download (with progress we can show).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from urllib.parse import urlparse

from vitstudio.core.errors import UserFacingError
from vitstudio.core.models.catalog import cached_hub_file, models_dir

ProgressFn = Callable[[int, int, str], None]  # (bytes done, bytes total or 0, message)


class WeightsUnavailable(UserFacingError):
    """Weights are neither cached nor downloadable right now; the message says what to do."""


def offline_flag() -> bool:
    from huggingface_hub import constants

    value = os.environ.get("HF_HUB_OFFLINE", "")
    return constants.HF_HUB_OFFLINE or value.upper() in {"1", "ON", "YES", "TRUE"}


def hub_reachable(timeout: float = 0.8) -> bool:
    """One TCP connect to the hub endpoint; False at once when HF_HUB_OFFLINE is set."""
    from huggingface_hub import constants

    return url_reachable(constants.ENDPOINT, timeout)


def url_reachable(address: str, timeout: float = 0.8) -> bool:
    """One TCP connect to the host of `address`; False at once when HF_HUB_OFFLINE is set."""
    if offline_flag():
        return False
    url = urlparse(address)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def hub_offline() -> Iterator[None]:
    """Make huggingface_hub serve from its cache only (it checks this flag on every request)."""
    from huggingface_hub import constants

    saved = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = saved


def unavailable_message(what: str) -> str:
    reason = "HF_HUB_OFFLINE is set" if offline_flag() else "the Hugging Face hub cannot be reached"
    return (
        f"Weights for '{what}' are not in the local cache and {reason}. "
        f"Either load it once while online (it is then cached in the Hugging Face cache for offline use), "
        f"or put a weights file (.safetensors/.pth/.npz) or a timm model folder into {models_dir()} "
        f"and load that instead."
    )


def fetch_hub_file(repo_id: str, filenames: tuple[str, ...], what: str,
                   progress: ProgressFn | None = None) -> str:
    """Path of the weights for `repo_id`: from the cache, else downloaded with progress, else a clear error."""
    cached = cached_hub_file(repo_id, filenames)
    if cached:
        return cached
    if not hub_reachable():
        raise WeightsUnavailable(unavailable_message(what))
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import RemoteEntryNotFoundError

    repo, _, revision = repo_id.partition("@")
    for filename in filenames:
        try:
            return hf_hub_download(repo, filename, revision=revision or None,
                                   tqdm_class=_progress_tqdm(progress, f"Downloading {what}"))
        except RemoteEntryNotFoundError:  # the repo has no such file: try the next candidate name
            continue
        except Exception as exc:  # noqa: BLE001 - HTTP, protocol, disk: whatever broke, say so and keep going
            raise WeightsUnavailable(f"Downloading '{what}' from the Hugging Face hub failed "
                                     f"({type(exc).__name__}: {exc}). Try again, or put the weights in "
                                     f"models/.") from None
    raise WeightsUnavailable(f"No weights file ({', '.join(filenames)}) found in hub repo '{repo_id}'.")


def _progress_tqdm(progress: ProgressFn | None, message: str):
    """A tqdm class forwarding huggingface_hub's byte counts to `progress` (None: plain tqdm on stderr)."""
    from tqdm.auto import tqdm

    if progress is None:
        return None

    class _Forwarding(tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = True  # no console output; we forward the counts instead
            super().__init__(*args, **kwargs)

        def update(self, n=1):
            # a disabled tqdm does not count, so keep our own total
            self._forwarded = getattr(self, "_forwarded", 0) + (n or 0)
            progress(self._forwarded, int(getattr(self, "total", 0) or 0), message)

    return _Forwarding
