"""`ratchet report`: build the report of a run from its ledger and write it, with its figures,
into an output directory that holds nothing else (or an earlier report, which it replaces)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.report.appendix import (
    cost_blocks,
    environment_blocks,
    idea_blocks,
    ledger_blocks,
    message_blocks,
    noise_blocks,
)
from orchestrator.report.data import ReportData, gather
from orchestrator.report.document import Block, render_html, render_markdown
from orchestrator.report.figures import Axis, configs_svg, trajectory_svg
from orchestrator.report.sections import (
    FigureFile,
    experiment_blocks,
    lineage_blocks,
    result_blocks,
    searched_blocks,
    short,
    title_blocks,
    trajectory_blocks,
)
from orchestrator.report.tree import lineage_svg
from orchestrator.service import RatchetError, open_run_ledger, require_chain

FORMAT = "ratchet-report/1"
MANIFEST = "report.json"
MARKDOWN = "report.md"
HTML = "report.html"
SCRATCH = ".report-"


class ReportManifest(BaseModel):
    """`report.json`: what a report was built from, the files it wrote, and its data."""

    format: Literal["ratchet-report/1"] = Field(description="Marks a Ratchet report directory.")
    ledger_head: str = Field(description="Ledger head the report was read at, as SEQ:HASH.")
    run_dir: str = Field(description="The run it reports on.")
    generated_at: str = Field(description="When it was built (ISO-8601, UTC).")
    files: list[str] = Field(description="Files of the report in its directory, this one too.")
    data: ReportData = Field(description="Everything the report shows, as read.")


class _Previous(BaseModel):
    """The part of an earlier report's manifest that says which files are its own."""

    model_config = ConfigDict(extra="ignore")

    format: Literal["ratchet-report/1"]
    files: list[str]


def previous_report(out: Path) -> list[str] | None:
    """The files of an earlier report in `out`, or None when `out` holds something else."""
    try:
        previous = _Previous.model_validate_json((out / MANIFEST).read_text("utf-8"))
    except (OSError, ValueError, ValidationError):
        return None
    return [name for name in previous.files if Path(name).name == name]


def check_out_dir(out: Path) -> list[str]:
    """Refuse an --out that is a file or holds anything but an earlier report (nothing would
    be lost, but nothing of the user's may be overwritten either); returns the earlier
    report's files, to replace."""
    if out.exists() and not out.is_dir():
        raise RatchetError(f"--out {out} is a file; name a directory for the report")
    if not out.exists():
        return []
    # A scratch directory of ours that a crash left behind is not the user's.
    present = sorted(p.name for p in out.iterdir() if not p.name.startswith(SCRATCH))
    if not present:
        return []
    earlier = previous_report(out)
    if earlier is None or set(present) - set(earlier):
        foreign = sorted(set(present) - set(earlier or []))
        listed = ", ".join(foreign[:5]) + (
            f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        )
        raise RatchetError(
            f"--out {out} already holds files that are not part of a Ratchet report ({listed}); "
            f"nothing was written. Give an empty or new directory, e.g. --out {out / 'report'}"
        )
    return earlier


def build_files(data: ReportData) -> tuple[dict[str, str], ReportManifest]:
    """Every file of the report, by name: figures, Markdown, HTML and the manifest."""
    figures: dict[FigureFile, str] = {
        FigureFile.TRAJECTORY_STEPS: trajectory_svg(data.trajectory, Axis.STEP),
        FigureFile.TRAJECTORY_TIME: trajectory_svg(data.trajectory, Axis.TIME),
        FigureFile.LINEAGE: lineage_svg(data.lineage),
    }
    table = data.overview.frontier_table
    if table is not None and any(r.x_baseline for r in table.rows):
        title = f"Frontier {short(data.overview.frontier_sha)}: speed over the baseline per config"
        figures[FigureFile.FRONTIER_CONFIGS] = configs_svg(table, title)
    blocks: list[Block] = [
        *title_blocks(data),
        *searched_blocks(data),
        *result_blocks(data, figures),
        *trajectory_blocks(data, figures),
        *lineage_blocks(data, figures),
        *experiment_blocks(data),
        *idea_blocks(data),
        *message_blocks(data),
        *noise_blocks(data),
        *cost_blocks(data),
        *environment_blocks(data),
        *ledger_blocks(data),
    ]
    name = data.run.workload if data.run else "run"
    files = {str(file): svg for file, svg in figures.items()}
    files[MARKDOWN] = render_markdown(blocks)
    files[HTML] = render_html(blocks, f"Ratchet search report: {name} ({data.head[:16]})")
    manifest = ReportManifest(
        format=FORMAT,
        ledger_head=data.head,
        run_dir=data.run_dir,
        generated_at=data.generated_at,
        files=sorted([*files, MANIFEST]),
        data=data,
    )
    files[MANIFEST] = manifest.model_dump_json(indent=2)
    return files, manifest


def _write(out: Path, files: dict[str, str], earlier: list[str]) -> None:
    """All files first into a scratch directory beside `out`, then each moved into place."""
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=SCRATCH, dir=out))
    try:
        for name, text in files.items():
            (scratch / name).write_text(text, encoding="utf-8")
        for name in files:
            os.replace(scratch / name, out / name)
        for stale in set(earlier) - set(files):  # an earlier report's figure no longer made
            (out / stale).unlink(missing_ok=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def write_report(run_dir: Path, out: Path, ledger_url: str | None = None) -> ReportManifest:
    """`ratchet report`: read the run at one ledger head (its chain checked first), render
    the report and write it into `out`; a bad --out or run dir writes nothing."""
    earlier = check_out_dir(out)
    with open_run_ledger(run_dir, ledger_url) as ledger:
        check = require_chain(ledger, run_dir, "No report was written")
        data = gather(ledger, run_dir, check)
    files, manifest = build_files(data)
    try:
        _write(out, files, earlier)
    except OSError as exc:
        raise RatchetError(f"cannot write the report into {out}: {exc}") from exc
    return manifest
