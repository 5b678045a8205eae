"""The run's expander: the offline operator, or an LLM expander with its checker and bench."""

from __future__ import annotations

from agents.expander import Expander, ExpansionRequest
from agents.llm.session import LLMSession
from agents.llm_expander import LLMExpander, LLMExpanderSettings
from agents.offline import OfflineExpander
from agents.tools import BenchAccess
from kernels.workload import ConfigSet
from orchestrator.bench_tool import ScreenBench
from orchestrator.checker import HarnessChecker
from orchestrator.evaluation import Judging
from orchestrator.settings import Settings, default_timing


def make_expander(
    settings: Settings, judging: Judging, session: LLMSession | None, config_set: ConfigSet
) -> Expander:
    """The offline operator, or (with an LLM session) the LLM expander with its quick checker
    and its benchmark/profile bench on the run's device."""
    if session is None:
        return OfflineExpander()
    workload = judging.workload
    cpu_set = workload.config_set(workload.default_config_set["cpu"])

    def make_checker(constraints: list[str]) -> HarnessChecker:
        work = judging.evals_dir / "quick-checks"
        return HarnessChecker(
            workload,
            constraints,
            judging.runner,
            work,
            list(cpu_set.screening_ids),
            workload_ref=judging.workload_ref,
        )

    def make_bench(request: ExpansionRequest) -> BenchAccess | None:
        if settings.llm_bench_budget_s <= 0:
            return None
        bench = ScreenBench(
            judging=judging,
            parent_sha=request.parent_sha,
            frontier_sha=request.frontier_sha,
            config_ids=list(config_set.screening_ids),
            timing=settings.screen_timing or default_timing(judging.device, "screen"),
            work_dir=judging.evals_dir / f"step-{request.step:05d}-bench",
        )
        return BenchAccess(bench=bench, budget_s=settings.llm_bench_budget_s)

    llm_settings = LLMExpanderSettings(
        max_turns=settings.llm_max_turns, max_output_tokens=settings.llm_max_output_tokens
    )
    return LLMExpander(session, make_checker, workload, llm_settings, make_bench)
