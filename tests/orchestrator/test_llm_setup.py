"""The vendor SDKs are needed only by the vendor expanders (a GPU machine may lack them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
