"""Long judge runs said out loud: what is being judged and where the judge is, every 30 s."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

from harness.models import PROGRESS_PREFIX

Notice = Callable[[str], None]

REPORT_EVERY_S = 30.0
JUDGE_LINE = "config "  # the judge's own progress lines ('config s1: correctness', ...)


def last_progress(log_text: str) -> tuple[str, str] | None:
    """(config, phase) of the judge's last progress line in a log's text, e.g. a cut
    judge's log tail (None when it has none)."""
    found = None
    for raw in log_text.splitlines():
        line = raw.removeprefix(PROGRESS_PREFIX)
        if line is not raw and line.startswith(JUDGE_LINE):
            config, _, rest = line[len(JUDGE_LINE) :].partition(": ")
            found = (config, rest.split(" ", 1)[0])
    return found


class JudgeWatch:
    """While one judge subprocess runs: its progress lines are kept, and every `every_s`
    without it ending a line says what is being judged, for how long and where it is.

    A judge that ends within `every_s` says nothing (screens of small workloads take
    seconds); a calibration, a sweep or a verification of a big one, or a first compile,
    can take minutes, and then the user sees which config it is on instead of silence.
    Lines that are not the judge's own (a wait for the device lock) are passed on at once.
    """

    def __init__(self, what: str, notice: Notice, configs: int, every_s: float = REPORT_EVERY_S):
        self.what, self.notice, self.configs, self.every_s = what, notice, configs, every_s
        self.latest = "starting the judge (interpreter, imports, device set-up)"
        self.phase = ""
        self.seen: dict[str, list[str]] = {}  # configs reached, by phase (correctness, timing)
        self.started = time.monotonic()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="judge-watch", daemon=True)

    def progress(self, line: str) -> None:
        """A progress line of the judge (the runner's `progress` callback)."""
        if not line.startswith(JUDGE_LINE):
            self.notice(f"  {line}")
            return
        config, _, rest = line[len(JUDGE_LINE) :].partition(": ")
        self.phase = rest.split(" ", 1)[0]
        reached = self.seen.setdefault(self.phase, [])
        if config not in reached:
            reached.append(config)
        self.latest = line

    def line(self) -> str:
        """The line shown now."""
        elapsed = time.monotonic() - self.started
        where = self.latest
        if self.phase == "correctness":
            where += " (building the arms, compile and warm-up included, then the trials)"
        reached = len(self.seen.get(self.phase, []))
        of = f", config {reached} of {self.configs}" if reached else ""
        return f"  still {self.what} after {elapsed:.0f} s: {where}{of}"

    def _tick(self) -> None:
        while not self._done.wait(self.every_s):
            self.notice(self.line())

    def __enter__(self) -> JudgeWatch:
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._done.set()
        self._thread.join()
