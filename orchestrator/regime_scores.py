"""Per-config speed of every measured candidate on one footing: paired ratios to one anchor."""

from __future__ import annotations

import heapq
from typing import NamedTuple

from harness.models import Outcome
from ledger import Ledger
from orchestrator.evaluation import REFERENCE_SHA
from orchestrator.events import EvaluationSummary, EventKind, InheritedCheck

# What a measurement must have ended in to say how fast a variant is where it passed.
MEASURED_OUTCOMES = frozenset({Outcome.PASSED.value, Outcome.INCORRECT.value})
# A step through the eager baseline costs more than one between two candidates: the baseline's
# own time drifts between judge processes (the H200 read one code at 3.47x and 3.67x over it in
# two sweeps) while two candidates paired in one process agree to a few tenths of a percent.
CANDIDATE_STEP, BASELINE_STEP = 1, 4


class Score(NamedTuple):
    """A speedup and its confidence interval."""

    median: float
    low: float
    high: float

    def inverse(self) -> Score:
        """The same measurement read the other way round."""
        return Score(1.0 / self.median, 1.0 / self.high, 1.0 / self.low)

    def times(self, other: Score) -> Score:
        """Chained: the interval widens conservatively (bounds multiply)."""
        return Score(self.median * other.median, self.low * other.low, self.high * other.high)


Edges = dict[str, dict[str, list[tuple[str, Score]]]]  # config -> sha -> (other sha, ratio)


def _ratio(ratios: list[dict[str, object]], other: str) -> Score | None:
    for entry in ratios:
        if entry.get("arm") != "candidate" or entry.get("other") != other:
            continue
        values = [entry.get(k) for k in ("median", "ci_low", "ci_high")]
        if all(isinstance(v, int | float) and v > 0 for v in values):
            return Score(*(float(v) for v in values))  # type: ignore[arg-type]
    return None


def _summaries(ledger: Ledger) -> list[EvaluationSummary]:
    return [
        EvaluationSummary.model_validate(stored.record.payload)
        for stored in ledger.events(EventKind.EVALUATION)
    ]


def busiest_device(summaries: list[EvaluationSummary]) -> str | None:
    """The device that measured most (None: the run's one device, recorded without a slot)."""
    counts: dict[str | None, int] = {}
    for summary in summaries:
        counts[summary.device_slot] = counts.get(summary.device_slot, 0) + 1
    return max(counts, key=lambda slot: counts[slot]) if counts else None


def correct_configs(summaries: list[EvaluationSummary]) -> dict[str, set[str]]:
    """Where each judged candidate was correct: checked and passed, and never failed in any
    evaluation (run 9 on the H200 composed a variant into the config its sweep had failed by
    one element, because its screen there had passed: a pass on some inputs is not
    correctness). Tainted evaluations count too: taint spoils timings, not a failure."""
    passed: dict[str, set[str]] = {}
    failed: dict[str, set[str]] = {}
    for summary in summaries:
        if summary.outcome not in MEASURED_OUTCOMES:
            continue
        for config in summary.configs:
            if config.correct:
                passed.setdefault(summary.sha, set()).add(config.config_id)
            elif config.trials:
                failed.setdefault(summary.sha, set()).add(config.config_id)
    return {sha: configs - failed.get(sha, set()) for sha, configs in passed.items()}


def _read(summaries: list[EvaluationSummary]) -> tuple[Edges, dict[str, set[str]]]:
    """Paired ratios between arms of every untainted evaluation of one device (a chain of
    ratios never mixes devices), and where each judged candidate was correct (an arm's
    speed says nothing of its correctness)."""
    edges: Edges = {}
    correct = correct_configs(summaries)
    device = busiest_device(summaries)
    for summary in summaries:
        if summary.taint or summary.outcome not in MEASURED_OUTCOMES:
            continue
        if summary.device_slot != device:
            continue
        for config in summary.configs:
            if not config.correct:
                continue
            graph = edges.setdefault(config.config_id, {})
            for arm, other_sha in summary.arms.items():
                ratio = _ratio(config.ratios, arm) if arm != "candidate" else None
                if ratio is not None and other_sha != summary.sha:
                    graph.setdefault(summary.sha, []).append((other_sha, ratio))
                    graph.setdefault(other_sha, []).append((summary.sha, ratio.inverse()))
    return edges, correct


def _chained(graph: dict[str, list[tuple[str, Score]]], anchor: str) -> dict[str, Score]:
    """Each node's speed relative to the anchor, along its cheapest path of paired ratios."""
    best: dict[str, tuple[int, Score]] = {anchor: (0, Score(1.0, 1.0, 1.0))}
    queue = [(0, anchor)]
    while queue:
        cost, node = heapq.heappop(queue)
        if cost > best[node][0]:
            continue
        for other, ratio in graph.get(node, []):
            step = BASELINE_STEP if REFERENCE_SHA in (node, other) else CANDIDATE_STEP
            # ratio is node vs other; other vs anchor = (other vs node) x (node vs anchor)
            value = ratio.inverse().times(best[node][1])
            if other not in best or cost + step < best[other][0]:
                best[other] = (cost + step, value)
                heapq.heappush(queue, (cost + step, other))
    return {node: value for node, (_, value) in best.items()}


def inherited_failures(ledger: Ledger) -> dict[str, set[str]]:
    """Configs each candidate failed when judged on the inputs its child failed there with its
    code (orchestrator/inherited.py): no more correct there than where it failed itself."""
    failed: dict[str, set[str]] = {}
    for check in _checks(ledger):
        if check.parent_failed:
            failed.setdefault(check.parent_sha, set()).update(check.configs)
    return failed


def _checks(ledger: Ledger) -> list[InheritedCheck]:
    """Every inherited check and recheck the ledger holds, in order."""
    return [
        InheritedCheck.model_validate(event.record.payload)
        for event in ledger.events(EventKind.INHERITED_CHECK.value)
    ]


def unproven_configs(
    summaries: list[EvaluationSummary], checks: list[InheritedCheck]
) -> dict[str, set[str]]:
    """Per candidate, the configs where inputs that demoted a frontier were recorded and it
    was never judged correct on any of them (judged before they were found, say). Run 20's
    composition, replayed on its final ledger, served config 6 by a candidate judged before
    them, with the fused code that failed them in every frontier that ran it: a pass on
    other inputs is no evidence against a failure already seen."""
    demoting: dict[str, set[int]] = {}  # config -> seeds of the inputs that demoted there
    judged: dict[str, dict[str, set[int]]] = {}  # sha -> config -> seeds it passed there
    for check in checks:
        seeds = {trial.seed for trial in check.trials}
        if check.parent_failed and not check.recheck_of:
            for config in check.configs:
                demoting.setdefault(config, set()).update(seeds)
        elif not check.parent_failed and not check.infrastructure:
            for config in check.configs:
                judged.setdefault(check.parent_sha, {}).setdefault(config, set()).update(seeds)
    for summary in summaries:
        for digest in summary.configs:
            if digest.correct:
                by_config = judged.setdefault(summary.sha, {})
                by_config.setdefault(digest.config_id, set()).update(summary.trial_seeds)
    return {
        sha: {c for c, seeds in demoting.items() if not seeds & by_config.get(c, set())}
        for sha, by_config in judged.items()
    }


def measured_scores(ledger: Ledger, anchor: str) -> dict[str, dict[str, Score]]:
    """Speedup over the baseline per candidate and config where it was judged correct: its
    paired ratios chained to the anchor (screens and sweeps, untainted), times the anchor's
    own paired ratio to the baseline. Every variant is thereby read against the same
    baseline measurement, not each against its own sweep's, and on one device (the one that
    measured most: variants only another device measured are not scored)."""
    summaries = _summaries(ledger)
    edges, correct = _read(summaries)
    for sha, configs in inherited_failures(ledger).items():
        correct.get(sha, set()).difference_update(configs)
    for sha, configs in unproven_configs(summaries, _checks(ledger)).items():
        correct.get(sha, set()).difference_update(configs)
    scores: dict[str, dict[str, Score]] = {}
    for config, graph in edges.items():
        relative = _chained(graph, anchor)
        if REFERENCE_SHA not in relative:
            continue  # the anchor was never timed against the baseline on this config
        anchor_speed = relative[REFERENCE_SHA].inverse()  # anchor vs the baseline
        for sha, ratio in relative.items():
            if sha != REFERENCE_SHA and config in correct.get(sha, set()):
                scores.setdefault(sha, {})[config] = ratio.times(anchor_speed)
    return scores
