"""Parent side of the judge: one fresh subprocess per evaluation, timeout, structured result."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.lock import DeviceLock
from harness.models import EvaluationRequest, EvaluationResult, Outcome

# Variables a judge may see; everything else (API keys, credentials, tokens) is dropped.
PASSED_VARIABLES = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


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
    if exit_code != 0:
        return _failure(
            request,
            Outcome.RUNTIME_ERROR,
            f"judge exited with code {exit_code} after writing a result; log tail:\n{tail}",
        )
    return result


def run_evaluation(
    request: EvaluationRequest, work_dir: Path, settings: RunnerSettings
) -> EvaluationResult:
    """Run one evaluation in a fresh subprocess holding the device lock; never raises for
    anything the candidate does."""
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "tmp").mkdir(exist_ok=True)
    request_path, result_path = work_dir / "request.json", work_dir / "result.json"
    log_path = work_dir / "judge.log"
    result_path.unlink(missing_ok=True)
    if request.deadline_s is None:
        # Outlast the parent's own timeout slightly, so the parent normally reports TIMEOUT.
        request = request.model_copy(update={"deadline_s": settings.timeout_s + 30})
    request_path.write_text(request.model_dump_json(indent=2), encoding="utf-8")
    nonce = secrets.token_hex(16)
    command = [settings.python, "-m", "harness.worker", str(request_path), str(result_path)]
    with DeviceLock(settings.lock_dir, request.device) as lock:
        lock.acquire(settings.lock_timeout_s)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=work_dir,
                env=_environment(work_dir, settings),
                start_new_session=True,
                pass_fds=(lock.fd,),
            )
            try:
                assert proc.stdin is not None
                proc.stdin.write(nonce.encode() + b"\n")
                proc.stdin.close()
                exit_code = proc.wait(timeout=settings.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                proc.wait()
                return _failure(
                    request,
                    Outcome.TIMEOUT,
                    f"judge exceeded {settings.timeout_s:.0f} s and was killed "
                    f"with its process group; log tail:\n{_log_tail(log_path)}",
                )
            except BaseException:
                _kill_group(proc.pid)
                proc.wait()
                raise
            finally:
                # Anything the candidate left running (threads die with the process; forked
                # children do not) goes with the group before the lock is released.
                _kill_group(proc.pid)
    return read_result(request, result_path, nonce, exit_code, log_path)
