"""A judge that outlives its parent or its deadline kills its own process group."""

from __future__ import annotations

import os
import signal
import threading
import time


def _kill_own_group() -> None:
    try:
        os.killpg(os.getpgid(0), signal.SIGKILL)
    finally:
        os._exit(3)


def start_watchdog(deadline_s: float | None, poll_s: float = 1.0) -> threading.Thread:
    """Kill this judge (and anything it started) once the parent is gone or time is up.

    The parent normally enforces the timeout; this covers a parent that crashed or was killed,
    which would otherwise leave an orphaned judge holding the device lock indefinitely.
    """
    parent = os.getppid()
    started = time.monotonic()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            orphaned = os.getppid() != parent
            late = deadline_s is not None and time.monotonic() - started > deadline_s
            if orphaned or late:
                _kill_own_group()

    thread = threading.Thread(target=watch, name="ratchet-judge-watchdog", daemon=True)
    thread.start()
    return thread
