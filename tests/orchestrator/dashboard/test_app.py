"""The dashboard app over HTTP (no browser): settings refused, every guard on reads and writes,
the JSON views, escaping, and the event stream, against a copy of a small real run."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from ledger import Ledger
from orchestrator.dashboard import DashboardError, DashboardSettings, create_app, is_loopback
from tests.orchestrator.dashboard.real_run import SCRIPT_IDEA, copy_run, pristine_run

pytestmark = pytest.mark.slow
LOCAL = "http://127.0.0.1:8765"
TOKEN = "s3cret-t0ken-for-tests"


@pytest.fixture
def run_dir(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return copy_run(pristine_run(tmp_path_factory), tmp_path / "run")


def _entries(run_dir: Path) -> int:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        return ledger.head()[0]


def _client(run_dir: Path, **settings: object) -> TestClient:
    app = create_app(DashboardSettings.model_validate({"run_dir": run_dir, **settings}))
    return TestClient(app, base_url=LOCAL)


def test_a_reachable_bind_needs_a_token_of_some_length(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "192.0.2.7", "::", "example.org"):
        with pytest.raises(DashboardError, match=f"--host {host} is not a loopback address"):
            create_app(DashboardSettings(run_dir=tmp_path, host=host))
    with pytest.raises(DashboardError, match="token is 3 characters long; use at least 8"):
        create_app(DashboardSettings(run_dir=tmp_path, token="abc"))
    create_app(DashboardSettings(run_dir=tmp_path, host="0.0.0.0", token=TOKEN))
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.3.2.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "::", "loopback.example"))


def test_pages_and_views_render_with_untrusted_text_escaped(run_dir: Path) -> None:
    client = _client(run_dir)
    html = {"accept": "text/html"}
    for path in ("/", "/trajectory", "/trajectory?x=step&config=s2", "/lineage", "/ideas"):
        response = client.get(path, headers=html)
        assert response.status_code == 200, (path, response.text[:300])
    for path in ("/queue", "/ideas"):
        text = client.get(path, headers=html).text
        assert (
            "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in text and "<script>window" not in text
        )
    ideas = client.get("/api/ideas").json()
    human = next(i for i in ideas if i["source"] == "human")
    assert human["text"] == SCRIPT_IDEA
    lineage = client.get("/api/lineage").json()
    sha = next(n["sha"] for n in lineage["nodes"] if n["idea_id"] == human["id"])
    page = client.get(f"/candidate/{sha[:8]}", headers=html).text
    assert "<script>window" not in page and "&lt;script&gt;window.pwned" in page
    assert f"ratchet checkout {sha} --run-dir {run_dir}" in page
    assert client.get(f"/api/candidate/{sha}").json()["idea_text"] == SCRIPT_IDEA
    missing = client.get("/candidate/ffff0000", headers=html)
    assert missing.status_code == 404 and "matches no candidate" in missing.text
    assert client.get("/api/nothing").status_code == 404
    head = client.get("/api/head").json()
    assert head["seq"] == _entries(run_dir) and client.get("/api/ledger").json()["head_seq"]


def test_a_bad_message_is_refused_with_the_cli_error_and_nothing_is_written(run_dir: Path) -> None:
    client = _client(run_dir)
    before = _entries(run_dir)
    cases = {
        ("PRIORITY", "bogus"): "PRIORITY item &#39;bogus&#39; is malformed",
        ("CONSTRAINT", "forbid nonsense=1"): "CONSTRAINT names unknown tunable",
        ("REDIRECT", "configs=nope"): "REDIRECT names unknown configs",
        ("NOTAKIND", "x"): "unknown message kind",
        ("IDEA", "   "): "IDEA text must be 1..4000 characters",
    }
    for (kind, text), error in cases.items():
        response = client.post("/queue", data={"kind": kind, "text": text})
        assert response.status_code == 400 and error in response.text, response.text[-800:]
    assert _entries(run_dir) == before
    response = client.post(
        "/queue", data={"kind": "IDEA", "text": "tile the rows", "author": "web"},
        follow_redirects=False,
    )  # fmt: skip
    assert (
        response.status_code == 303
        and response.headers["location"] == f"/queue?injected={before + 1}"
    )
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        last = ledger.messages()[-1]
    assert (last.seq, last.record.kind, last.record.text, last.record.author) == (
        before + 1, "IDEA", "tile the rows", "web",
    )  # fmt: skip


def test_writes_from_another_site_or_host_are_refused(run_dir: Path) -> None:
    client = _client(run_dir)
    before = _entries(run_dir)
    form = {"kind": "IDEA", "text": "from elsewhere"}
    response = client.post("/queue", data=form, headers={"origin": "http://evil.example"})
    assert response.status_code == 403 and "another site" in response.text
    # DNS rebinding: a name that resolves to 127.0.0.1 but is not ours.
    response = client.post("/queue", data=form, headers={"host": "evil.example:8765"})
    assert response.status_code == 403
    assert client.get("/", headers={"host": "evil.example"}).status_code == 403
    assert _entries(run_dir) == before


def test_with_a_token_every_page_and_write_needs_it(run_dir: Path) -> None:
    client = _client(run_dir, host="0.0.0.0", token=TOKEN)
    before = _entries(run_dir)
    page = client.get("/queue", headers={"accept": "text/html"})
    assert page.status_code == 401 and 'action="/login"' in page.text
    assert client.get("/api/overview").status_code == 401
    assert client.get("/events").status_code == 401
    form = {"kind": "IDEA", "text": "unauthenticated"}
    assert client.post("/queue", data=form).status_code == 401
    assert client.post("/queue", data={**form, "token": "wrong-token-value"}).status_code == 403
    assert client.post("/ledger/verify").status_code == 401
    assert _entries(run_dir) == before
    assert client.post("/login", data={"token": "nope-nope", "next": "/"}).status_code == 403
    login = client.post("/login", data={"token": TOKEN, "next": "//evil"}, follow_redirects=False)
    assert login.status_code == 303 and login.headers["location"] == "/"
    assert client.get("/api/overview").status_code == 200  # the session cookie
    verified = client.post("/ledger/verify", headers={"accept": "text/html"})
    assert verified.status_code == 200 and "ledger ok" in verified.text
    other = _client(run_dir, host="0.0.0.0", token=TOKEN)
    assert other.get("/api/head", headers={"x-ratchet-token": TOKEN}).status_code == 200
    done = other.post("/queue", data={**form, "token": TOKEN}, follow_redirects=False)
    assert done.status_code == 303 and _entries(run_dir) == before + 1


def test_the_event_stream_names_the_head(run_dir: Path) -> None:
    client = _client(run_dir, poll_s=0.05)
    with client.stream("GET", "/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = []
        for line in stream.iter_lines():
            lines.append(line)
            if line.startswith("data:"):
                break
    assert lines[0] == "event: head" and f'"seq": {_entries(run_dir)}' in lines[1]
