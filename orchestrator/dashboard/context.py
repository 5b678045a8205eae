"""What every route of the dashboard shares: its settings, guard, templates and run reader."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse

from harness.models import share_text
from ledger import Ledger, LedgerError
from orchestrator import service
from orchestrator.dashboard.security import Guard
from orchestrator.dashboard.settings import DashboardSettings
from orchestrator.run_view import RunData, read_run

PACKAGE = Path(__file__).resolve().parent
NAV = (
    ("/", "Overview"),
    ("/trajectory", "Trajectory"),
    ("/lineage", "Lineage"),
    ("/ideas", "Ideas"),
    ("/queue", "Queue"),
    ("/ledger", "Ledger"),
)


def _ratio(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value.median:.3f}x [{value.ci_low:.3f}, {value.ci_high:.3f}]"


def _number(value: float | None, spec: str = ".3f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def make_templates() -> jinja2.Environment:
    """The package's templates, every variable HTML-escaped (candidate text is untrusted)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(PACKAGE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["ratio"] = _ratio
    env.filters["num"] = _number
    env.filters["share"] = lambda value: "-" if value is None else share_text(value)
    env.globals["nav"] = NAV
    return env


@dataclass(frozen=True)
class Context:
    """What every route shares: settings, guard, templates."""

    settings: DashboardSettings
    guard: Guard
    templates: jinja2.Environment

    @contextmanager
    def run(self) -> Iterator[tuple[Ledger, RunData]]:
        """The run's ledger opened for this request (as `ratchet status` opens it: never
        created), read once; closed when the request is done."""
        try:
            with service.open_run_ledger(self.settings.run_dir) as ledger:
                yield ledger, read_run(ledger, self.settings.run_dir)
        except (service.RatchetError, LedgerError) as exc:
            raise HTTPException(503, str(exc)) from exc

    def page(self, request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        """A rendered page."""
        template = self.templates.get_template(name)
        html = template.render(
            request_path=request.url.path,
            run_dir=str(self.settings.run_dir),
            token_required=self.settings.token is not None,
            **values,
        )
        return HTMLResponse(html, status_code=status)
