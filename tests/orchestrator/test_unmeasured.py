"""Settings a twice-cut candidate moved are forbidden to the operator, unless measured elsewhere."""

from __future__ import annotations

from pathlib import Path

from agents.tunables import read_tunables, write_tunables
from harness.models import Outcome
from orchestrator.events import Stage
from orchestrator.state import CandidateView, SearchState
from orchestrator.unmeasured import forbid_lines, unmeasured_settings
from search import Verdict

SEED = (Path(__file__).parents[2] / "kernels/track3/seed/candidate.py").read_text()
SIZES = {"1": {"batch": 64.0, "width": 128.0}, "8": {"batch": 64.0, "width": 1024.0}}


def _source(**settings: str) -> str:
    return write_tunables(SEED, {**read_tunables(SEED), **settings})


def _candidate(
    state: SearchState, sha: str, parent: str | None, verdict: Verdict, cut: bool = False
) -> None:
    cand = CandidateView(
        sha=sha,
        tree_sha=sha,
        parent_sha=parent,
        step=len(state.candidates),
        idea_id="i",
        agent="offline",
        message="",
    )
    cand.verdict, cand.verdict_stage = verdict, Stage.SCREEN
    if cut:
        cand.details["reject_reason"] = Outcome.TIMEOUT.value
    state.candidates[sha] = cand


def _run() -> tuple[SearchState, dict[str, str]]:
    """seed <- fused (promoted) <- exact (fp32 IEEE operands, cut twice), and
    fused <- strided (strided heads, measured)."""
    fused = {"fused_kernel": "triton", "graph_capture": "cuda_graph"}
    sources = {
        "seed": SEED,
        "fused": _source(**fused),
        "exact": _source(**fused, fused_projection_operands="fp32_ieee", head_layout="strided"),
        "strided": _source(**fused, head_layout="strided"),
    }
    state = SearchState()
    _candidate(state, "seed", None, Verdict.PROMOTED)
    _candidate(state, "fused", "seed", Verdict.PROMOTED)
    _candidate(state, "exact", "fused", Verdict.FAILED_RUN, cut=True)
    return state, sources


def test_a_twice_cut_candidates_moved_settings_are_forbidden() -> None:
    state, sources = _run()
    found = unmeasured_settings(state, sources.get, SIZES)
    assert found == {("fused_projection_operands", "fp32_ieee"), ("head_layout", "strided")}
    assert forbid_lines(found) == [
        "forbid fused_projection_operands=fp32_ieee",
        "forbid head_layout=strided",
    ]


def test_a_setting_some_candidate_was_measured_with_stays_open() -> None:
    state, sources = _run()
    _candidate(state, "strided", "fused", Verdict.REJECTED)  # screened to the end: measurable
    found = unmeasured_settings(state, sources.get, SIZES)
    assert found == {("fused_projection_operands", "fp32_ieee")}


def test_nothing_is_forbidden_without_a_cut_or_on_an_unreadable_source() -> None:
    state, sources = _run()
    state.candidates["exact"].details.clear()  # a failed run of another kind: not a cut
    assert unmeasured_settings(state, sources.get, SIZES) == set()
    state, sources = _run()
    del sources["exact"]
    assert unmeasured_settings(state, sources.get, SIZES) == set()


def test_what_a_cut_candidate_moved_only_to_let_its_change_act_stays_open() -> None:
    """Run 15's shape: the cut candidate turned the fused kernels on for its tf32x3 operands.
    Its requirement (`fused_kernel=triton`) and the reference values its fused tunables took
    are not forbidden: the run's fastest candidate needed them."""
    state = SearchState()
    sources = {
        "graph": _source(graph_capture="cuda_graph"),
        "split": _source(
            graph_capture="cuda_graph",
            fused_kernel="triton",
            fused_projection_operands="tf32x3",
            fused_ffn_operands="tf32x3",
        ),
    }
    _candidate(state, "graph", None, Verdict.PROMOTED)
    _candidate(state, "split", "graph", Verdict.FAILED_RUN, cut=True)
    found = unmeasured_settings(state, sources.get, SIZES)
    assert found == {("fused_projection_operands", "tf32x3"), ("fused_ffn_operands", "tf32x3")}
