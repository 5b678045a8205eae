"""Contention and throttling: what else used the device while it was timed, and its clocks."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field, replace

# nvidia-smi clock-event bits that mean the chip slowed itself down (not merely idle/capped).
_SLOWDOWN_BITS = {0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "power_brake"}
FOREIGN_CPU_LIMIT = 0.5  # cores of other processes' work tolerated during CPU timing
# GPU timing (CUDA events) feels the host only when its cores run short: a tenth of the
# machine's cores may be busy elsewhere (a judge on the host's other GPU uses about one).
GPU_HOST_SHARE = 0.1


@dataclass
class Snapshot:
    """One reading of the device's state."""

    cpu_busy_ticks: int = 0
    own_ticks: int = 0
    wall_ticks: float = 0.0
    gpu_processes: list[int] = field(default_factory=list)
    sm_clock_mhz: float | None = None
    slowdown: list[str] = field(default_factory=list)


def busy_ticks(stat_lines: list[str], cores: set[int] | None) -> int:
    """Busy jiffies from /proc/stat: of the whole machine (cores None), or of those cores."""
    total = 0
    for line in stat_lines:
        name, *values = line.split()
        if not name.startswith("cpu") or (name == "cpu") != (cores is None):
            continue
        if cores is not None and int(name[3:]) not in cores:
            continue
        fields = [int(v) for v in values]
        total += sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)
    return total


def judged_cores() -> set[int] | None:
    """The cores this judge is pinned to, when it is pinned to a part of the machine (a CPU
    slot of a run with several): contention is then what else ran on them."""
    mine = os.sched_getaffinity(0)
    return set(mine) if len(mine) < (os.cpu_count() or len(mine)) else None


def _cpu_ticks() -> tuple[int, int]:
    """(busy jiffies of the judged cores, jiffies of this process and its threads)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            busy = busy_ticks(fh.read().splitlines(), judged_cores())
        with open("/proc/self/stat", encoding="ascii") as fh:
            parts = fh.read().rsplit(")", 1)[1].split()
        own = int(parts[11]) + int(parts[12]) + int(parts[13]) + int(parts[14])
    except (OSError, ValueError, IndexError):
        return 0, 0
    return busy, own


_CSV = "--format=csv,noheader,nounits"
_GPU_QUERY = ["--query-gpu=uuid,clocks.sm,clocks_event_reasons.active", _CSV]
_APPS_QUERY = ["--query-compute-apps=pid,gpu_uuid", _CSV]
SMI_TIMEOUT_S = 10.0


def _start_smi(args: list[str]) -> subprocess.Popen[str] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        return subprocess.Popen(
            [exe, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
    except OSError:
        return None


def _smi_lines(proc: subprocess.Popen[str] | None) -> list[str]:
    if proc is None:
        return []
    try:
        out, _ = proc.communicate(timeout=SMI_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def _bare_uuid(uuid: str) -> str:
    return uuid.strip().lower().removeprefix("gpu-")


def compute_pids(lines: list[str], gpu_uuid: str | None) -> list[int]:
    """PIDs from `nvidia-smi --query-compute-apps=pid,gpu_uuid` on the judged GPU; all GPUs
    when the judged one is unknown (a process elsewhere then taints, never the reverse)."""
    pids = []
    for line in lines:
        pid, _, uuid = (part.strip() for part in line.partition(","))
        if pid.isdigit() and (gpu_uuid is None or _bare_uuid(uuid) == _bare_uuid(gpu_uuid)):
            pids.append(int(pid))
    return pids


def judged_gpu_row(rows: list[str], gpu_uuid: str | None) -> list[str] | None:
    """The `uuid, clocks.sm, clocks_event_reasons.active` row of the judged GPU (the first
    GPU's when the judged one is unknown or not listed)."""
    parsed = [[p.strip() for p in row.split(",")] for row in rows]
    for parts in parsed:
        if gpu_uuid is not None and _bare_uuid(parts[0]) == _bare_uuid(gpu_uuid):
            return parts[1:]
    return parsed[0][1:] if parsed else None


def _gpu_state(
    rows: list[str], apps: list[str], gpu_uuid: str | None
) -> tuple[list[int], float | None, list[str]]:
    """(compute PIDs, SM clock, slowdown reasons) from the two queries' lines; the GPU rows
    also list the UUIDs."""
    listed = {_bare_uuid(row.split(",")[0]) for row in rows}
    if gpu_uuid is not None and _bare_uuid(gpu_uuid) not in listed:
        gpu_uuid = None  # cannot tell the GPUs apart: count every process on every GPU
    pids = compute_pids(apps, gpu_uuid)
    clock, slow = None, []
    parts = judged_gpu_row(rows, gpu_uuid)
    if parts:
        try:
            clock = float(parts[0])
            bits = int(parts[1], 16) if len(parts) > 1 else 0
            slow = [name for bit, name in _SLOWDOWN_BITS.items() if bits & bit]
        except ValueError:
            pass
    return pids, clock, slow


class GpuReading:
    """nvidia-smi's two queries of the GPU, started together now and collected later.

    Each is a process start, four a timed config, and the judge used to wait them out while
    nothing else ran (run 10's screens spent 64.1 of 229.8 s outside every judge phase; the
    readings' share of it was not recorded). Started before untimed work (building, warm-up,
    the re-check), they run while it does, never while arms are timed."""

    def __init__(self, device: str, gpu_uuid: str | None) -> None:
        self._gpu_uuid = gpu_uuid
        cuda = device.startswith("cuda")
        self._procs = (_start_smi(_GPU_QUERY), _start_smi(_APPS_QUERY)) if cuda else None

    def complete(self, cpu: Snapshot | None = None) -> Snapshot:
        """The snapshot: these GPU readings with CPU ticks read before they started (cpu), or
        read now, after they ended (their own CPU time then lies outside the interval)."""
        gpu = None
        if self._procs is not None:
            rows, apps = (_smi_lines(p) for p in self._procs)
            gpu = _gpu_state(rows, apps, self._gpu_uuid)
            self._procs = None
        snap = cpu_snapshot() if cpu is None else replace(cpu)
        if gpu is not None:
            snap.gpu_processes, snap.sm_clock_mhz, snap.slowdown = gpu
        return snap

    def discard(self) -> None:
        """Stop readings nobody will collect (the evaluation ended early)."""
        for proc in self._procs or ():
            if proc is not None and proc.poll() is None:
                proc.kill()
            if proc is not None:
                proc.communicate()
        self._procs = None


def gpu_uuid_of(device: str) -> str | None:
    """The judged CUDA device's UUID (None on the CPU or when torch cannot say)."""
    if not device.startswith("cuda"):
        return None
    try:
        import torch

        return str(torch.cuda.get_device_properties(torch.device(device)).uuid)
    except (RuntimeError, AttributeError, AssertionError):
        return None


def cpu_snapshot() -> Snapshot:
    """The CPU part of a reading, now."""
    busy, own = _cpu_ticks()
    return Snapshot(cpu_busy_ticks=busy, own_ticks=own, wall_ticks=os.times().elapsed * 100)


def take_snapshot(device: str, gpu_uuid: str | None = None) -> Snapshot:
    """Read the state of the machine now (GPU readings of the GPU with gpu_uuid)."""
    cpu = cpu_snapshot()
    return GpuReading(device, gpu_uuid).complete(cpu)


def foreign_cpu_limit(device: str, cpu_count: int | None) -> float:
    """Cores other processes may use while the device is timed before it counts as contention."""
    if device.startswith("cuda"):
        return max(FOREIGN_CPU_LIMIT, GPU_HOST_SHARE * (cpu_count or 1))
    return FOREIGN_CPU_LIMIT


def judge_taint(
    before: Snapshot,
    after: Snapshot,
    allowed_pids: set[int],
    cpu_limit: float = FOREIGN_CPU_LIMIT,
) -> list[str]:
    """Reasons the interval between two snapshots cannot be trusted for promotion."""
    taint = []
    foreign = set(before.gpu_processes + after.gpu_processes) - allowed_pids
    if foreign:
        taint.append(f"foreign GPU processes {sorted(foreign)}")
    for reading in (before, after):
        if reading.slowdown:
            taint.append(f"GPU slowdown: {', '.join(reading.slowdown)}")
    wall = after.wall_ticks - before.wall_ticks
    if wall > 0 and after.cpu_busy_ticks:
        others = (after.cpu_busy_ticks - before.cpu_busy_ticks) - (
            after.own_ticks - before.own_ticks
        )
        cores = others / wall
        if cores > cpu_limit:
            taint.append(f"other processes used {cores:.2f} CPU cores while timing")
    return taint


def describe(snapshot: Snapshot) -> dict[str, object]:
    """A snapshot for the result's environment record."""
    return {
        "gpu_processes": snapshot.gpu_processes,
        "sm_clock_mhz": snapshot.sm_clock_mhz,
        "slowdown": snapshot.slowdown,
    }
