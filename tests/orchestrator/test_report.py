"""`ratchet report` on a real run: every verdict kind and reason in it (negative results never
disappear), the ledger head it prints is the chain's, run text is escaped, the figures are
valid SVG, and a bad --out or run dir writes nothing."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ledger import Ledger
from orchestrator import cli
from orchestrator.report import ReportManifest
from orchestrator.report.document import (
    Block,
    Code,
    Mono,
    Para,
    Table,
    md_text,
    render_html,
    render_markdown,
)
from orchestrator.report.svg import Canvas
from orchestrator.state import derive_state
from tests.orchestrator.views_run import views_run

slow = pytest.mark.slow


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return views_run(tmp_path_factory)


@pytest.fixture(scope="module")
def report(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "out"
    assert cli.main(["report", "--run-dir", str(run_dir), "--out", str(out)]) == 0
    return out


def _ledger(run_dir: Path) -> Ledger:
    return Ledger.open_path(run_dir / "ledger.sqlite", create=False)


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


@slow
def test_every_verdict_and_reason_is_in_the_report(run_dir: Path, report: Path) -> None:
    md, page = (report / "report.md").read_text(), (report / "report.html").read_text()
    with _ledger(run_dir) as ledger:
        state = derive_state(ledger)
        verdicts = {v.record.verdict for v in ledger.verdicts()}
    assert {"promoted", "failed_static"} <= verdicts and verdicts & {"rejected", "inconclusive"}
    experiments = md.split("## Every experiment", 1)[1].split("\n## ", 1)[0]
    for cand in state.candidates.values():
        assert cand.verdict is not None
        row = next(line for line in experiments.splitlines() if f"`{cand.sha[:10]}` |" in line)
        assert f"| {md_text(cand.verdict.value)} " in row, row
        assert md_text(cand.reason) in row  # the judge's reason, whole
        assert cand.sha[:10] in page
    for verdict in verdicts:
        assert md_text(verdict) in experiments and verdict in page


@slow
def test_the_head_printed_is_the_chains(
    run_dir: Path, report: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _ledger(run_dir) as ledger:
        seq, digest = ledger.head()
    head = f"{seq}:{digest}"
    assert f"`{head}`" in (report / "report.md").read_text()
    assert head in (report / "report.html").read_text()
    manifest = ReportManifest.model_validate_json((report / "report.json").read_text())
    assert manifest.ledger_head == head and manifest.data.settled
    assert sorted(p.name for p in report.iterdir()) == manifest.files
    assert cli.main(["ledger", "verify", "--run-dir", str(run_dir), "--expect-head", head]) == 0
    capsys.readouterr()


@slow
def test_html_is_escaped_and_self_contained(report: Path) -> None:
    page = (report / "report.html").read_text()
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page  # the IDEA, as text
    assert not re.search(r"(src|href)\s*=", page) and "http" not in page  # nothing fetched
    md = (report / "report.md").read_text()
    prose = re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", md, flags=re.DOTALL | re.MULTILINE)
    assert "<script" not in prose and "&lt;script&gt;" in prose  # literal only in code blocks
    assert "retracted by #" in md and "forbid torch.exp" in md  # messages and their effect


@slow
def test_figures_are_valid_svg_and_referenced(report: Path) -> None:
    md = (report / "report.md").read_text()
    figures = sorted(report.glob("*.svg"))
    assert {f.name for f in figures} >= {"trajectory-steps.svg", "lineage.svg"}
    for figure in figures:
        root = ET.parse(figure).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert f"]({figure.name})" in md
    # Every judged candidate is a mark in the trajectory, with its sha in the hover text.
    titles = [
        t.text or ""
        for t in ET.parse(report / "trajectory-steps.svg").iter()
        if t.tag.endswith("title")
    ]
    manifest = json.loads((report / "report.json").read_text())
    for point in manifest["data"]["trajectory"]["points"]:
        assert any(t.startswith(point["sha"][:10]) for t in titles)


@slow
def test_a_second_report_replaces_the_first(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "again"
    argv = ["report", "--run-dir", str(run_dir), "--out", str(out)]
    assert cli.main(argv) == 0
    first = _tree(out)
    assert cli.main(argv) == 0  # an earlier report is replaced, nothing else is there
    assert set(_tree(out)) == set(first)


@slow
@pytest.mark.parametrize("case", ["user file", "report and a user file", "out is a file", "no run"])
def test_a_bad_out_or_run_dir_writes_nothing(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    out, source = tmp_path / "out", run_dir
    if case == "user file":
        out.mkdir()
        (out / "notes.md").write_text("mine")
    elif case == "report and a user file":
        assert cli.main(["report", "--run-dir", str(run_dir), "--out", str(out)]) == 0
        (out / "paper.tex").write_text("mine")
    elif case == "out is a file":
        out.write_text("mine")
    else:
        source = tmp_path / "no-such-run"
    before = _tree(tmp_path)
    capsys.readouterr()
    assert cli.main(["report", "--run-dir", str(source), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error:" in err
    assert _tree(tmp_path) == before
    if case == "no run":
        assert not out.exists() and "no Ratchet run in" in err
    elif case != "out is a file":
        assert "not part of a Ratchet report" in err and "nothing was written" in err


def test_markdown_and_html_escape_run_text() -> None:
    hostile = "<img src=x onerror=alert(1)> a | b *c* `d`"
    blocks: list[Block] = [
        Para((hostile, Mono("x`y"))),
        Table(("h",), ((hostile,), (Mono("a|b"),))),
        Code("<script>\n```\n"),
    ]
    md = render_markdown(blocks)
    assert "<img" not in md and "&lt;img" in md and "a \\| b \\*c\\*" in md
    assert "``x`y``" in md and "`a\\|b`" in md  # inline code survives; pipes never split a row
    assert "````\n<script>\n```\n````" in md  # a longer fence than any run of backticks inside
    page = render_html(blocks, "<title>")
    assert "<img" not in page and "<script>" not in page and "&lt;title&gt;" in page


def test_svg_text_is_escaped_and_parses() -> None:
    canvas = Canvas(100, 50, "a <b> & c")
    canvas.text(1, 2, "</text><script>alert(1)</script>")
    canvas.shape("circle", "tip \" ' <x>", cx=5, cy=5, r=2)
    root = ET.fromstring(canvas.render().encode())
    assert [e.text for e in root.iter() if e.tag.endswith("text")] == [
        "</text><script>alert(1)</script>"
    ]
    assert not [e for e in root.iter() if e.tag.endswith("script")]
