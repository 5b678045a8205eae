"""`ratchet report`: a write-up of a run generated from its ledger, with SVG figures."""

from orchestrator.report.data import ReportData, gather
from orchestrator.report.document import render_html, render_markdown
from orchestrator.report.writer import ReportManifest, build_files, check_out_dir, write_report

__all__ = [
    "ReportData",
    "ReportManifest",
    "build_files",
    "check_out_dir",
    "gather",
    "render_html",
    "render_markdown",
    "write_report",
]
