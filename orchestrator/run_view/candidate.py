"""One candidate in full: idea, commit message, diff, per-config results, verdict, judge logs,
the agent's transcript and cost, and the commands that reproduce or ship it."""

from __future__ import annotations

import json
import shlex
from typing import Any

import git
from pydantic import BaseModel, Field

from ledger import Ledger
from orchestrator.events import EventKind
from orchestrator.llm_setup import TRANSCRIPT
from orchestrator.run_view.common import (
    JUDGE_LOG,
    Ratio,
    RunData,
    VerdictClass,
    ratio_of,
    verdict_class,
)
from orchestrator.run_view.overview import EvaluationTable, evaluation_table
from orchestrator.workspace import WorkspaceError, open_repository

MAX_DIFF = 200_000
MAX_LOG = 60_000
MAX_TURN = 20_000


class JudgeLog(BaseModel):
    """The log of one judge process of the candidate."""

    evaluation_id: str = Field(description="The evaluation it belongs to.")
    path: str = Field(description="Where it is in the run dir.")
    text: str | None = Field(description="Its text, cut to its last part (None: not kept).")


class LLMCall(BaseModel):
    """One LLM call of the candidate's step, as the ledger recorded it."""

    role: str = Field(description="expander, researcher or inspector.")
    model: str = Field(description="Model asked.")
    input_tokens: int = Field(description="Prompt tokens billed.")
    output_tokens: int = Field(description="Completion tokens billed.")
    usd: float = Field(description="Its cost.")
    wall_s: float = Field(description="Its wall time.")
    outcome: str = Field(description="'ok' or 'error'.")
    turn: str | None = Field(
        description="The model's answer from the run's transcript, as JSON (None: not kept)."
    )


class CandidateDetail(BaseModel):
    """The candidate page."""

    sha: str = Field(description="Candidate commit.")
    step: int = Field(description="Step that made it (0: the seed).")
    parent_sha: str | None = Field(description="Declared parent.")
    idea_id: str | None = Field(description="Idea it implemented.")
    idea_text: str | None = Field(description="That idea in words.")
    agent: str = Field(description="Agent that wrote it.")
    message: str = Field(description="Its full commit message.")
    diff: str = Field(description="git diff from its declared parent (cut at 200,000 chars).")
    diff_problem: str | None = Field(description="Why there is no diff (None: there is).")
    verdict: str | None = Field(description="Its verdict as written (None: not judged yet).")
    verdict_class: VerdictClass | None = Field(description="promoted/rejected/... or None.")
    verdict_stage: str | None = Field(description="Stage that decided it.")
    reason: str = Field(description="Why the verdict.")
    objective: float | None = Field(description="Objective over the baseline.")
    vs_parent: Ratio | None = Field(description="Aggregate speed over its parent.")
    vs_frontier: Ratio | None = Field(description="Aggregate speed over the frontier then.")
    vs_baseline: Ratio | None = Field(description="Aggregate speed over the baseline.")
    tainted: bool = Field(description="Decided on a sweep measured under contention.")
    demoted: bool = Field(description="Promoted, then its claim did not replicate.")
    verification: str | None = Field(description="The verifier's verdict on it, if it ran.")
    static_findings: list[dict[str, Any]] = Field(description="Static check findings.")
    evaluations: list[EvaluationTable] = Field(description="Every evaluation, in order.")
    judge_logs: list[JudgeLog] = Field(description="Each evaluation's judge log.")
    cost: dict[str, float] = Field(description="What producing it cost (wall s, device s...).")
    llm_calls: list[LLMCall] = Field(description="The LLM calls of its step.")
    llm_usd: float = Field(description="Their total cost.")
    transcript_note: str | None = Field(description="Why the transcript is not shown.")
    lessons: list[str] = Field(description="Lessons the agent noted on this step.")
    checkout_command: str = Field(description="`ratchet checkout` of this commit, to copy.")
    export_command: str = Field(description="`ratchet export` of this commit, to copy.")


def _diff(data: RunData, parent: str | None, sha: str) -> tuple[str, str | None]:
    if parent is None:
        return "", "the seed has no parent: it is the reference in the candidate API"
    try:
        text = str(open_repository(data.paths).git.diff(parent, sha))
    except (WorkspaceError, git.GitCommandError) as exc:
        return "", f"git cannot diff {parent[:10]}..{sha[:10]}: {exc}"
    if len(text) > MAX_DIFF:
        text = text[:MAX_DIFF] + f"\n[... {len(text) - MAX_DIFF} characters cut]"
    return text, None


def _judge_logs(data: RunData, sha: str) -> list[JudgeLog]:
    logs = []
    for summary in data.evaluations_of(sha):
        path = data.eval_dir(summary) / JUDGE_LOG
        try:
            text: str | None = path.read_text("utf-8", errors="replace")[-MAX_LOG:]
        except OSError:
            text = None
        where = str(path.relative_to(data.run_dir))
        logs.append(JudgeLog(evaluation_id=summary.evaluation_id, path=where, text=text))
    return logs


def _transcript(data: RunData) -> list[dict[str, Any]] | None:
    try:
        lines = (data.run_dir / TRANSCRIPT).read_text("utf-8").splitlines()
    except OSError:
        return None
    try:
        return [json.loads(line) for line in lines if line.strip()]
    except ValueError:
        return None


def _llm_calls(ledger: Ledger, data: RunData, step: int) -> tuple[list[LLMCall], str | None]:
    """The step's calls; each gets its transcript turn when the transcript lines up with the
    recorded calls one for one (a replayed invocation writes none, so none are matched)."""
    calls = [e.record.payload for e in ledger.events(kind=EventKind.LLM_CALL.value)]
    entries = _transcript(data)
    recorded = [c for c in calls if c.get("backend") != "replay"]
    lined_up = entries is not None and len(entries) == len(recorded)
    note = None
    if calls and entries is None:
        note = f"no readable {TRANSCRIPT} in the run dir"
    elif calls and not lined_up:
        note = f"{TRANSCRIPT} does not line up with the recorded LLM calls; turns not shown"
    out, index = [], 0
    for call in calls:
        turn = None
        if call.get("backend") != "replay":
            if lined_up and entries is not None:
                turn = json.dumps(entries[index].get("turn"), indent=2)[:MAX_TURN]
            index += 1
        if int(call.get("step", -1)) == step:
            out.append(
                LLMCall(
                    role=str(call.get("role")),
                    model=str(call.get("model")),
                    input_tokens=int(call.get("input_tokens", 0)),
                    output_tokens=int(call.get("output_tokens", 0)),
                    usd=float(call.get("usd", 0.0)),
                    wall_s=float(call.get("wall_s", 0.0)),
                    outcome=str(call.get("outcome")),
                    turn=turn,
                )
            )
    return out, note if out else None


def commands(data: RunData, sha: str) -> tuple[str, str]:
    """The `ratchet checkout` and `ratchet export` command lines of a candidate."""
    where = shlex.quote(str(data.run_dir))
    out = shlex.quote(str(data.run_dir / f"export-{sha[:10]}"))
    return (
        f"ratchet checkout {sha} --run-dir {where}",
        f"ratchet export --run-dir {where} --sha {sha} --out {out}",
    )


def candidate_detail(ledger: Ledger, data: RunData, prefix: str) -> CandidateDetail:
    """The candidate with this sha (or unique prefix); RunViewError when there is none."""
    state = data.state
    cand = data.candidate(prefix)
    idea = state.ideas.get(cand.idea_id or "")
    step = state.steps.get(cand.step)
    diff, diff_problem = _diff(data, cand.parent_sha, cand.sha)
    calls, note = _llm_calls(ledger, data, cand.step) if cand.step else ([], None)
    stored = ledger.candidate(cand.sha)
    checkout, export = commands(data, cand.sha)
    return CandidateDetail(
        sha=cand.sha,
        step=cand.step,
        parent_sha=cand.parent_sha,
        idea_id=cand.idea_id,
        idea_text=idea.text if idea else None,
        agent=cand.agent,
        message=cand.message,
        diff=diff,
        diff_problem=diff_problem,
        verdict=cand.verdict.value if cand.verdict else None,
        verdict_class=verdict_class(cand.verdict),
        verdict_stage=cand.verdict_stage,
        reason=cand.reason,
        objective=cand.objective,
        vs_parent=ratio_of(cand.details.get("vs_parent")),
        vs_frontier=ratio_of(cand.details.get("vs_frontier")),
        vs_baseline=ratio_of(cand.details.get("vs_baseline")),
        tainted=cand.tainted,
        demoted=cand.sha in state.demoted,
        verification=state.verifications.get(cand.sha),
        static_findings=list(step.static.findings) if step and step.static else [],
        evaluations=[evaluation_table(ledger, data, s) for s in data.evaluations_of(cand.sha)],
        judge_logs=_judge_logs(data, cand.sha),
        cost=dict(stored.record.cost) if stored else {},
        llm_calls=calls,
        llm_usd=sum(c.usd for c in calls),
        transcript_note=note,
        lessons=[n.text for n in state.lessons if n.step == cand.step and cand.step > 0],
        checkout_command=checkout,
        export_command=export,
    )
