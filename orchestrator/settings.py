"""The one settings object, layered defaults -> file -> environment -> flags, read in one place."""

from __future__ import annotations

import enum
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_serializer,
    field_validator,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from harness.models import TimingPlan
from search import ObjectiveKind

ENV_PREFIX = "RATCHET_"
RUN_DIR_CONFIG = "ratchet.toml"


class SettingsError(ValueError):
    """Settings that cannot be used (missing file, bad value, unknown key)."""


class DeviceChoice(enum.StrEnum):
    """Where candidates are judged."""

    AUTO = "auto"
    CPU = "cpu"
    CUDA = "cuda"


class VerificationMode(enum.StrEnum):
    """How a new frontier is replicated before it is trusted."""

    AMORTIZED = "amortized"  # on the next sweep, beside the frontier it replaced
    SEPARATE = "separate"  # a judge of its own, with an A/A and a planted-slowdown control


class ExpanderKind(enum.StrEnum):
    """Which expander writes candidates ('replay:FILE' replays a recorded LLM transcript)."""

    OFFLINE = "offline"
    ANTHROPIC = "anthropic"
    OPENAI = "openai"
    OPENAI_CHAT = "openai-chat"  # an OpenAI-compatible chat-completions server (local models)
    REPLAY = "replay"

    @classmethod
    def parse(cls, value: str) -> tuple[ExpanderKind, Path | None]:
        """'offline', 'anthropic', 'openai', 'openai-chat' or 'replay:FILE'."""
        kind, _, rest = value.partition(":")
        try:
            parsed = cls(kind)
        except ValueError:
            raise ValueError(
                f"unknown expander {value!r}; use offline, anthropic, openai, openai-chat "
                "(with --llm-base-url) or replay:FILE"
            ) from None
        if (parsed is cls.REPLAY) != bool(rest):
            raise ValueError(f"expander {value!r}: only replay takes a file, as 'replay:FILE'")
        return parsed, Path(rest) if rest else None


class ScreenGateRule(enum.StrEnum):
    """Which correct screened candidates go on to the full sweep."""

    FRONTIER = "frontier"
    PARENT = "parent"


class Settings(BaseModel):
    """Everything a run needs to know; built only by load_settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_dir: Path = Field(default=Path("ratchet-run"), description="Ledger, repo and evaluations.")
    ledger: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the run's ledger, e.g. "
        "postgresql+psycopg://USER:PASSWORD@HOST/DATABASE for a database a team shares (None: "
        "the SQLite file RUN_DIR/ledger.sqlite); recorded and shown without its password.",
    )
    workload: str = Field(default="track3", description="Workload name or 'module:factory'.")
    device: DeviceChoice = Field(default=DeviceChoice.AUTO, description="auto, cpu or cuda.")
    devices: str | None = Field(
        default=None,
        description="Devices to evaluate on, one worker each: 'all' or comma-separated indices "
        "(GPUs as this process sees them; on a CPU host, CPU slots of one core each, pinned). "
        "None: one device, as --device says.",
    )
    expanders: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Expansions that may run at once (agents think while devices measure).",
    )
    ray: str | None = Field(
        default=None,
        description="Ray cluster to evaluate and expand on: 'auto', 'local' (a private "
        "cluster on 127.0.0.1) or an address HOST:PORT (None: this host, without Ray).",
    )
    config_set: str | None = Field(
        default=None, description="Config set to search (default: the workload's for the device)."
    )
    minutes: float = Field(
        default=3.0,
        gt=0,
        description="Wall-clock budget of the whole run, summed over its invocations (a resumed "
        "run goes on with what is left; pass a larger value to search longer).",
    )
    max_candidates: int | None = Field(
        default=None,
        gt=0,
        description="Stop once the whole run holds this many candidates (the seed not counted), "
        "summed over its invocations, like minutes.",
    )
    expander: str = Field(
        default="offline", description="offline, anthropic, openai, openai-chat or replay:FILE."
    )
    llm_model: str | None = Field(
        default=None, description="Model name (default: per provider, see llm_default_model)."
    )
    llm_temperature: float | None = Field(default=None, ge=0, description="Sampling temperature.")
    llm_max_turns: int = Field(default=12, ge=1, description="Expander turns per candidate.")
    llm_max_output_tokens: int = Field(default=8192, ge=256, description="Per response.")
    llm_budget_usd: float | None = Field(
        default=20.0, ge=0, description="Money cap of the run's LLM calls (None: no cap)."
    )
    llm_budget_tokens: int | None = Field(default=None, ge=0, description="Token cap.")
    llm_price_in: float | None = Field(default=None, ge=0, description="USD per Mtok in.")
    llm_price_out: float | None = Field(default=None, ge=0, description="USD per Mtok out.")
    llm_max_retries: int = Field(default=3, ge=0, description="SDK retries (with backoff).")
    llm_timeout_s: float = Field(default=120.0, gt=0, description="Per request.")
    llm_base_url: str | None = Field(default=None, description="Provider endpoint override.")
    llm_api_key: SecretStr | None = Field(
        default=None,
        exclude=True,  # never written to the ledger with the other settings
        description="API key (default: ANTHROPIC_API_KEY / OPENAI_API_KEY).",
    )
    llm_tool_choice: str | None = Field(
        default=None,
        description="openai-chat only: the servers' tool_choice ('auto', 'none', 'required'; "
        "None leaves the server's default).",
    )
    llm_bench_budget_s: float = Field(
        default=120.0,
        ge=0,
        description="Device seconds one LLM expansion may spend in its benchmark and profile "
        "tools (0: the tools are not offered).",
    )
    llm_context_chars: int = Field(
        default=60_000,
        ge=2_000,
        description="Characters of run context (tables, attempts, lessons) in an expansion "
        "prompt; longer sections are cut, the least important first.",
    )
    taint_remeasures: int = Field(
        default=2,
        ge=0,
        description="A sweep measured under contention or throttling is measured again up to "
        "this many times; a verdict from a tainted sweep never promotes and is never scored.",
    )
    expansion_retries: int = Field(
        default=1,
        ge=0,
        description="Times a step's expansion runs again after a provider error, malformed "
        "replies or an infrastructure error (never after 'no change'); then it is skipped.",
    )
    max_infrastructure_failures: int = Field(
        default=5,
        ge=1,
        description="Stop after this many expansions in a row end in provider errors, malformed "
        "replies or other infrastructure failures (each is skipped, never scored).",
    )
    max_same_failures: int = Field(
        default=8,
        ge=1,
        description="Stop after this many candidates in a row (in one invocation) fail for one "
        "identical reason (the same static findings, or the same verdict reason): a CONSTRAINT, "
        "the workload or the device is at fault, not the ideas.",
    )
    research_every: int = Field(
        default=0, ge=0, description="Run the researcher every N steps (0: on LITERATURE only)."
    )
    inspect_workload: bool = Field(
        default=True, description="Ask the workload inspector for ideas when a run starts."
    )
    compose_regimes: bool = Field(
        default=True,
        description="When the run's own per-config results show different candidates winning "
        "different regimes of sizes, build and judge one candidate that dispatches to each.",
    )
    repair_narrow_misses: bool = Field(
        default=True,
        description="When a candidate fails the gate only narrowly (every failing config's "
        "worst element within repair_margin times its tolerance), judge it once more with a "
        "headroom idea of the library applied to its code, declared a child of its parent.",
    )
    repair_margin: float = Field(
        default=2.0,
        gt=1,
        description="How far past its tolerance a failing config may be and still count as a "
        "narrow miss (a rounding's tail; a wrong result misses by orders of magnitude).",
    )
    check_feasibility: bool = Field(
        default=True,
        description="When a run stops, judge its frontier on the config set's feasibility "
        "configs (e.g. track3's config 14: correctness only); export requires a pass.",
    )
    check_inherited_failures: bool = Field(
        default=True,
        description="When a child of the frontier fails configs where it runs the frontier's "
        "code (its change cannot reach them), judge the frontier on the inputs that failed "
        "and demote it if it fails them too; its idea is then not charged.",
    )
    verify_frontier: bool = Field(
        default=True, description="Replicate every new frontier with A/A and planted controls."
    )
    verification: VerificationMode = Field(
        default=VerificationMode.AMORTIZED,
        description="amortized: a new frontier is replicated on the next sweep, beside the "
        "frontier it replaced (one arm more, no separate judge); separate: a judge of its own "
        "with an A/A and a planted-slowdown control. A frontier still unverified when the run "
        "stops gets the separate one.",
    )
    seed: int = Field(default=0, description="Seed of the search's random choices.")
    noise_floor: float = Field(
        default=0.01, ge=0, description="Relative change a CI must clear to count as faster."
    )
    objective: ObjectiveKind = Field(default=ObjectiveKind.GEOMEAN, description="Aggregate.")
    objective_cap: float = Field(default=3.0, gt=1, description="Cap for capped_geomean.")
    k_min: float = Field(default=2.0, gt=0, description="Weakest idea prior strength.")
    k_max: float = Field(default=20.0, gt=0, description="Strongest idea prior strength.")
    human_idea_quality: float = Field(
        default=0.75, gt=0, lt=1, description="Optimistic prior q of a human IDEA."
    )
    human_idea_uncertainty: float = Field(
        default=1.0, ge=0, le=1, description="Uncertainty H of a human IDEA (1: weak prior)."
    )
    eval_timeout_s: float = Field(default=600.0, gt=0, description="Cap per evaluation.")
    lock_dir: Path = Field(
        default=Path("/tmp/ratchet-locks"), description="Machine-wide per-device lock files."
    )
    reuse_noise_floor: bool = Field(
        default=True,
        description="Reuse an A/A noise floor measured by an earlier run on this machine when "
        "the device's fingerprint (GPU UUID, driver, library versions), the seed, the configs "
        "and the timing plan are all the same (kept in LOCK_DIR/noise-floors); off: calibrate "
        "in every run.",
    )
    compile_cache_dir: Path | None = Field(
        default=Path("/tmp/ratchet-compile-cache"),
        description="Triton and TorchInductor caches shared by every judge on this machine "
        "(content-addressed: unchanged code is not recompiled); unset it to compile afresh "
        "in each judge's private home.",
    )
    torch_threads: int | None = Field(
        default=None, gt=0, description="Judge intra-op threads (default: 1 on CPU)."
    )
    screen_timing: TimingPlan | None = Field(
        default=None, description="Screen timing plan (default: by device)."
    )
    sweep_timing: TimingPlan | None = Field(
        default=None, description="Full-sweep timing plan (default: by device)."
    )
    screen_gate: ScreenGateRule = Field(
        default=ScreenGateRule.FRONTIER,
        description="Which correct screened candidates get the full sweep. frontier: those "
        "faster than the frontier beyond the noise floor on some screening config, or clearly "
        "faster than a parent that is not the frontier; parent: every one not clearly slower "
        "than its parent (a sweep per candidate, as before).",
    )
    screen_time_share: float = Field(
        default=0.1,
        gt=0,
        le=1,
        description="The longest one screen may take, as a share of the run's time budget "
        "(never under 60 s, never over eval_timeout_s); a screen past it is a TIMEOUT. A "
        "candidate whose build compiles for minutes would otherwise spend a short run's time.",
    )

    screen_timeout_retries: int = Field(
        default=1,
        ge=0,
        description="How many times a screen cut at its time limit runs again before the "
        "candidate is judged failed_run: the compile caches keep what the cut judge built, "
        "so the next attempt starts past it (run 13: two fused fp32 variants were cut at 60 s "
        "while Triton compiled, and their ideas were never measured).",
    )

    @field_validator("expander")
    @classmethod
    def _known_expander(cls, value: str) -> str:
        ExpanderKind.parse(value)
        return value

    @property
    def expander_kind(self) -> ExpanderKind:
        """The parsed expander."""
        return ExpanderKind.parse(self.expander)[0]

    @property
    def ledger_path(self) -> Path:
        """The SQLite ledger of the run."""
        return self.run_dir / "ledger.sqlite"

    @field_validator("devices")
    @classmethod
    def _devices_list(cls, value: str | None) -> str | None:
        if value is None or value.strip().lower() == "all":
            return None if value is None else "all"
        parts = [part.strip() for part in value.split(",")]
        if not all(part.isdigit() for part in parts):
            raise ValueError("use 'all' or comma-separated device indices, e.g. 0,1")
        if len(set(parts)) != len(parts):
            raise ValueError("a device is listed twice; list each index once, e.g. 0,1")
        return ",".join(str(int(part)) for part in parts)

    @field_validator("ledger")
    @classmethod
    def _ledger_is_a_url(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                make_url(value)
            except ArgumentError:
                raise ValueError(
                    "not a database URL; use postgresql+psycopg://USER:PASSWORD@HOST/DATABASE "
                    "or sqlite:///PATH, or leave it unset for RUN_DIR/ledger.sqlite"
                ) from None
        return value

    @field_serializer("ledger")
    def _ledger_without_password(self, value: str | None) -> str | None:
        # Settings are recorded in the ledger: never with the database password.
        return None if value is None else make_url(value).render_as_string(hide_password=True)

    @property
    def ledger_url(self) -> str:
        """The run's ledger: the `ledger` URL, else the SQLite file in the run dir."""
        return self.ledger if self.ledger is not None else f"sqlite:///{self.ledger_path}"

    @property
    def ledger_journal(self) -> Path | None:
        """The head journal of a ledger that is not a SQLite file (in the run dir: each run
        anchors the shared chain where it runs); None: beside the SQLite file."""
        if self.ledger is None or make_url(self.ledger).get_backend_name() == "sqlite":
            return None
        return self.run_dir / "ledger.heads"


def default_timing(device_kind: str, stage: str) -> TimingPlan:
    """Timing plans that fit the device: CPU wall clock needs longer blocks than CUDA events."""
    if device_kind == "cuda":
        if stage == "screen":
            return TimingPlan(warmup_calls=20, target_block_s=0.002, max_rounds=30, budget_s=3.0)
        return TimingPlan(
            warmup_calls=20,
            target_block_s=0.002,
            max_rounds=400,
            # Host-bound configs never reach the 1% half-width: 4 s each keeps a 13-config
            # sweep near a minute (8 s made it 100 s on the H200, a third of a search step).
            budget_s=4.0,
            target_half_width=0.01,
            # The eager reference is only reported against (decisions compare with the parent
            # and the frontier); on host-bound configs it cost more than both of them together.
            reference_half_width=0.03,
        )
    if stage == "screen":
        return TimingPlan(min_rounds=6, max_rounds=20, budget_s=1.5, target_half_width=0.03)
    return TimingPlan(
        min_rounds=8, max_rounds=40, budget_s=3.0, target_half_width=0.02, reference_half_width=0.04
    )


def _read_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise SettingsError(f"config file {path} does not exist; create it or drop --config")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from exc
    section = data.get("ratchet", data)
    if not isinstance(section, dict):
        raise SettingsError(f"config file {path}: [ratchet] must be a table")
    return section


def _read_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    fields = Settings.model_fields
    values: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX) or key == ENV_PREFIX + "CONFIG":
            continue
        name = key[len(ENV_PREFIX) :].lower()
        if name not in fields:
            known = ", ".join(ENV_PREFIX + f.upper() for f in fields)
            raise SettingsError(f"unknown environment variable {key}; known: {known}")
        values[name] = raw
    return values


def load_settings(
    flags: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Defaults, then the config file (named, or ratchet.toml in the run dir), then RATCHET_*
    variables, then command-line flags (None flags are 'not given')."""
    environ = os.environ if environ is None else environ
    given = {k: v for k, v in flags.items() if v is not None}
    env_values = _read_environment(environ)
    named = config_file or (
        Path(environ[ENV_PREFIX + "CONFIG"]) if ENV_PREFIX + "CONFIG" in environ else None
    )
    run_dir = Path(given.get("run_dir") or env_values.get("run_dir") or Settings().run_dir)
    file_values: dict[str, Any] = {}
    if named is not None:
        file_values = _read_file(named)
    elif (run_dir / RUN_DIR_CONFIG).is_file():
        file_values = _read_file(run_dir / RUN_DIR_CONFIG)
    merged = {**file_values, **env_values, **given}
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (got {err.get('input')!r})"
            for err in exc.errors()
        )
        raise SettingsError(f"invalid settings: {problems}") from None
