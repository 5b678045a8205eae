"""A scripted model that works like a kernel engineer on the softmax candidate: it looks around,
reads by line range, moves the row arithmetic into a new module (str_replace in the entry),
checks, benchmarks, refines what the table says with apply_patch in the new module, notes a
lesson and commits."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

ROWOPS = '''"""Row helpers of the softmax candidate."""

from __future__ import annotations

import torch


def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    """Row softmax with the reference's arithmetic: shift, exponentiate, sum, divide."""
    shifted = x - x.max(dim=-1, keepdim=True).values
    e = torch.exp(shifted)
    total = torch.exp(shifted).sum(dim=-1, keepdim=True)
    return e / total
'''
CALL = "        return self._rows(x)"
FUSE_PATCH = """--- a/rowops.py
+++ b/rowops.py
@@ -9,5 +9,2 @@ def softmax_rows(x: torch.Tensor) -> torch.Tensor:
     \"\"\"Row softmax with the reference's arithmetic: shift, exponentiate, sum, divide.\"\"\"
-    shifted = x - x.max(dim=-1, keepdim=True).values
-    e = torch.exp(shifted)
-    total = torch.exp(shifted).sum(dim=-1, keepdim=True)
-    return e / total
+    return torch.softmax(x, dim=-1)
"""
LESSON = "torch.softmax in rowops.softmax_rows (one fused pass) measured {ratio} x parent"
MESSAGE = (
    "Row softmax in its own module, fused\n\nIdea: one fused softmax pass per row\n"
    "Hypothesis: torch.softmax reads each row once instead of four passes and two exps\n"
    "Predicted effect: 1.5x or more on every config, rounding within the tolerance"
)
SECOND_MESSAGE = (
    "Multiply by the reciprocal\n\nIdea: one division per row\n"
    "Hypothesis: a reciprocal per row and a multiply per element is cheaper than a division\n"
    "Predicted effect: a few percent, rounding within the tolerance"
)

Action = tuple[str, dict[str, Any]]


def _geomean_vs_parent(table: str) -> str:
    found = re.search(r"geomean x parent: ([0-9.]+)", table)
    return found.group(1) if found else "?"


@dataclass
class EngineerScript:
    """The model: `__call__(turn, tool_results)` -> the next tool call of this expansion."""

    expansions: int = 0
    tables: list[str] = field(default_factory=list)

    def __call__(self, turn: int, results: list[str]) -> Action | None:
        if turn == 0:
            self.expansions += 1
        if self.expansions == 1:
            return self._first(turn, results)
        return self._second(turn)

    def _first(self, turn: int, results: list[str]) -> Action | None:
        steps: list[Action] = [
            ("list_files", {}),
            ("grep", {"pattern": r"return self\._rows\(x\)"}),
        ]
        if turn < len(steps):
            return steps[turn]
        if turn == 2:
            line = int(results[-1].split(":")[1])
            return "read_file", {"path": "candidate.py", "start_line": line - 3, "end_line": line}
        plan: list[Action] = [
            ("write_file", {"path": "rowops.py", "content": ROWOPS}),
            (
                "str_replace",
                {
                    "path": "candidate.py",
                    "old_text": CALL,
                    "new_text": "        return softmax_rows(x)",
                },
            ),
            (
                "str_replace",
                {
                    "path": "candidate.py",
                    "old_text": "from torch import nn\n",
                    "new_text": "from torch import nn\n\nfrom .rowops import softmax_rows\n",
                },
            ),
            ("run_checks", {}),
            ("benchmark", {}),
            ("apply_patch", {"patch": FUSE_PATCH}),  # the table said: no faster yet
            ("run_checks", {}),
            ("benchmark", {}),
        ]
        index = turn - 3
        if index < len(plan):
            if index == 5:
                self.tables.append(results[-1])
            return plan[index]
        if index == len(plan):
            self.tables.append(results[-1])
            lesson = LESSON.format(ratio=_geomean_vs_parent(results[-1]))
            return "note", {"lesson": lesson}
        return "commit", {"message": MESSAGE}

    def _second(self, turn: int) -> Action | None:
        plan: list[Action] = [
            ("grep", {"pattern": '"normalize"'}),
            (
                "str_replace",
                {
                    "path": "candidate.py",
                    "old_text": '"normalize": "divide"',
                    "new_text": '"normalize": "reciprocal_multiply"',
                },
            ),
            ("run_checks", {}),
            ("commit", {"message": SECOND_MESSAGE}),
        ]
        return plan[turn] if turn < len(plan) else None


TRACK3_MESSAGE = (
    "Capture the forward in a CUDA graph, attention through SDPA\n\n"
    "Idea: remove per-launch host overhead, then fuse attention\n"
    "Hypothesis: small configs are launch-bound (graph replay); SDPA fuses scores, mask and "
    "softmax on every config\n"
    "Predicted effect: several x on launch-bound configs, less on heavy ones"
)


@dataclass
class Track3Script:
    """A scripted engineer on the track3 package: flags, benchmark, profile, refine. It shows
    the tools on a real device; its moves are scripted, not found by a search."""

    profile_config: str
    tables: list[str] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)

    def __call__(self, turn: int, results: list[str]) -> Action | None:
        if turn in (6, 10):
            self.tables.append(results[-1])
        if turn in (7, 11):
            self.profiles.append(results[-1])
        if turn == 2:
            line = int(results[-1].split(":")[1])
            return "read_file", {
                "path": "candidate.py",
                "start_line": line - 2,
                "end_line": line + 4,
            }
        plan: dict[int, Action] = {
            0: ("list_files", {}),
            1: ("grep", {"pattern": r'"graph_capture": "none"', "path": "candidate.py"}),
            3: ("str_replace", _flag("graph_capture", "none", "cuda_graph")),
            4: ("run_checks", {}),
            5: ("benchmark", {}),
            6: ("profile", {"config_id": self.profile_config}),
            7: ("str_replace", _flag("attention", "explicit", "sdpa")),
            8: ("run_checks", {}),
            9: ("benchmark", {}),
            10: ("profile", {"config_id": self.profile_config}),
        }
        if turn in plan:
            return plan[turn]
        if turn == 11:
            first, second = (_geomean_vs_parent(t) for t in self.tables[:2])
            lesson = f"graph capture alone: {first} x parent on the screen; with SDPA: {second}"
            return "note", {"lesson": lesson}
        return ("commit", {"message": TRACK3_MESSAGE}) if turn == 12 else None


def _flag(name: str, old: str, new: str) -> dict[str, str]:
    return {
        "path": "candidate.py",
        "old_text": f'    "{name}": "{old}",\n',
        "new_text": f'    "{name}": "{new}",\n',
    }
