"""The per-device lock excludes a second holder and outlives a parent that dies."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.lock import DeviceBusyError, DeviceLock, device_key
from harness.runner import judge_environment


def test_second_holder_waits_then_times_out(tmp_path: Path) -> None:
    with DeviceLock(tmp_path, "cpu") as first:
        first.acquire(1)
        with pytest.raises(DeviceBusyError, match="held by another evaluation"):
            DeviceLock(tmp_path, "cpu").acquire(0.2)
        DeviceLock(tmp_path, "cuda:0").acquire(0.2)  # another device is free
    with DeviceLock(tmp_path, "cpu") as again:
        again.acquire(0.2)


def test_a_wait_for_the_lock_is_reported_with_its_holder(tmp_path: Path) -> None:
    heard: list[str] = []
    with DeviceLock(tmp_path, "cpu") as first:
        first.acquire(1)
        with pytest.raises(DeviceBusyError):
            DeviceLock(tmp_path, "cpu").acquire(0.2, on_wait=heard.append)
    assert len(heard) == 1 and f"held by pid {os.getpid()}" in heard[0]
    with DeviceLock(tmp_path, "cpu") as free:
        free.acquire(0.2, on_wait=heard.append)
    assert len(heard) == 1  # a lock taken at once is not a wait


def test_lock_is_held_by_the_child_after_the_parent_dies(tmp_path: Path) -> None:
    script = f"""
import os, subprocess
from pathlib import Path
from harness.lock import DeviceLock
lock = DeviceLock(Path({str(tmp_path)!r}), "cpu")
lock.acquire(5)
subprocess.Popen(["sleep", "2"], pass_fds=(lock.fd,), start_new_session=True)
os._exit(0)  # die without unlocking: the child still holds the lock
"""
    subprocess.run([sys.executable, "-c", script], check=True)
    with pytest.raises(DeviceBusyError):
        DeviceLock(tmp_path, "cpu").acquire(0.3)
    started = time.monotonic()
    with DeviceLock(tmp_path, "cpu") as lock:
        lock.acquire(10)
    assert time.monotonic() - started < 5


def no_gpus() -> dict[int, str]:
    return {}


def two_gpus() -> dict[int, str]:
    # What nvidia-smi names on a host with two GPUs (the only edge replaced: no GPU here).
    return {0: "GPU-aaaa-0000", 1: "GPU-bbbb-1111"}


def test_device_keys_are_file_safe() -> None:
    plain: dict[str, str] = {}
    assert device_key("cuda", plain, no_gpus) == device_key("cuda:0", plain, no_gpus) == "cuda-0"
    assert device_key("cuda:1", plain, no_gpus) == "cuda-1"
    assert device_key("cpu", plain, no_gpus) == "cpu"


def test_a_gpu_is_locked_by_what_it_is_not_by_its_number_in_this_process() -> None:
    # Two runs on the same physical GPU share one lock whatever CUDA_VISIBLE_DEVICES numbers
    # it as; the lock used to be "cuda-0" for both GPUs of a host.
    second_only = {"CUDA_VISIBLE_DEVICES": "1"}
    assert device_key("cuda", second_only, two_gpus) == "gpu-GPU-bbbb-1111"
    assert device_key("cuda:1", {}, two_gpus) == "gpu-GPU-bbbb-1111"
    assert device_key("cuda", {}, two_gpus) == "gpu-GPU-aaaa-0000"
    assert device_key("cuda:1", {"CUDA_VISIBLE_DEVICES": "1,0"}, two_gpus) == "gpu-GPU-aaaa-0000"
    # A UUID in CUDA_VISIBLE_DEVICES is the device itself; without nvidia-smi, the physical
    # index it names.
    assert device_key("cuda", {"CUDA_VISIBLE_DEVICES": "GPU-bbbb-1111"}, no_gpus) == (
        "gpu-GPU-bbbb-1111"
    )
    assert device_key("cuda", second_only, no_gpus) == "cuda-1"


def test_judge_environment_drops_everything_but_a_whitelist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-nope")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nope")
    monkeypatch.setenv("PYTHONPATH", "/site")
    env = judge_environment(tmp_path, Path("/code"))
    assert "OPENAI_API_KEY" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["HOME"] == str(tmp_path) and env["PYTHONPATH"] == "/code:/site"
    assert "TRITON_CACHE_DIR" not in env and env["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    shared = judge_environment(tmp_path, Path("/code"), Path("/cache"))
    assert shared["TRITON_CACHE_DIR"] == "/cache/triton"
    assert shared["TORCHINDUCTOR_CACHE_DIR"] == "/cache/inductor"
