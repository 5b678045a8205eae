"""A real search run driven by a scripted LLM agent behind a local fake vendor server: the
agent reads, edits, benchmarks and profiles on the run's device, notes a lesson and commits.
Writes what its tools returned, the prompt's size by part per expansion and the wall time by
tool to a markdown page. The agent's moves are scripted (it tests the tools, it is no search).

  python benchmarks/agent_tools_run.py --workload softmax --device cpu \
      --out docs/results/agent-tools-cpu.md
  python benchmarks/agent_tools_run.py --workload track3 --device cuda \
      --out docs/results/agent-tools-h200.md      # on the H200
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernels.registry import resolve_workload  # noqa: E402
from ledger import Ledger  # noqa: E402
from orchestrator import service  # noqa: E402
from orchestrator.settings import load_settings  # noqa: E402
from tests.agents.fake_llm import Script, openai_chat_handler  # noqa: E402
from tests.agents.scripted_agent import EngineerScript, Track3Script  # noqa: E402
from tests.orchestrator.fake_server import serve  # noqa: E402

SECTION = re.compile(r"^## (.+)$", re.MULTILINE)


class PrintReporter:
    """Progress lines to stdout, kept for the page."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)
        print(text, flush=True)


def prompt_parts(body: dict[str, Any]) -> dict[str, int]:
    """Characters of the system prompt, the task head and each '## ' section of the task."""
    messages = body["messages"]
    system = next(m["content"] for m in messages if m["role"] == "system")
    task = next(m["content"] for m in messages if m["role"] == "user")
    parts = {"system prompt": len(system)}
    marks = list(SECTION.finditer(task))
    parts["idea and parent"] = marks[0].start() if marks else len(task)
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(task)
        parts[mark.group(1)] = end - mark.start()
    return parts


def tool_outputs(requests: list[dict[str, Any]], names: set[str]) -> list[tuple[str, str]]:
    """(tool, output) of every call of the named tools, in order."""
    seen: dict[str, str] = {}
    found = []
    for body in requests:
        for message in body["messages"]:
            for call in message.get("tool_calls") or []:
                seen[call["id"]] = call["function"]["name"]
            if message["role"] == "tool" and seen.get(message["tool_call_id"]) in names:
                pair = (seen[message["tool_call_id"]], message["content"])
                if pair not in found:
                    found.append(pair)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", default="softmax", choices=["softmax", "track3"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--minutes", type=float, default=8.0)
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="agent-tools-")) / "run"
    workload = resolve_workload(args.workload)
    if args.workload == "track3":
        device_kind = "cuda" if args.device.startswith("cuda") else "cpu"
        screen = workload.config_set(workload.default_config_set[device_kind]).screening_ids
        script: Any = Track3Script(profile_config=screen[0])
        candidates = 1
    else:
        script = EngineerScript()
        candidates = 2
    fake = Script(turn=script)
    reporter = PrintReporter()
    started = time.monotonic()
    with serve(openai_chat_handler(fake)) as url:
        flags = {
            "run_dir": run_dir,
            "workload": args.workload,
            "device": args.device,
            "minutes": args.minutes,
            "max_candidates": candidates,
            "expander": "openai-chat",
            "llm_base_url": f"{url}/v1",
            "llm_max_turns": 16,
            "inspect_workload": False,
            "verify_frontier": False,
            "lock_dir": run_dir.parent / "locks",
        }
        summary = service.run_search(load_settings(flags, environ={}), reporter)
    wall = time.monotonic() - started
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        costs = [(c.record.step, c.record.cost) for c in ledger.candidates() if c.record.step]
        lessons = [e.record.payload["text"] for e in ledger.events("lesson")]
    opening = [b for b in fake.requests if len(b["messages"]) == 2]
    report = {
        "command": "python " + " ".join(sys.argv),
        "workload": args.workload,
        "device": args.device,
        "stopped": summary.reason,
        "wall_s": round(wall, 1),
        "prompt_parts": [prompt_parts(b) for b in opening],
        "tool_costs": costs,
        "tool_outputs": tool_outputs(fake.requests, {"benchmark", "profile"}),
        "lessons": lessons,
        "log": reporter.lines,
    }
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(report))
    print(f"wrote {args.out}")


def render(report: dict[str, Any]) -> str:
    """The page: command, prompt size by part, wall time by tool, the tools' outputs."""
    lines = [
        f"# A scripted agent's tools on {report['workload']} / {report['device']}",
        "",
        f"Command: `{report['command']}` ({report['wall_s']} s wall; stopped: "
        f"{report['stopped']}).",
        "",
        "The agent is a script behind a local fake OpenAI-compatible server: its moves are fixed "
        "(it tests the tools and the prompt, it finds nothing). Everything else is real: the "
        "run, the judge on the device, the ledger. Tokens are estimated as characters / 4 "
        "(no tokenizer here; the fake server's token counts mean nothing).",
        "",
        "## Prompt of each expansion, by part",
        "",
    ]
    parts = report["prompt_parts"]
    names = list(dict.fromkeys(name for p in parts for name in p))
    lines.append(
        "| part | "
        + " | ".join(f"expansion {i + 1} (chars / ~tokens)" for i in range(len(parts)))
        + " |"
    )
    lines.append("|---|" + "---:|" * len(parts))
    for name in names:
        cells = [f"{p.get(name, 0):,} / {p.get(name, 0) // 4:,}" for p in parts]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    totals = [sum(p.values()) for p in parts]
    lines.append("| **total** | " + " | ".join(f"{t:,} / {t // 4:,}" for t in totals) + " |")
    lines += ["", "## Wall time by tool (seconds, per candidate)", ""]
    tools = sorted({k for _, cost in report["tool_costs"] for k in cost if k.startswith("tool_")})
    lines.append(
        "| step | expansion | benchmark device-s | " + " | ".join(t[5:-2] for t in tools) + " |"
    )
    lines.append("|---:|---:|---:|" + "---:|" * len(tools))
    for step, cost in report["tool_costs"]:
        cells = [f"{cost.get(t, 0.0):.2f}" for t in tools]
        lines.append(
            f"| {step} | {cost.get('wall_s', 0.0):.1f} | {cost.get('bench_device_s', 0.0):.1f} | "
            + " | ".join(cells)
            + " |"
        )
    lines += ["", "## What benchmark and profile returned", ""]
    for tool, output in report["tool_outputs"]:
        lines += [f"### {tool}", "", "```", output, "```", ""]
    lines += ["## Lessons noted", ""] + [f"- {text}" for text in report["lessons"]]
    lines += ["", "## Run log", "", "```", *report["log"], "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
