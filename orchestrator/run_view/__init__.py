"""A typed read model of a run, for the dashboard and the report: read once, then view."""

from orchestrator.run_view.candidate import CandidateDetail, JudgeLog, LLMCall, candidate_detail
from orchestrator.run_view.chain import EntryRow, LedgerView, ledger_view
from orchestrator.run_view.common import (
    Ratio,
    RunData,
    RunViewError,
    VerdictClass,
    read_run,
    verdict_class,
)
from orchestrator.run_view.lineage import FailedExpansion, Lineage, LineageNode, lineage
from orchestrator.run_view.overview import (
    BudgetUse,
    ConfigRow,
    DeviceView,
    EvaluationTable,
    Overview,
    budget_use,
    devices,
    evaluation_table,
    overview,
)
from orchestrator.run_view.steering import IdeaRow, QueueMessage, QueueView, ideas, queue
from orchestrator.run_view.trajectory import CandidatePoint, FrontierPoint, Trajectory, trajectory

__all__ = [
    "BudgetUse",
    "CandidateDetail",
    "CandidatePoint",
    "ConfigRow",
    "DeviceView",
    "EntryRow",
    "EvaluationTable",
    "FailedExpansion",
    "FrontierPoint",
    "IdeaRow",
    "JudgeLog",
    "LLMCall",
    "LedgerView",
    "Lineage",
    "LineageNode",
    "Overview",
    "QueueMessage",
    "QueueView",
    "Ratio",
    "RunData",
    "RunViewError",
    "Trajectory",
    "VerdictClass",
    "budget_use",
    "candidate_detail",
    "devices",
    "evaluation_table",
    "ideas",
    "ledger_view",
    "lineage",
    "overview",
    "queue",
    "read_run",
    "trajectory",
    "verdict_class",
]
