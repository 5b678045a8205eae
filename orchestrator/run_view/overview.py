"""The overview of a run: its frontier against the named baseline, per-config table, budgets
used, devices and noise floors."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from ledger import Ledger
from orchestrator.budget import earlier_invocations
from orchestrator.evaluation import BASELINE_ARM
from orchestrator.events import EvaluationSummary, EventKind
from orchestrator.run_view.common import Ratio, RunData, ratio_of
from orchestrator.status import StatusReport, build_status


class ConfigRow(BaseModel):
    """One config of a candidate's evaluation."""

    config_id: str = Field(description="Workload configuration.")
    correct: bool = Field(description="Every correctness trial passed.")
    failed_elements: int = Field(description="Failing output elements over all trials.")
    max_abs_error: float | None = Field(description="Largest |out - ref| seen.")
    tolerance_used: float | None = Field(
        default=None,
        description="The largest share of its tolerance any element used, over all trials "
        "(below 1 passes; near 1, a pass a fresh input may undo; None: not reported).",
    )
    ms: float | None = Field(description="Median time of one call of the candidate, in ms.")
    baseline_ms: float | None = Field(description="Median time of one call of the baseline.")
    x_baseline: Ratio | None = Field(description="Speed over the baseline (> 1: faster).")
    x_parent: Ratio | None = Field(description="Speed over its declared parent.")
    x_frontier: Ratio | None = Field(description="Speed over the frontier of that moment.")
    floor_ratio: float | None = Field(
        description="Measured time over the roofline floor of one call (1: at the floor); "
        "None when the judge's result file with the floor is gone."
    )
    protocol: str = Field(description="How the config was timed (e.g. 'batched-12').")
    tainted: bool = Field(description="Measured under contention or throttling.")


class EvaluationTable(BaseModel):
    """A candidate's per-config results at one stage."""

    evaluation_id: str = Field(description="Keys its measurement rows in the ledger.")
    stage: str = Field(description="screen or sweep.")
    outcome: str = Field(description="The judge's outcome (passed, incorrect, timeout...).")
    message: str = Field(description="The judge's message (a traceback tail on errors).")
    wall_s: float = Field(description="Wall time of the judge process, in seconds.")
    protocol: str = Field(description="Timing protocol of the evaluation.")
    taint: list[str] = Field(description="What tainted the timing (empty: nothing).")
    rows: list[ConfigRow] = Field(description="One row per config.")


class BudgetUse(BaseModel):
    """What the run has used, over all its invocations, next to its limits."""

    wall_s: float = Field(description="Wall time of every invocation, the running one too.")
    minutes_budget: float | None = Field(description="--minutes of the latest invocation.")
    invocations: int = Field(description="Invocations of `ratchet run` so far.")
    device_s: float = Field(
        description="Device (GPU or CPU) seconds: judge processes plus agents' benchmarks."
    )
    llm_tokens_in: int = Field(description="Prompt tokens billed, over all LLM calls.")
    llm_tokens_out: int = Field(description="Completion tokens billed.")
    llm_tokens_cached: int = Field(description="Prompt tokens read from or written to a cache.")
    llm_usd: float = Field(description="What the LLM calls cost, in USD.")
    llm_budget_usd: float | None = Field(description="The run's LLM budget in USD.")
    llm_budget_tokens: int | None = Field(description="The run's LLM token budget, if any.")


class DeviceView(BaseModel):
    """A device the run was qualified on."""

    fingerprint_id: str = Field(description="Fingerprint of machine and software.")
    environment: dict[str, Any] = Field(description="The fingerprint's content.")
    figures: dict[str, float] = Field(description="Measured by qualification (peaks, tick).")
    noise_floors: dict[str, float] = Field(
        description="Calibrated A/A floor per config set measured on this device."
    )
    noise_by_class: dict[str, dict[str, float]] = Field(
        description="A/A excursion per config class, per config set."
    )


class Overview(BaseModel):
    """The overview page: `ratchet status` plus the frontier's table, budgets and devices."""

    status: StatusReport = Field(description="What `ratchet status --json` says.")
    frontier_sha: str | None = Field(description="Commit of the frontier (None: none yet).")
    objective: float | None = Field(description="The frontier's objective over the baseline.")
    objective_kind: str | None = Field(description="Which aggregate the objective is.")
    objective_ci: Ratio | None = Field(
        description="Paired aggregate ratio over the baseline with its 95% CI."
    )
    baseline: str | None = Field(description="Exactly what the speedups are measured against.")
    frontier_table: EvaluationTable | None = Field(description="The frontier's last sweep.")
    budgets: BudgetUse = Field(description="Budgets used.")
    devices: list[DeviceView] = Field(description="Devices qualified, oldest first.")
    head_seq: int = Field(description="Ledger head this view was built at.")


def _ratios(ratios: list[dict[str, Any]]) -> dict[str, Ratio]:
    found = {}
    for raw in ratios:
        ratio = ratio_of(raw)
        if ratio is not None:
            found[str(raw.get("other"))] = ratio
    return found


def evaluation_table(ledger: Ledger, data: RunData, summary: EvaluationSummary) -> EvaluationTable:
    """The per-config table of one evaluation: ledger medians and ratios, with the roofline
    floor and per-config protocol from the judge's result file when it is still there."""
    medians: dict[tuple[str, str], float] = {
        (m.record.config_id, m.record.arm): m.record.median_ns
        for m in ledger.measurements(evaluation_id=summary.evaluation_id)
    }
    result = {c.get("config_id"): c for c in data.result_json(summary).get("configs", [])}
    rows = []
    for config in summary.configs:
        ratios = _ratios(config.ratios)
        ns = medians.get((config.config_id, "candidate"))
        base = medians.get((config.config_id, BASELINE_ARM))
        full = result.get(config.config_id, {})
        floor = full.get("floor_ns")
        rows.append(
            ConfigRow(
                config_id=config.config_id,
                correct=config.correct,
                failed_elements=config.failed_elements,
                max_abs_error=config.max_abs_error,
                tolerance_used=config.tolerance_used,
                ms=ns / 1e6 if ns is not None else None,
                baseline_ms=base / 1e6 if base is not None else None,
                x_baseline=ratios.get(BASELINE_ARM),
                x_parent=ratios.get("parent"),
                x_frontier=ratios.get("frontier"),
                floor_ratio=ns / float(floor) if ns and floor else None,
                protocol=str(full.get("protocol") or summary.protocol),
                tainted=bool(summary.taint),
            )
        )
    return EvaluationTable(
        evaluation_id=summary.evaluation_id,
        stage=summary.stage.value,
        outcome=summary.outcome,
        message=summary.message,
        wall_s=summary.wall_s,
        protocol=summary.protocol,
        taint=list(summary.taint),
        rows=rows,
    )


def budget_use(ledger: Ledger, data: RunData) -> BudgetUse:
    """Time, device seconds, tokens and money used by the whole run."""
    events = ledger.events()
    earlier_s, count = earlier_invocations(events)
    starts = [e for e in events if e.record.kind == EventKind.RUN_STARTED]
    latest_s = 0.0
    if starts:  # the newest invocation: from its start to its last recorded work
        begun = datetime.fromisoformat(starts[-1].created_at)
        latest_s = max(0.0, (datetime.fromisoformat(events[-1].created_at) - begun).total_seconds())
    calls = [e.record.payload for e in events if e.record.kind == EventKind.LLM_CALL]
    settings = data.state.run.settings if data.state.run else {}
    bench_s = sum(
        float(stored.record.cost.get("bench_device_s", 0.0)) for stored in ledger.candidates()
    )
    tokens = settings.get("llm_budget_tokens")
    return BudgetUse(
        wall_s=earlier_s + latest_s,
        minutes_budget=settings.get("minutes"),
        invocations=count + (1 if starts else 0),
        device_s=sum(summary.wall_s for _, _, summary in data.evaluations) + bench_s,
        llm_tokens_in=sum(int(c.get("input_tokens", 0)) for c in calls),
        llm_tokens_out=sum(int(c.get("output_tokens", 0)) for c in calls),
        llm_tokens_cached=sum(
            int(c.get("cache_read_tokens", 0)) + int(c.get("cache_write_tokens", 0)) for c in calls
        ),
        llm_usd=data.state.llm_usd,
        llm_budget_usd=settings.get("llm_budget_usd"),
        llm_budget_tokens=int(tokens) if tokens is not None else None,
    )


def devices(ledger: Ledger) -> list[DeviceView]:
    """Every device the run was qualified on (parallel workers may add more than one), with
    the noise floors calibrated on it."""
    floors = [e.record.payload for e in ledger.events(kind=EventKind.NOISE_FLOOR.value)]
    seen: dict[str, DeviceView] = {}
    for stored in ledger.events(kind=EventKind.DEVICE_QUALIFIED.value):
        payload = stored.record.payload
        fid = str(payload.get("fingerprint_id", ""))
        fingerprint = ledger.fingerprint(fid)
        report = payload.get("report", {})
        mine = [f for f in floors if f.get("fingerprint_id") == fid]
        seen[fid] = DeviceView(
            fingerprint_id=fid,
            environment=dict(fingerprint.record.content) if fingerprint else {},
            figures={k: float(v) for k, v in report.items() if isinstance(v, int | float)},
            noise_floors={str(f["config_set"]): float(f["floor"]) for f in mine},
            noise_by_class={str(f["config_set"]): dict(f.get("classes", {})) for f in mine},
        )
    return list(seen.values())


def overview(ledger: Ledger, data: RunData) -> Overview:
    """The overview of the run as read in `data`."""
    status = build_status(data.run_dir, ledger)
    state = data.state
    frontier = state.candidates.get(state.frontier_sha or "")
    sweep = data.last_sweep(frontier.sha) if frontier else None
    return Overview(
        status=status,
        frontier_sha=frontier.sha if frontier else None,
        objective=frontier.objective if frontier else None,
        objective_kind=frontier.details.get("objective_kind") if frontier else None,
        objective_ci=ratio_of(frontier.details.get("vs_baseline")) if frontier else None,
        baseline=state.run.baseline if state.run else None,
        frontier_table=evaluation_table(ledger, data, sweep) if sweep else None,
        budgets=budget_use(ledger, data),
        devices=devices(ledger),
        head_seq=status.ledger_entries,
    )
