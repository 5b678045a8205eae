"""`ratchet inject`: a message validated against the run it steers, before anything is written.

A CONSTRAINT must name a real tunable value of the workload (TUNABLE_SPACE of the seed), or a
name that is no tunable, and must not be broken by the frontier itself: a constraint the
frontier breaks fails every candidate expanded from it. A RETRACT must name a message in force.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import git

from agents.tunables import TunablesError, read_space, read_tunables
from harness.static_checks import Finding, Rule, check_sources, parse_constraint
from kernels.workload import Workload
from ledger import MessageRecord, StoredMessage
from orchestrator.messages import MessageContext, MessageError, MessageKind, parse_message
from orchestrator.state import SearchState
from orchestrator.workloads import load_workload
from orchestrator.workspace import RunPaths, open_repository, read_file, read_sources


@dataclass(frozen=True)
class RunCode:
    """The run's code, which a CONSTRAINT is checked against."""

    repo: git.Repo
    workload: Workload


def run_code(run_dir: Path, state: SearchState) -> RunCode:
    """The run's repository and workload, resolved as `ratchet run` resolved it."""
    assert state.run is not None
    spec = str(state.run.settings.get("workload") or state.run.workload)
    return RunCode(repo=open_repository(RunPaths(run_dir)), workload=load_workload(spec))


def _seed_space(state: SearchState, code: RunCode | None) -> dict[str, list[str]]:
    if code is None or state.seed_sha is None:
        return {}
    try:
        return read_space(read_file(code.repo, state.seed_sha, code.workload.candidate_file))
    except (TunablesError, SyntaxError, ValueError, git.GitCommandError):
        return {}  # a seed without declared tunables: no 'forbid TUNABLE=VALUE' can hold


def message_context(
    state: SearchState, messages: list[StoredMessage], code: RunCode | None
) -> MessageContext:
    """What a message of this run may refer to."""
    assert state.run is not None
    return MessageContext(
        config_ids=state.run.config_ids,
        idea_ids=list(state.ideas),
        candidate_shas=[c.sha for c in state.candidates.values() if c.expandable],
        tunables=_seed_space(state, code),
        retractable={
            m.seq: f"{m.record.kind} {m.record.text}"
            for m in messages
            if m.record.kind != MessageKind.RETRACT and m.seq not in state.retracted
        },
    )


def constraint_findings(text: str, sources: dict[str, str], workload: Workload) -> list[Finding]:
    """Where a candidate's sources break one CONSTRAINT (nothing else is reported)."""
    report = check_sources(
        sources, workload.static_policy, workload.candidate_file, [parse_constraint(text)]
    )
    return [f for f in report.findings if f.rule is Rule.CONSTRAINT]


def _check_frontier(record: MessageRecord, state: SearchState, code: RunCode) -> None:
    sha = state.frontier_sha or state.seed_sha
    if sha is None:
        return
    sources = read_sources(code.repo, sha)
    findings = constraint_findings(record.text, sources, code.workload)
    if not findings:
        return
    first = findings[0]
    more = f", and {len(findings) - 1} more" if len(findings) > 1 else ""
    fix = "forbid something the frontier does not use"
    tunable = record.payload.get("tunable")
    if tunable:
        try:
            current = read_tunables(sources[code.workload.candidate_file]).get(str(tunable))
        except (TunablesError, SyntaxError, ValueError, KeyError):
            current = None
        others = [v for v in _seed_space(state, code).get(str(tunable), []) if v != current]
        if others:
            fix += ": " + ", ".join(f"'forbid {tunable}={v}'" for v in others)
    raise MessageError(
        f"CONSTRAINT {record.text!r} is broken by the frontier {sha[:10]} itself "
        f"({first.file}:{first.line}: {first.message}{more}): every candidate expanded from it "
        f"would fail the static checks; {fix}"
    )


def build_message(
    kind: str,
    text: str,
    author: str,
    state: SearchState,
    messages: list[StoredMessage],
    code: RunCode | None,
) -> MessageRecord:
    """The ledger record of a valid message; MessageError says what is wrong and the format.
    A CONSTRAINT needs the run's code (`code`)."""
    record = parse_message(kind, text, author, message_context(state, messages, code))
    if record.kind == MessageKind.CONSTRAINT:
        if code is None:
            raise MessageError("a CONSTRAINT is checked against the run's code; none was given")
        _check_frontier(record, state, code)
    return record
