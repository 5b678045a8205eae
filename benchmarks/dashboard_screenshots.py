"""Screenshots of the dashboard's pages (docs/dashboard/*.png) from a real run, taken by
Debian's chromium through Playwright, the way the browser tests drive it.

    .venv/bin/python benchmarks/dashboard_screenshots.py --out docs/dashboard
    .venv/bin/python benchmarks/dashboard_screenshots.py --run-dir runs/night1 --out /tmp/shots

Without --run-dir it makes a small real run first (softmax on the CPU, offline expander,
--candidates candidates, a human IDEA injected half-way), in a temporary directory.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import FloatRect, sync_playwright

from ledger import Ledger
from orchestrator import service
from orchestrator.dashboard import DashboardSettings
from orchestrator.state import derive_state
from tests.orchestrator.conftest import ListReporter, fast_settings
from tests.orchestrator.dashboard.serving import CHROMIUM, CHROMIUM_ARGS, served

MAX_HEIGHT = 2000  # pixels: the ledger page's newest entries would make a tall, heavy image
PAGES = {
    "overview": "/",
    "trajectory": "/trajectory",
    "lineage": "/lineage",
    "ideas": "/ideas",
    "queue": "/queue",
    "ledger": "/ledger",
}


def make_run(root: Path, candidates: int) -> None:
    """A small real run: half the candidates, a human IDEA, the rest."""
    half = max(1, candidates // 2)
    service.run_search(fast_settings(root, max_candidates=half), ListReporter())
    service.inject_message(root, "IDEA", "Normalize with the fused softmax kernel", "screenshots")
    service.run_search(fast_settings(root, max_candidates=candidates), ListReporter())


def _frontier(run_dir: Path) -> str | None:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        return derive_state(ledger).frontier_sha


def shoot(run_dir: Path, out: Path) -> list[Path]:
    """One full-page PNG per page, and the frontier's candidate page."""
    out.mkdir(parents=True, exist_ok=True)
    pages = dict(PAGES)
    frontier = _frontier(run_dir)
    if frontier:
        pages["candidate"] = f"/candidate/{frontier}"
    written = []
    with served(DashboardSettings(run_dir=run_dir)) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for name, path in pages.items():
            page.goto(url + path)
            page.wait_for_selector("#live-state:text('live')")
            target = out / f"{name}.png"
            height = min(MAX_HEIGHT, page.evaluate("document.documentElement.scrollHeight"))
            clip = FloatRect(x=0, y=0, width=1280, height=height)
            page.screenshot(path=str(target), full_page=True, clip=clip)
            written.append(target)
        browser.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, default=None, help="an existing run")
    parser.add_argument("--out", type=Path, default=Path("docs/dashboard"))
    parser.add_argument("--candidates", type=int, default=6, help="size of the run made")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install chromium")
    if args.run_dir is not None:
        for path in shoot(args.run_dir, args.out):
            print(path)
        return
    with tempfile.TemporaryDirectory(prefix="ratchet-shots-") as scratch:
        run_dir = Path(scratch) / "run"
        run_dir.mkdir()
        make_run(run_dir, args.candidates)
        for path in shoot(run_dir, args.out):
            print(path)


if __name__ == "__main__":
    main()
