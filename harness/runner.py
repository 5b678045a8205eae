"""Parent side of the judge: one fresh subprocess per evaluation, timeout, structured result."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.lock import DeviceLock
from harness.models import (
    PROGRESS_PREFIX,
    DeviceSlot,
    EvaluationRequest,
    EvaluationResult,
    Outcome,
    RejectReason,
)
from harness.supervisor import SupervisorReport

# Variables a judge may see; everything else (API keys, credentials, tokens) is dropped.
PASSED_VARIABLES = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
# Cores the supervisor pins itself (and so the judge) to, comma-separated.
CPU_AFFINITY_VARIABLE = "RATCHET_JUDGE_CPUS"


class RunnerSettings(BaseModel):
    """How the parent starts judges."""

    model_config = ConfigDict(frozen=True)

    python: str = Field(default=sys.executable, description="Interpreter for the judge.")
    timeout_s: float = Field(default=600.0, gt=0, description="Wall-clock cap per evaluation.")
    lock_dir: Path = Field(description="Directory of the per-device lock files.")
    lock_timeout_s: float = Field(default=3600.0, gt=0, description="Wait for the device lock.")
    code_root: Path = Field(description="Directory holding the harness and kernels packages.")
    compile_cache_dir: Path | None = Field(
        default=None,
        description="Triton/TorchInductor cache shared across judges (None: private per judge).",
    )
    triton_interpret: bool = Field(
        default=False,
        description="Run Triton kernels through Triton's interpreter (CPU checks of kernels).",
    )
    pid_namespace: bool = Field(
        default=True,
        description="Run CPU judges in a PID namespace of their own where the host allows it "
        "(they can then see and signal no process outside); CUDA judges never are.",
    )
    slot: DeviceSlot | None = Field(
        default=None,
        description="The device slot judges run on: its lock, its cores or its GPU (None: "
        "the request's device, locked by its name, not narrowed).",
    )
    memory_limit_bytes: int = Field(
        default_factory=lambda: default_memory_limit(),
        ge=0,
        description="Resident memory the judge's processes may use together before the judge "
        "is killed and the candidate rejected (0: unbounded). Default: half the host's memory.",
    )


def default_memory_limit() -> int:
    """Half the host's physical memory: a judge may not take the machine down with it."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2


def judge_environment(
    work_dir: Path, code_root: Path, compile_cache: Path | None = None
) -> dict[str, str]:
    """A cleared environment: only harmless variables, our code on the path, a private home,
    and (when given) the shared compile caches."""
    env = {k: os.environ[k] for k in PASSED_VARIABLES if k in os.environ}
    env.setdefault("PATH", "/usr/bin:/bin")
    # Our code first; then whatever the parent's path adds (packages installed beside the
    # interpreter, e.g. wheels unpacked on a GPU host): paths, not secrets.
    python_path = os.pathsep.join(p for p in (str(code_root), os.environ.get("PYTHONPATH")) if p)
    env.update(
        HOME=str(work_dir),
        TMPDIR=str(work_dir / "tmp"),
        PYTHONPATH=python_path,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONHASHSEED="0",
        # torch.compile in-process, without its worker pool and progress-bar monitor: those
        # threads would outlive the build and the judge rejects leftover threads.
        TORCHINDUCTOR_COMPILE_THREADS="1",
        TQDM_DISABLE="1",
    )
    if compile_cache is not None:
        # Both caches key entries by source and compile options, so a candidate whose kernels
        # did not change reuses the binaries an earlier judge built (seconds per kernel).
        env.update(
            TRITON_CACHE_DIR=str(compile_cache / "triton"),
            TORCHINDUCTOR_CACHE_DIR=str(compile_cache / "inductor"),
        )
    return env


def _environment(work_dir: Path, settings: RunnerSettings) -> dict[str, str]:
    env = judge_environment(work_dir, settings.code_root, settings.compile_cache_dir)
    slot = settings.slot
    if slot is not None and slot.visible_gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = slot.visible_gpu
    if slot is not None and slot.cpus:
        env[CPU_AFFINITY_VARIABLE] = ",".join(str(cpu) for cpu in slot.cpus)
    if settings.triton_interpret:
        env["TRITON_INTERPRET"] = "1"  # read when Triton defines the kernels: set before start
    return env


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _log_tail(log_path: Path, chars: int = 2000) -> str:
    try:
        return log_path.read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError:
        return ""


def _failure(request: EvaluationRequest, outcome: Outcome, message: str) -> EvaluationResult:
    return EvaluationResult(
        evaluation_id=request.evaluation_id, nonce="", outcome=outcome, message=message
    )


def read_result(
    request: EvaluationRequest, result_path: Path, nonce: str, exit_code: int, log_path: Path
) -> EvaluationResult:
    """Parse what the judge wrote; missing, malformed, forged or crashed all become failures."""
    tail = _log_tail(log_path)
    if not result_path.exists():
        return _failure(
            request,
            Outcome.NO_RESULT,
            f"judge exited with code {exit_code} and wrote no result; log tail:\n{tail}",
        )
    try:
        result = EvaluationResult.model_validate_json(result_path.read_text(encoding="utf-8"))
    except (ValidationError, ValueError, UnicodeDecodeError) as exc:
        return _failure(request, Outcome.NO_RESULT, f"malformed judge result: {exc}")
    if result.nonce != nonce or result.evaluation_id != request.evaluation_id:
        return _failure(
            request, Outcome.NO_RESULT, "judge result has the wrong nonce or id: forged or stale"
        )
    if exit_code != 0 and result.outcome is not Outcome.PASSED:
        # The verdict was already a refusal (e.g. a thread left running, which may then abort
        # the interpreter at exit): keep its own reason.
        return result.model_copy(
            update={"message": f"{result.message} (then the judge exited with code {exit_code})"}
        )
    if exit_code != 0:
        return _failure(
            request,
            Outcome.RUNTIME_ERROR,
            f"judge exited with code {exit_code} after writing a result; log tail:\n{tail}",
        )
    return result


def _read_report(fd: int) -> tuple[int | None, SupervisorReport | None]:
    """(judge pid, final report) from what the supervisor wrote; None where it never did."""
    os.set_blocking(fd, False)
    chunks = []
    with contextlib.suppress(BlockingIOError, OSError):
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    os.close(fd)
    judge_pid, report = None, None
    for line in b"".join(chunks).decode(errors="replace").splitlines():
        if line.startswith("started "):
            judge_pid = int(line.split()[1])
        elif line.startswith("{"):
            with contextlib.suppress(ValueError, TypeError):
                report = SupervisorReport(**json.loads(line))
    return judge_pid, report


def _supervised_outcome(
    request: EvaluationRequest, report: SupervisorReport | None, settings: RunnerSettings
) -> EvaluationResult | None:
    """The candidate's fault the supervisor saw (None: nothing, read the judge's result)."""
    if report is None:
        return _reject(
            request,
            RejectReason.HARNESS_SIGNALLED,
            "the judge's supervisor was killed before it reported: candidates may not signal "
            "the processes that judge them",
        )
    if report.memory_exceeded:
        limit = settings.memory_limit_bytes / 2**30
        return _reject(
            request,
            RejectReason.MEMORY_LIMIT,
            f"the judge's processes used more than {limit:.1f} GiB of resident memory and "
            "were killed; lower the candidate's memory use (the bound is the runner's "
            "memory_limit_bytes)",
        )
    if report.outlived:
        return _reject(
            request,
            RejectReason.OUTLIVING_PROCESS,
            "processes outlived the evaluation and were killed (a candidate may not start "
            f"processes): {'; '.join(report.outlived)}",
        )
    return None


def _reject(request: EvaluationRequest, reason: RejectReason, message: str) -> EvaluationResult:
    return EvaluationResult(
        evaluation_id=request.evaluation_id,
        nonce="",
        outcome=Outcome.REJECTED,
        message=message,
        reason=reason,
    )


def _stop(proc: subprocess.Popen[bytes], judge_pid: int | None) -> None:
    """Ask the supervisor to take the judge's tree down; force it if it does not."""
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.wait()
    if judge_pid is not None:
        _kill_group(judge_pid)


def _supervised_command(
    settings: RunnerSettings, work_dir: Path, fds: tuple[int, int], device: str
) -> list[str]:
    python, (report_fd, lock_fd) = settings.python, fds
    request, result = str(work_dir / "request.json"), str(work_dir / "result.json")
    # CUDA's driver fails in a PID namespace that shares the host's /proc (error 304, on the
    # H200): CUDA judges run in their own session under the sub-reaper instead.
    namespace = "yes" if settings.pid_namespace and not device.startswith("cuda") else "no"
    return [
        *(python, "-m", "harness.supervisor", str(os.getpid()), str(report_fd)),
        *(str(settings.memory_limit_bytes), str(lock_fd), namespace, "--"),
        *(python, "-m", "harness.worker", request, result),
    ]


def _wait(
    proc: subprocess.Popen[bytes],
    timeout_s: float,
    log_path: Path,
    progress: Callable[[str], None] | None,
) -> None:
    """Wait for the supervisor, passing the judge's progress lines on as they appear."""
    if progress is None:
        proc.wait(timeout=timeout_s)
        return
    deadline, offset = time.monotonic() + timeout_s, 0
    while True:
        try:
            proc.wait(timeout=min(0.5, max(0.01, deadline - time.monotonic())))
            done = True
        except subprocess.TimeoutExpired:
            done = False
        with contextlib.suppress(OSError), open(log_path, "rb") as log:
            log.seek(offset)
            chunk = log.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            if line.startswith(PROGRESS_PREFIX):
                progress(line[len(PROGRESS_PREFIX) :].strip())
        if done:
            return
        if time.monotonic() >= deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)


def run_evaluation(
    request: EvaluationRequest,
    work_dir: Path,
    settings: RunnerSettings,
    progress: Callable[[str], None] | None = None,
) -> EvaluationResult:
    """Run one evaluation in a fresh supervised subprocess holding the device lock; never
    raises for anything the candidate does. `progress` receives the judge's progress lines."""
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "tmp").mkdir(exist_ok=True)
    request_path, result_path = work_dir / "request.json", work_dir / "result.json"
    log_path = work_dir / "judge.log"
    result_path.unlink(missing_ok=True)
    limit_s = min(settings.timeout_s, request.time_limit_s or settings.timeout_s)
    if request.deadline_s is None:
        # Outlast the parent's own timeout slightly, so the parent normally reports TIMEOUT.
        request = request.model_copy(update={"deadline_s": limit_s + 30})
    request_path.write_text(request.model_dump_json(indent=2), encoding="utf-8")
    nonce = secrets.token_hex(16)
    locked = settings.slot.name if settings.slot is not None else request.device
    with DeviceLock(settings.lock_dir, locked) as lock:
        lock.acquire(settings.lock_timeout_s, on_wait=progress)
        report_r, report_w = os.pipe()
        started = time.monotonic()
        with open(log_path, "wb") as log:
            try:
                proc = subprocess.Popen(
                    _supervised_command(settings, work_dir, (report_w, lock.fd), request.device),
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=work_dir,
                    env=_environment(work_dir, settings),
                    start_new_session=True,
                    pass_fds=(lock.fd, report_w),
                )
            finally:
                os.close(report_w)
            try:
                assert proc.stdin is not None
                proc.stdin.write(nonce.encode() + b"\n")
                proc.stdin.close()
                _wait(proc, limit_s, log_path, progress)
            except subprocess.TimeoutExpired:
                _stop(proc, _read_report(report_r)[0])
                whose = "its own" if limit_s < settings.timeout_s else "the runner's"
                cut = _failure(
                    request,
                    Outcome.TIMEOUT,
                    f"judge exceeded {limit_s:.0f} s ({whose} time limit) and was killed "
                    f"with its processes; log tail:\n{_log_tail(log_path)}",
                )
                # The seconds it held the device: run 16's log read "timeout after 0.0 s"
                # for screens cut at 126 s.
                return cut.model_copy(update={"wall_s": time.monotonic() - started})
            except BaseException:
                _stop(proc, _read_report(report_r)[0])
                raise
            judge_pid, report = _read_report(report_r)
            _stop(proc, judge_pid)
    refused = _supervised_outcome(request, report, settings)
    if refused is not None:
        isolation = report.isolation if report is not None else None
        return refused.model_copy(update={"isolation": isolation})
    assert report is not None
    exit_code = report.exit_code if report.exit_code is not None else -(report.signal or 9)
    result = read_result(request, result_path, nonce, exit_code, log_path)
    return result.model_copy(update={"isolation": report.isolation})
