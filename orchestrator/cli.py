"""The `ratchet` command line: parse flags, build settings, call one service, exit cleanly."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from ledger import LedgerError
from orchestrator import service
from orchestrator.cli_help import LEDGER_FLAG_HELP, parser_texts
from orchestrator.export import ExportError
from orchestrator.judge_file import format_judge_report
from orchestrator.ledger_location import resolve_ledger
from orchestrator.ledger_view import format_entry, show_entries
from orchestrator.messages import MessageKind
from orchestrator.report import write_report
from orchestrator.run_report import format_run_end
from orchestrator.settings import DeviceChoice, Settings, SettingsError, load_settings
from orchestrator.status import CANDIDATES_SHOWN, chain_warning, format_status
from orchestrator.workspace import WorkspaceError

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EXIT_TAINTED = 3  # `judge` passed with a tainted timing, or gave no result: not trustworthy


def _run_dir_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run-dir", type=Path, default=None, help="run directory (default ./ratchet-run)"
    )


def _ledger_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ledger", default=None, metavar="URL", help=LEDGER_FLAG_HELP)


def _count(text: str) -> int:
    """A flag's count: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count; give a whole number >= 0")
    return value


def _port(text: str) -> int:
    """A TCP port: 0 (any free one) to 65535."""
    value = _count(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port; give 0 (any free) to 65535")
    return value


def _dashboard_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dashboard = sub.add_parser("dashboard", allow_abbrev=False, **parser_texts("dashboard"))
    _run_dir_flag(dashboard)
    dashboard.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    dashboard.add_argument("--port", type=_port, default=8765, help="TCP port (default 8765)")
    dashboard.add_argument(
        "--token",
        default=None,
        help="secret for every page and write (default $RATCHET_DASHBOARD_TOKEN); "
        "required for a non-loopback --host",
    )


def _version() -> str:
    try:
        return metadata.version("ratchet")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _build_parser() -> argparse.ArgumentParser:
    # No abbreviations: `run --config F` once silently meant `--configs F`.
    parser = argparse.ArgumentParser(
        prog="ratchet", description="Autonomous evolutionary kernel search.", allow_abbrev=False
    )
    parser.add_argument("--version", action="version", version=f"ratchet {_version()}")
    parser.add_argument("--config", type=Path, default=None, help="settings file (TOML)")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", allow_abbrev=False, **parser_texts("run"))
    _run_dir_flag(run)
    _ledger_flag(run)
    # Also after the subcommand; SUPPRESS keeps a top-level --config when this one is absent.
    run.add_argument("--config", type=Path, default=argparse.SUPPRESS, help="settings file (TOML)")
    run.add_argument(
        "--workload", default=None, help="track3 (default), softmax, or module:factory"
    )
    run.add_argument("--device", choices=[d.value for d in DeviceChoice], default=None)
    run.add_argument(
        "--devices",
        default=None,
        help="all, or device indices 0,1,...: one evaluation worker per device (CPU slots on a "
        "CPU host)",
    )
    run.add_argument(
        "--expanders",
        type=int,
        default=None,
        help="expansions that may run at once, overlapping evaluation (default 1)",
    )
    run.add_argument(
        "--ray",
        default=None,
        help="evaluate and expand on a Ray cluster: auto, local, or HOST:PORT",
    )
    run.add_argument(
        "--configs", dest="config_set", default=None, help="config set (default by device)"
    )
    run.add_argument(
        "--minutes", type=float, default=None, help="wall-clock budget of the whole run (default 3)"
    )
    run.add_argument(
        "--max-candidates",
        type=int,
        default=None,
        help="stop once the whole run holds N candidates (the seed not counted)",
    )
    run.add_argument(
        "--expander",
        default=None,
        help="offline (default), anthropic, openai, openai-chat (with --llm-base-url URL) "
        "or replay:FILE",
    )
    run.add_argument("--llm-base-url", default=None, help="the model server's endpoint")
    run.add_argument("--llm-model", default=None, help="model name (default per expander)")
    run.add_argument("--seed", type=int, default=None, help="seed of the search's choices")

    inject = sub.add_parser("inject", allow_abbrev=False, **parser_texts("inject"))
    inject.add_argument("kind", choices=[k.value for k in MessageKind], type=str.upper)
    inject.add_argument("text", help="the message (its format by kind: below)")
    _run_dir_flag(inject)
    _ledger_flag(inject)
    inject.add_argument("--author", default=None, help="credited author (default: your user name)")

    status = sub.add_parser("status", allow_abbrev=False, **parser_texts("status"))
    _run_dir_flag(status)
    _ledger_flag(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument(
        "--candidates",
        type=_count,
        default=CANDIDATES_SHOWN,
        metavar="N",
        help=f"rows of the candidates table (default {CANDIDATES_SHOWN}; 0: none)",
    )

    checkout = sub.add_parser("checkout", allow_abbrev=False, **parser_texts("checkout"))
    checkout.add_argument("sha", help="commit sha or unique prefix")
    _run_dir_flag(checkout)
    _ledger_flag(checkout)
    checkout.add_argument("--into", type=Path, default=None, help="target directory")

    export = sub.add_parser("export", allow_abbrev=False, **parser_texts("export"))
    _run_dir_flag(export)
    _ledger_flag(export)
    export.add_argument("--sha", default=None, help="candidate (default: the frontier)")
    export.add_argument("--out", type=Path, required=True, help="output directory")
    export.add_argument(
        "--unchecked",
        action="store_true",
        help="export even if the candidate has not passed the config set's feasibility configs "
        "or the inputs that demoted earlier frontiers (the manifest says so)",
    )

    judge = sub.add_parser("judge", allow_abbrev=False, **parser_texts("judge"))
    judge.add_argument(
        "file",
        type=Path,
        help="module defining the entry class, or a package dir with candidate.py",
    )
    judge.add_argument("--workload", default=None, help="track3 (default), softmax, ...")
    judge.add_argument("--device", choices=[d.value for d in DeviceChoice], default=None)
    judge.add_argument(
        "--configs", default=None, help="official | cpu | screen | ID,ID (default by device)"
    )
    judge.add_argument("--json", action="store_true", help="machine-readable output")

    ledger = sub.add_parser("ledger", allow_abbrev=False, **parser_texts("ledger"))
    ledger.add_argument("action", choices=["verify", "show"])
    _run_dir_flag(ledger)
    _ledger_flag(ledger)
    ledger.add_argument("--limit", type=_count, default=None, help="show only the last N entries")
    ledger.add_argument(
        "--kind",
        default=None,
        help="show: only entries of this kind (candidate, measurement, verdict, message, "
        "fingerprint, event) or events of this kind (e.g. noise_floor)",
    )
    ledger.add_argument(
        "--json", action="store_true", help="show: one JSON object per entry, full payloads"
    )
    ledger.add_argument(
        "--expect-head",
        default=None,
        metavar="SEQ:HASH",
        help="verify: fail unless the chain holds this head (as status and export manifests "
        "print it; HASH alone: at any position)",
    )
    _dashboard_parser(sub)
    report = sub.add_parser("report", allow_abbrev=False, **parser_texts("report"))
    _run_dir_flag(report)
    _ledger_flag(report)
    report.add_argument(
        "--out", type=Path, required=True, help="output directory (new, empty, or a report's)"
    )
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    flags = {
        key: getattr(args, key, None)
        for key in (
            "run_dir",
            "ledger",
            "workload",
            "device",
            "devices",
            "expanders",
            "ray",
            "config_set",
            "minutes",
            "max_candidates",
            "expander",
            "llm_base_url",
            "llm_model",
            "seed",
        )
    }
    return load_settings(flags, config_file=args.config)


def _program() -> str:
    """How the user called us (`.venv/bin/ratchet` under `make run`), else `ratchet`."""
    return sys.argv[0] if Path(sys.argv[0]).name == "ratchet" else "ratchet"


def _cmd_run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    summary = service.run_search(settings)
    print(format_run_end(summary, settings.run_dir, _program()))
    return EXIT_OK


def _cmd_inject(args: argparse.Namespace) -> int:
    settings = _settings(args)
    seq = service.inject_message(
        settings.run_dir, args.kind, args.text, args.author, settings.ledger
    )
    if args.kind == MessageKind.RETRACT:
        print(f"retracted message #{args.text.strip().lstrip('#')} (RETRACT is message #{seq})")
    else:
        where = shlex.quote(str(settings.run_dir))
        print(
            f"injected {args.kind} as message #{seq}; withdraw it with: {_program()} inject "
            f"RETRACT {seq} --run-dir {where}"
        )
    return EXIT_OK


def _cmd_status(args: argparse.Namespace) -> int:
    settings = _settings(args)
    report = service.run_status(settings.run_dir, args.candidates, settings.ledger)
    print(report.model_dump_json(indent=2) if args.json else format_status(report))
    warning = chain_warning(report)
    if warning is None:
        return EXIT_OK
    print(f"ratchet status: {warning}", file=sys.stderr)
    return EXIT_FAILURE


def _cmd_checkout(args: argparse.Namespace) -> int:
    settings = _settings(args)
    target = service.checkout(settings.run_dir, args.sha, args.into, settings.ledger)
    print(f"checked out {args.sha} into {target}")
    return EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    settings = _settings(args)
    manifest = service.export(settings.run_dir, args.sha, args.out, settings.ledger, args.unchecked)
    print(f"exported {manifest.commit[:10]} ({manifest.verdict}) to {args.out}")
    return EXIT_OK


def _cmd_judge(args: argparse.Namespace) -> int:
    progress = None if args.json else (lambda line: print(line, file=sys.stderr, flush=True))
    report = service.judge_file(args.file, _settings(args), args.configs, progress)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print(format_judge_report(report))
    if report.tainted and (report.passed or report.verdict == "no_result"):
        return EXIT_TAINTED  # not trustworthy either way: a tainted timing, or no result
    return EXIT_OK if report.passed else EXIT_USAGE


def _cmd_ledger(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.action == "verify":
        if args.kind is not None or args.json:
            raise service.RatchetError("--kind and --json go with 'ledger show', not 'verify'")
        return _verify(settings.run_dir, args.expect_head, settings.ledger)
    if args.expect_head is not None:
        raise service.RatchetError("--expect-head goes with 'ledger verify', not 'ledger show'")
    for entry in show_entries(settings.run_dir, args.limit, args.kind, settings.ledger):
        print(entry.model_dump_json() if args.json else format_entry(entry))
    return EXIT_OK


def _verify(run_dir: Path, expect_head: str | None, ledger_url: str | None) -> int:
    report = service.verify_ledger(run_dir, expect_head, ledger_url)
    if not report.ok:
        where = "" if report.first_bad_seq is None else f" at entry {report.first_bad_seq}"
        print(f"ledger BROKEN{where} ({report.problem_kind}): {report.problem}", file=sys.stderr)
        print(f"fix: {service.chain_fix(report, run_dir)}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"ledger ok: {report.entries_checked} entries, head {report.head_seq}:{report.head_hash}")
    if report.journal is not None:
        print(f"head journal {report.journal}: {report.journal_heads} recorded heads match")
    if expect_head is not None:
        print(f"expected head {expect_head} is in the chain")
    if report.anchor_note:
        print(f"note: {report.anchor_note}")
    return EXIT_OK


def _cmd_dashboard(args: argparse.Namespace) -> int:
    # Imported here: FastAPI and uvicorn load only for this command.
    from orchestrator import dashboard

    token = args.token or os.environ.get(dashboard.TOKEN_VARIABLE) or None
    given = _settings(args)
    # The dashboard opens the ledger the run dir records (its password from PGPASSWORD or
    # ~/.pgpass); a `ledger` setting naming another one is refused here, before serving.
    resolve_ledger(given.run_dir, given.ledger)
    try:
        settings = dashboard.DashboardSettings(
            run_dir=given.run_dir, host=args.host, port=args.port, token=token
        )
        dashboard.serve(settings)
    except (dashboard.DashboardError, ValueError) as exc:
        raise service.RatchetError(str(exc)) from exc
    return EXIT_OK


def _cmd_report(args: argparse.Namespace) -> int:
    settings = _settings(args)
    manifest = write_report(settings.run_dir, args.out, settings.ledger)
    figures = [f for f in manifest.files if f.endswith(".svg")]
    print(
        f"wrote the report of {settings.run_dir} at ledger head {manifest.ledger_head} to "
        f"{args.out}: {args.out / 'report.md'}, {args.out / 'report.html'}, "
        f"{len(figures)} figures, report.json"
    )
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "dashboard": _cmd_dashboard,
    "run": _cmd_run,
    "inject": _cmd_inject,
    "status": _cmd_status,
    "checkout": _cmd_checkout,
    "export": _cmd_export,
    "ledger": _cmd_ledger,
    "judge": _cmd_judge,
    "report": _cmd_report,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; domain errors become a message on stderr and exit code 2."""
    args = _build_parser().parse_args(argv)
    try:
        code = COMMANDS[args.command](args)
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at exit
        return code
    except (service.RatchetError, SettingsError, WorkspaceError, ExportError, LedgerError) as exc:
        print(f"ratchet {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(
            f"ratchet {args.command}: interrupted; resume with the same --run-dir", file=sys.stderr
        )
        return 130
    except BrokenPipeError:
        # The reader went away (`ratchet status | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
