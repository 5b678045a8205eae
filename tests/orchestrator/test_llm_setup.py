"""The vendor SDKs are needed only by the vendor expanders (a GPU machine may lack them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agents.llm.openai_chat_backend import OpenAIChatBackend
from orchestrator.llm_setup import LLMSetupError, make_backend, pricing
from orchestrator.settings import Settings

ROOT = Path(__file__).resolve().parents[2]

# Blocks the vendor SDKs (and their HTTP client) as if they were not installed, then builds
# the backend the given expander needs.
PROBE = """
import sys
for name in ("anthropic", "openai", "httpx2"):
    sys.modules[name] = None
import orchestrator.cli
from orchestrator.llm_setup import LLMSetupError, make_backend
from orchestrator.settings import Settings
settings = Settings(expander=sys.argv[1], llm_api_key="k")
try:
    print(type(make_backend(settings, environ={})).__name__)
except LLMSetupError as exc:
    print(f"setup error: {exc}")
"""


def _probe(expander: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, expander],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_offline_runs_need_no_vendor_sdk() -> None:
    done = _probe("offline")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "NoneType"


def test_the_block_is_real_a_vendor_expander_needs_its_sdk() -> None:
    for vendor in ("anthropic", "openai"):
        done = _probe(vendor)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"setup error: --expander {vendor} needs the '{vendor}'")
        assert f"pip install {vendor}" in done.stdout


def test_openai_chat_needs_a_server_address() -> None:
    with pytest.raises(LLMSetupError, match="--llm-base-url"):
        make_backend(Settings(expander="openai-chat"), environ={})


def test_a_local_chat_server_needs_no_key_and_costs_nothing() -> None:
    settings = Settings(expander="openai-chat", llm_base_url="http://127.0.0.1:8080/v1")
    backend = make_backend(settings, environ={})
    assert isinstance(backend, OpenAIChatBackend) and backend.model == "local-model"
    assert pricing(settings, backend).cost(10**6, 10**6) == 0.0


def test_a_remote_chat_endpoint_needs_a_key_and_prices() -> None:
    remote = Settings(expander="openai-chat", llm_base_url="https://models.example.invalid/v1")
    with pytest.raises(LLMSetupError, match="OPENAI_API_KEY"):
        make_backend(remote, environ={})
    backend = make_backend(remote, environ={"OPENAI_API_KEY": "k"})
    assert backend is not None
    with pytest.raises(LLMSetupError, match="llm_price_in"):
        pricing(remote, backend)
