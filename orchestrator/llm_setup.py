"""Wiring the LLM side of a run: backend, key, prices, budget (from the ledger), transcript."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse

from agents.llm.conversation import BackendKind, ClientOptions, LLMBackend
from agents.llm.session import Budget, LLMSession, Pricing, ReplayBackend, pricing_for
from ledger import Ledger
from orchestrator.events import EventKind
from orchestrator.settings import ExpanderKind, Settings

DEFAULT_MODELS = {
    ExpanderKind.ANTHROPIC: "claude-sonnet-5-5",
    ExpanderKind.OPENAI: "gpt-5.5",
    ExpanderKind.OPENAI_CHAT: "local-model",  # llama.cpp serves its one model under any name
}
KEY_VARIABLES = {
    ExpanderKind.ANTHROPIC: "ANTHROPIC_API_KEY",
    ExpanderKind.OPENAI: "OPENAI_API_KEY",
    ExpanderKind.OPENAI_CHAT: "OPENAI_API_KEY",
}
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
# The SDK wants a key even where a local server checks none.
LOCAL_KEY = "no-key-needed"
TRANSCRIPT = "llm-transcript.jsonl"


class LLMSetupError(ValueError):
    """The LLM side cannot start (missing key, unknown price, missing transcript)."""


def _api_key(settings: Settings, kind: ExpanderKind, environ: Mapping[str, str]) -> str:
    if settings.llm_api_key is not None:
        return settings.llm_api_key.get_secret_value()
    variable = KEY_VARIABLES[kind]
    key = environ.get(variable, "")
    if not key and kind is ExpanderKind.OPENAI_CHAT and is_loopback(settings.llm_base_url):
        return LOCAL_KEY
    if not key:
        raise LLMSetupError(
            f"--expander {kind.value} needs an API key: set {variable} (or llm_api_key in a "
            "config file), or use --expander offline, which needs none"
        )
    return key


def is_loopback(url: str | None) -> bool:
    """Whether an endpoint is on this machine (a local model server)."""
    host = urlparse(url or "").hostname or ""
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def make_backend(settings: Settings, environ: Mapping[str, str] | None = None) -> LLMBackend | None:
    """The backend the settings ask for (None for the offline expander); checks the key first."""
    environ = os.environ if environ is None else environ
    kind, path = ExpanderKind.parse(settings.expander)
    if kind is ExpanderKind.OFFLINE:
        return None
    if kind is ExpanderKind.OPENAI_CHAT and not settings.llm_base_url:
        raise LLMSetupError(
            "--expander openai-chat needs the server's address: --llm-base-url "
            "http://127.0.0.1:8080/v1 (llama.cpp, vLLM, SGLang, ollama serve one)"
        )
    if kind is ExpanderKind.REPLAY:
        assert path is not None
        try:
            return ReplayBackend(path)
        except ValueError as exc:
            raise LLMSetupError(str(exc)) from exc
    options = ClientOptions(
        model=settings.llm_model or DEFAULT_MODELS[kind],
        api_key=_api_key(settings, kind, environ),
        temperature=settings.llm_temperature,
        base_url=settings.llm_base_url,
        max_retries=settings.llm_max_retries,
        timeout_s=settings.llm_timeout_s,
    )
    # The vendor SDKs load only when a vendor is chosen: offline and replay runs (and a GPU
    # machine without them installed) need neither.
    try:
        if kind is ExpanderKind.ANTHROPIC:
            from agents.llm.anthropic_backend import AnthropicBackend

            return AnthropicBackend(options)
        if kind is ExpanderKind.OPENAI_CHAT:
            from agents.llm.openai_chat_backend import OpenAIChatBackend

            return OpenAIChatBackend(options, tool_choice=settings.llm_tool_choice)
        from agents.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(options)
    except ImportError as exc:
        raise LLMSetupError(
            f"--expander {kind.value} needs the {exc.name!r} package, which is not importable "
            f"here ({exc}): pip install {exc.name}, or use --expander offline"
        ) from exc


def pricing(settings: Settings, backend: LLMBackend) -> Pricing:
    """Prices of the backend's model (configured ones win)."""
    override = None
    if settings.llm_price_in is not None and settings.llm_price_out is not None:
        override = (settings.llm_price_in, settings.llm_price_out)
    elif backend.kind is BackendKind.OPENAI_CHAT and is_loopback(settings.llm_base_url):
        override = (0.0, 0.0)  # a model served on this machine is billed by nobody
    try:
        return pricing_for(backend.model if backend.model else "replay", override)
    except ValueError as exc:
        raise LLMSetupError(str(exc)) from exc


def spent(ledger: Ledger) -> tuple[float, int]:
    """USD and tokens of every LLM call the ledger holds (budgets span resumptions)."""
    usd, tokens = 0.0, 0
    for stored in ledger.events(EventKind.LLM_CALL.value):
        payload = stored.record.payload
        usd += float(payload.get("usd", 0.0))
        tokens += int(payload.get("input_tokens", 0)) + int(payload.get("output_tokens", 0))
    return usd, tokens


def make_session(
    settings: Settings, backend: LLMBackend, ledger: Ledger, run_dir: Path
) -> LLMSession:
    """A session priced for the model, budgeted with what the run already spent."""
    usd, tokens = spent(ledger)
    budget = Budget(
        usd_limit=settings.llm_budget_usd,
        token_limit=settings.llm_budget_tokens,
        usd_spent=usd,
        tokens_spent=tokens,
    )
    record = None if isinstance(backend, ReplayBackend) else run_dir / TRANSCRIPT
    return LLMSession(backend, pricing(settings, backend), budget, record)
