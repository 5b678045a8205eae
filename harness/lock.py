"""Per-device exclusive lock, held for the judge subprocess's whole life."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType


class DeviceBusyError(TimeoutError):
    """The device lock could not be taken in time."""


def query_gpus() -> dict[int, str]:
    """Physical GPU index -> UUID, as nvidia-smi reports them ({} without it)."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    gpus = {}
    for line in done.stdout.splitlines():
        index, _, uuid = (part.strip() for part in line.partition(","))
        if index.isdigit() and uuid:
            gpus[int(index)] = uuid
    return gpus


def device_key(
    device: str,
    environ: Mapping[str, str] | None = None,
    gpus: Callable[[], dict[int, str]] = query_gpus,
) -> str:
    """File-name-safe key of the physical device a name means here: 'cpu', or for 'cuda:N'
    the N-th GPU CUDA_VISIBLE_DEVICES leaves visible, by its UUID where nvidia-smi names it
    (two runs on one GPU share a lock whatever their own numbering; two GPUs never do)."""
    env = os.environ if environ is None else environ
    if device == "cuda" or device.startswith("cuda:"):
        ordinal = int(device.partition(":")[2] or 0)
        visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        chosen = visible[ordinal] if ordinal < len(visible) else str(ordinal)
        if chosen.isdigit():
            uuid = gpus().get(int(chosen))
            chosen = uuid if uuid else f"cuda-{chosen}"
        device = chosen if chosen.startswith("cuda-") else f"gpu-{chosen}"
    return re.sub(r"[^A-Za-z0-9_-]", "-", device)


class DeviceLock:
    """An flock on a per-device file; the judge child inherits the descriptor, so the lock lasts
    until the child is gone even if the parent dies first."""

    def __init__(self, lock_dir: Path, device: str) -> None:
        self.path = lock_dir / f"ratchet-{device_key(device)}.lock"
        self._fd: int | None = None

    @property
    def fd(self) -> int:
        """The locked descriptor (to pass to the child)."""
        if self._fd is None:
            raise RuntimeError(f"device lock {self.path} is not held")
        return self._fd

    def holder(self) -> str:
        """The pid the lock file names (the last process that took it), or '?'."""
        try:
            return self.path.read_text(encoding="ascii").strip() or "?"
        except (OSError, UnicodeDecodeError):
            return "?"

    def acquire(
        self,
        timeout_s: float,
        poll_s: float = 0.05,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        """Take the lock, waiting up to timeout_s; DeviceBusyError names the lock file.
        `on_wait` hears when a wait starts, every 30 s of it, and when it ends."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        started = time.monotonic()
        deadline, next_report = started + timeout_s, started
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if on_wait is not None and next_report > started:
                    on_wait(f"got the device lock after {time.monotonic() - started:.0f} s")
                break
            except BlockingIOError:
                now = time.monotonic()
                if on_wait is not None and now >= next_report:
                    on_wait(
                        f"waiting for the device lock {self.path} (held by pid {self.holder()}; "
                        f"{now - started:.0f} s of at most {timeout_s:.0f} s)"
                    )
                    next_report = now + 30.0
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise DeviceBusyError(
                        f"device lock {self.path} is held by another evaluation for more than "
                        f"{timeout_s:.0f} s; wait for it or raise the lock timeout"
                    ) from None
                time.sleep(poll_s)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        """Drop our descriptor (the lock ends once no process holds it)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DeviceLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
