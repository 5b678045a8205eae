"""The LLM expander: a bounded tool-use loop in the parent's worktree that ends in a commit."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import git
from pydantic import BaseModel, Field

from agents.expander import (
    ExpansionContext,
    ExpansionOutcome,
    ExpansionRequest,
    ExpansionResult,
)
from agents.llm.conversation import (
    AssistantItem,
    Conversation,
    LLMError,
    ToolResults,
    UserText,
)
from agents.llm.session import LLMSession
from agents.tools import BenchAccess, CandidateChecker, WorktreeTools
from agents.worktree import add_worktree, remove_worktree
from kernels.workload import Workload
from prompts import RenderedPrompt, render_prompt

NUDGE = "Use the tools to make the change; finish with commit(message)."


def starting_point(request: ExpansionRequest) -> str:
    """What the worktree holds: the parent's code, or a repair's source and why it failed."""
    if request.source_sha is None:
        return "The worktree holds the parent's code."
    # Only failing configs are listed (shares above 1): a plain percentage cannot read as a
    # pass. agents/ may not import harness.models.share_text.
    misses = ", ".join(
        f"config {config}: "
        + ("share not reported" if share is None else f"{share * 100:.1f}% of its tolerance used")
        for config, share in sorted(request.source_misses.items())
    )
    return (
        f"This is a repair. The worktree holds candidate {request.source_sha[:10]}'s code, not "
        f"the parent's: it changed the parent and missed the tolerance narrowly "
        f"({misses or 'no config reported'}; 100% fails). Implement the idea on that code to "
        "give those configs headroom while keeping its speed; the commit is judged as another "
        "child of the parent."
    )


class LLMExpanderSettings(BaseModel):
    """Limits of one expansion."""

    max_turns: int = Field(default=12, ge=1, description="Model turns before giving up.")
    max_output_tokens: int = Field(default=8192, ge=256, description="Per response.")


@dataclass
class LLMExpander:
    """Implements an idea with a model that edits files through the worktree tools."""

    session: LLMSession
    make_checker: Callable[[list[str]], CandidateChecker]
    workload: Workload
    settings: LLMExpanderSettings
    make_bench: Callable[[ExpansionRequest], BenchAccess | None] | None = None

    @property
    def name(self) -> str:
        """Agent name recorded with each candidate."""
        return f"{self.session.backend.kind.value}:{self.session.backend.model}"

    def _prompts(self, request: ExpansionRequest) -> tuple[RenderedPrompt, RenderedPrompt]:
        policy, tol = self.workload.static_policy, self.workload.tolerance
        fields = type(next(iter(self.workload.configs.values()))).model_fields
        constraints = "\n".join(f"- {c}" for c in request.constraints) or "- (none)"
        system = render_prompt(
            "expander_system",
            {
                "workload_name": self.workload.name,
                "workload_description": self.workload.description,
                "atol": str(tol.atol),
                "rtol": str(tol.rtol),
                "baseline": self.workload.baseline,
                "candidate_file": self.workload.candidate_file,
                "entry_point": policy.entry_point,
                "config_fields": ", ".join(fields),
                "allowed_imports": ", ".join(policy.allowed_imports),
                "constraints": constraints,
            },
        )
        task = render_prompt(
            "expander_task",
            {
                "parent_sha": request.parent_sha,
                "idea_source": request.idea.source,
                "idea_id": request.idea.idea_id,
                "idea_text": request.idea.text,
                "starting_point": starting_point(request),
                "max_turns": str(self.settings.max_turns),
                **(request.context or ExpansionContext()).sections(),
            },
        )
        return system, task

    def expand(self, request: ExpansionRequest) -> ExpansionResult:
        """Run the tool loop; a commit on request.branch, or a failed expansion with a reason."""
        started = time.monotonic()
        repo = git.Repo(request.repo_path)
        worktree = add_worktree(
            repo, request.worktree_root, request.branch, request.parent_sha, request.source_sha
        )
        try:
            checker = self.make_checker(list(request.constraints))
            bench = self.make_bench(request) if self.make_bench is not None else None
            tools = WorktreeTools(worktree, checker, set(request.known_trees), bench)
            outcome, message, prompt_hash = self._loop(request, tools)
            common = {
                "agent": self.name,
                "prompt_hash": prompt_hash,
                "lessons": tools.notes,
                "tool_wall_s": {k: round(v, 3) for k, v in tools.wall_s.items()},
                "bench_device_s": round(bench.spent_s, 3) if bench else 0.0,
            }
            if outcome is ExpansionOutcome.COMMITTED and tools.committed:
                repo.create_head(request.branch, tools.committed)
                tree = str(repo.commit(tools.committed).tree.hexsha)
                return ExpansionResult(
                    outcome=outcome,
                    sha=tools.committed,
                    tree_sha=tree,
                    message=tools.message,
                    wall_s=time.monotonic() - started,
                    **common,
                )
            return ExpansionResult(
                outcome=outcome, message=message, wall_s=time.monotonic() - started, **common
            )
        finally:
            remove_worktree(repo, worktree)

    def _loop(
        self, request: ExpansionRequest, tools: WorktreeTools
    ) -> tuple[ExpansionOutcome, str, str]:
        system, task = self._prompts(request)
        conversation = Conversation(system=system.text, items=[UserText(text=task.text)])
        key = ("expander", system.template_hash)
        for _ in range(self.settings.max_turns):
            try:
                turn = self.session.ask(
                    key, conversation, tools.specs(), self.settings.max_output_tokens
                )
            except LLMError as exc:
                return (
                    ExpansionOutcome.PROVIDER_ERROR,
                    f"the model could not be reached: {exc}",
                    system.template_hash,
                )
            conversation.items.append(AssistantItem(turn=turn))
            if not turn.tool_calls:
                conversation.items.append(UserText(text=NUDGE))
                continue
            outcomes = [tools.call(call) for call in turn.tool_calls]
            conversation.items.append(ToolResults(outcomes=outcomes))
            if tools.committed:
                return ExpansionOutcome.COMMITTED, tools.message, system.template_hash
        trail = "; ".join(tools.log[-6:]) or "none: it never called a tool"
        # A model that never made one well-formed, successful tool call did not try the idea.
        worked = any(line.endswith(": ok") for line in tools.log)
        return (
            ExpansionOutcome.FAILED if worked else ExpansionOutcome.MALFORMED_REPLIES,
            f"no commit after {self.settings.max_turns} turns (last tool results: {trail})",
            system.template_hash,
        )
