"""A real run on a PostgreSQL ledger: the run dir records the database (never its password),
every command opens that database, and another ledger than the run dir's is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ledger import Ledger
from orchestrator import cli, service
from orchestrator.ledger_location import LEDGER_URL_FILE, without_password
from tests.ledger.postgres_server import LEDGER_PASSWORD, PostgresServer, find_bindir, free_port
from tests.orchestrator.conftest import ListReporter, fast_settings

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class PgRun:
    """A finished tiny search whose ledger is a PostgreSQL database."""

    server: PostgresServer
    run_dir: Path
    url: str  # with the password


@pytest.fixture(scope="module")
def pg_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgRun]:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl): install Debian's postgresql")
    server = PostgresServer.start(bindir)
    try:
        url = server.url(server.create_database("run"))
        run_dir = tmp_path_factory.mktemp("pg") / "run"
        settings = fast_settings(run_dir, workload="softmax", max_candidates=2, ledger=url)
        service.run_search(settings, ListReporter())
        yield PgRun(server, run_dir, url)
    finally:
        server.stop()


def _ratchet(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_run_dir_records_the_database_and_never_its_password(pg_run: PgRun) -> None:
    assert not (pg_run.run_dir / "ledger.sqlite").exists()
    recorded = (pg_run.run_dir / LEDGER_URL_FILE).read_text(encoding="utf-8").strip()
    assert recorded == without_password(pg_run.url)
    assert LEDGER_PASSWORD not in recorded
    for path in pg_run.run_dir.rglob("*"):
        if path.is_file():
            assert LEDGER_PASSWORD.encode() not in path.read_bytes(), path
    assert (pg_run.run_dir / "ledger.heads").is_file()  # the journal anchors the chain here
    with Ledger.open(pg_run.url, create=False) as ledger:
        assert len(ledger.candidates()) >= 2  # the seed and what the search judged


def test_status_verify_inject_export_report_checkout_use_the_database(
    pg_run: PgRun, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    where = ["--run-dir", str(pg_run.run_dir), "--ledger", pg_run.url]
    code, out, err = _ratchet(capsys, "status", *where)
    assert code == 0, err
    assert "softmax" in out
    code, out, err = _ratchet(capsys, "ledger", "verify", *where)
    assert code == 0, err
    assert out.startswith("ledger ok") and "ledger.heads" in out
    code, out, err = _ratchet(capsys, "inject", "IDEA", "try a two-pass reduction", *where)
    assert code == 0, err
    code, out, err = _ratchet(capsys, "export", *where, "--out", str(tmp_path / "export"))
    assert code == 0, err
    manifest = json.loads((tmp_path / "export" / "manifest.json").read_text(encoding="utf-8"))
    code, out, err = _ratchet(capsys, "ledger", "show", *where, "--kind", "message")
    assert code == 0 and "two-pass" in out, err
    assert manifest["ledger_head"]
    code, _, err = _ratchet(capsys, "report", *where, "--out", str(tmp_path / "report"))
    assert code == 0 and (tmp_path / "report" / "report.md").is_file(), err
    into = tmp_path / "frontier"
    code, _, err = _ratchet(capsys, "checkout", manifest["commit"], *where, "--into", str(into))
    assert code == 0 and into.is_dir(), err
    for text in (out, err):
        assert LEDGER_PASSWORD not in text
    # The settings file's `ledger` key is the same setting as --ledger.
    config = tmp_path / "ratchet.toml"
    config.write_text(f'ledger = "{pg_run.url}"\n', encoding="utf-8")
    code, _, err = _ratchet(capsys, "--config", str(config), "status", *where[:2])
    assert code == 0, err


def test_without_ledger_the_recorded_database_is_opened_with_pgpassword(
    pg_run: PgRun, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(pg_run.run_dir / "no-such-pgpass"))
    code, _, err = _ratchet(capsys, "status", "--run-dir", str(pg_run.run_dir))
    assert code == 2
    assert "password" in err and "PGPASSWORD" in err and "Traceback" not in err
    monkeypatch.setenv("PGPASSWORD", LEDGER_PASSWORD)
    code, out, err = _ratchet(capsys, "status", "--run-dir", str(pg_run.run_dir))
    assert code == 0, err
    assert "softmax" in out


def test_another_ledger_for_the_run_dir_is_refused(
    pg_run: PgRun, capsys: pytest.CaptureFixture[str]
) -> None:
    other = pg_run.server.url(pg_run.server.create_database("other"))
    for command in (["status"], ["ledger", "verify"], ["inject", "IDEA", "x"]):
        code, _, err = _ratchet(
            capsys, *command, "--run-dir", str(pg_run.run_dir), "--ledger", other
        )
        assert code == 2
        assert LEDGER_URL_FILE in err and without_password(pg_run.url) in err
        assert LEDGER_PASSWORD not in err and "Traceback" not in err
    with Ledger.open(other, create=True) as ledger:  # nothing was written there
        assert ledger.head()[0] == 0


def test_a_new_run_dir_on_a_database_holding_a_run_is_refused(
    pg_run: PgRun, tmp_path: Path
) -> None:
    fresh = tmp_path / "fresh"
    settings = fast_settings(fresh, workload="softmax", max_candidates=1, ledger=pg_run.url)
    with pytest.raises(service.RatchetError, match="already holds a run"):
        service.run_search(settings, ListReporter())
    assert not fresh.exists()  # a refused start leaves nothing


def test_a_sqlite_run_dir_refuses_a_database_ledger(
    pg_run: PgRun, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run_dir = tmp_path / "sqlite-run"
    run_dir.mkdir()
    Ledger.open_path(run_dir / "ledger.sqlite").close()
    code, _, err = _ratchet(capsys, "status", "--run-dir", str(run_dir), "--ledger", pg_run.url)
    assert code == 2
    assert "own SQLite ledger" in err and LEDGER_PASSWORD not in err


def test_an_unreachable_server_is_a_clean_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"postgresql+psycopg://ratchet:{LEDGER_PASSWORD}@127.0.0.1:{free_port()}/nothing"
    run_dir = tmp_path / "run"
    argv = ["run", "--run-dir", str(run_dir), "--ledger", url, "--device", "cpu"]
    code, _, err = _ratchet(capsys, *argv, "--workload", "softmax", "--max-candidates", "1")
    assert code == 2
    assert "cannot connect" in err and "Traceback" not in err and LEDGER_PASSWORD not in err
    assert not run_dir.exists()
