"""The dashboard in a real browser (Playwright driving Debian's chromium) against a copy of a
small real run served by uvicorn: pages render, the live view follows the ledger without a
reload, the inject form writes (and refuses bad input, writing nothing), a write without the
token is refused, and markup in candidate text stays text."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from ledger import Ledger
from orchestrator import service
from orchestrator.dashboard import DashboardSettings
from orchestrator.state import derive_state
from tests.orchestrator.dashboard.real_run import SCRIPT_IDEA, copy_run, pristine_run
from tests.orchestrator.dashboard.serving import CHROMIUM, CHROMIUM_ARGS, served

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
    ),
]
TOKEN = "browser-test-token"
ROOT = Path(__file__).resolve().parents[3]
FAST = """
[ratchet]
torch_threads = 1
verify_frontier = false
[ratchet.screen_timing]
min_rounds = 4
max_rounds = 8
budget_s = 0.3
target_half_width = 0.05
[ratchet.sweep_timing]
min_rounds = 6
max_rounds = 12
budget_s = 0.5
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def run_dir(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return copy_run(pristine_run(tmp_path_factory), tmp_path / "run")


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def _messages(run_dir: Path) -> list[str]:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        return [m.record.text for m in ledger.messages()]


def _head(run_dir: Path) -> int:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        return ledger.head()[0]


def test_every_page_renders(run_dir: Path, page: Page) -> None:
    with served(DashboardSettings(run_dir=run_dir, poll_s=0.2)) as url:
        page.goto(url + "/")
        expect(page.locator("h1")).to_have_text("Overview")
        expect(page.locator("#baseline")).to_have_text(
            "eager naive reference (two exp passes), float32"
        )
        expect(page.locator("table.configs tbody tr")).to_have_count(3)
        expect(page.locator("#live-state")).to_have_text("live")
        page.click("text=Trajectory")
        expect(page.locator("svg.plot a.point")).to_have_count(4)
        page.click("text=config s2")
        expect(page.locator("th", has_text="config s2")).to_be_visible()
        page.click("text=Lineage")
        expect(page.locator("svg.tree a.node")).to_have_count(4)
        page.locator("svg.tree a.node").first.click()  # the seed, on the left
        expect(page.locator("h1")).to_contain_text("Candidate")
        expect(page.locator("pre.cmd").first).to_contain_text("ratchet checkout")
        for name, heading in (("Ideas", "Ideas"), ("Queue", "Queue"), ("Ledger", "Ledger")):
            page.click(f"header >> text={name}")
            expect(page.locator("h1")).to_have_text(heading)
        page.click("#verify-submit")
        expect(page.locator("#verify-result")).to_contain_text("ledger ok")


def test_the_page_follows_the_ledger_without_a_reload(run_dir: Path, page: Page) -> None:
    with served(DashboardSettings(run_dir=run_dir, poll_s=0.2)) as url:
        page.goto(url + "/queue")
        expect(page.locator("#live-state")).to_have_text("live")
        page.fill("#text", "half-typed, kept across updates")
        page.evaluate("window.notReloaded = true")
        seq = service.inject_message(run_dir, "LITERATURE", "a paper on online softmax", "cli")
        expect(page.locator(f"#message-{seq}")).to_contain_text("a paper on online softmax")
        expect(page.locator("#head-seq")).to_have_text(str(seq))
        assert page.evaluate("window.notReloaded") is True
        expect(page.locator("#text")).to_have_value("half-typed, kept across updates")
        page.goto(url + "/ledger")
        page.evaluate("window.notReloaded = true")
        seq = service.inject_message(run_dir, "IDEA", "unroll the reduction", "cli")
        expect(page.locator("#chain-head")).to_contain_text(f"{seq}:")
        assert page.evaluate("window.notReloaded") is True


def test_the_live_view_follows_a_running_search(run_dir: Path, page: Page, tmp_path: Path) -> None:
    config = tmp_path / "fast.toml"
    config.write_text(FAST)
    command = [sys.executable, "-m", "orchestrator.cli", "--config", str(config), "run"]
    command += ["--run-dir", str(run_dir), "--workload", "softmax", "--device", "cpu"]
    env = {**os.environ, "RATCHET_LOCK_DIR": str(tmp_path / "locks")}
    with served(DashboardSettings(run_dir=run_dir, poll_s=0.2)) as url:
        page.goto(url + "/trajectory?x=step")
        expect(page.locator("svg.plot a.point")).to_have_count(4)
        page.evaluate("window.notReloaded = true")
        search = subprocess.Popen(
            [*command, "--max-candidates", "4"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            expect(page.locator("svg.plot a.point")).to_have_count(5, timeout=120_000)
        finally:
            out, _ = search.communicate(timeout=120)
        assert search.returncode == 0, out
        assert page.evaluate("window.notReloaded") is True
        expect(page.locator("#head-seq")).to_have_text(str(_head(run_dir)))


def test_an_inject_from_the_form_reaches_the_ledger(run_dir: Path, page: Page) -> None:
    with served(DashboardSettings(run_dir=run_dir, poll_s=0.2)) as url:
        page.goto(url + "/queue")
        page.select_option("#kind", "IDEA")
        page.fill("#author", "browser")
        page.fill("#text", "fuse the max and the sum into one pass")
        page.click("#inject-submit")
        expect(page.locator("#inject-ok")).to_contain_text("injected as message #")
        expect(page.locator("#messages")).to_contain_text("fuse the max and the sum")
    assert _messages(run_dir)[-1] == "fuse the max and the sum into one pass"


def test_a_malformed_inject_shows_the_error_and_writes_nothing(run_dir: Path, page: Page) -> None:
    before = _head(run_dir)
    with served(DashboardSettings(run_dir=run_dir, poll_s=0.2)) as url:
        page.goto(url + "/queue")
        page.select_option("#kind", "PRIORITY")
        page.fill("#text", "idea:reuse-exp=7")
        page.click("#inject-submit")
        expect(page.locator("#inject-error")).to_contain_text(
            "PRIORITY idea quality must be in (0, 1), got 7.0"
        )
        expect(page.locator("#text")).to_have_value("idea:reuse-exp=7")  # kept to correct it
        expect(page.locator("#kind")).to_have_value("PRIORITY")
    assert _head(run_dir) == before


def test_a_write_without_the_token_is_refused(run_dir: Path, page: Page) -> None:
    before = _head(run_dir)
    # Configured as a reachable bind (so a token is required), served on loopback for the test.
    settings = DashboardSettings(run_dir=run_dir, host="0.0.0.0", token=TOKEN, poll_s=0.2)
    with served(settings) as url:
        page.goto(url + "/queue")
        expect(page.locator("h1")).to_have_text("This dashboard needs its token")
        status = page.evaluate(
            """url => fetch(url + '/queue', {method: 'POST', body: 'kind=IDEA&text=sneaky',
                headers: {'Content-Type': 'application/x-www-form-urlencoded'}})
                .then(r => r.status)""",
            url,
        )
        assert status == 401
        wrong = page.evaluate(
            """url => fetch(url + '/ledger/verify', {method: 'POST', body: 'token=not-the-token',
                headers: {'Content-Type': 'application/x-www-form-urlencoded'}})
                .then(r => r.status)""",
            url,
        )
        assert wrong == 403
        assert _head(run_dir) == before
        page.fill("#login-token", TOKEN)
        page.click("text=log in")
        expect(page.locator("h1")).to_have_text("Queue")
        page.fill("#text", "with the token")
        page.click("#inject-submit")
        expect(page.locator("#inject-ok")).to_be_visible()
    assert _messages(run_dir)[-1] == "with the token"


def _human_step(run_dir: Path) -> int:
    """The step whose candidate implements the human idea (which step depends on how many
    expansions before it made nothing new)."""
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    return next(c.step for c in state.candidates.values() if (c.idea_id or "").startswith("human-"))


def test_script_in_candidate_text_stays_text(run_dir: Path, page: Page) -> None:
    with served(DashboardSettings(run_dir=run_dir, poll_s=0.2)) as url:
        page.goto(url + "/ideas")
        expect(page.locator("td", has_text=SCRIPT_IDEA)).to_be_visible()
        page.goto(url + "/lineage")
        page.click(f"svg.tree a.node:has-text('s{_human_step(run_dir)}')")
        expect(page.locator("#idea-text")).to_have_text(SCRIPT_IDEA)
        expect(page.locator("#commit-message")).to_contain_text(SCRIPT_IDEA)
        assert page.evaluate("window.pwned") is None
        assert page.locator("main script").count() == 0
