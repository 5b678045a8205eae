"""The dashboard's app factory: everything built here, per app (no module-level state)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from orchestrator.dashboard.context import PACKAGE, Context, make_templates
from orchestrator.dashboard.live import add_live_routes
from orchestrator.dashboard.pages import add_pages
from orchestrator.dashboard.security import Guard
from orchestrator.dashboard.settings import DashboardSettings, check_settings


def _errors(app: FastAPI, ctx: Context) -> None:
    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        wants_html = "text/html" in request.headers.get("accept", "")
        if not wants_html:
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)
        if exc.status_code == 401 and request.method == "GET":
            return ctx.page(request, "login.html", 401, next=request.url.path, error=None)
        return ctx.page(request, "error.html", exc.status_code, message=str(exc.detail))


def create_app(settings: DashboardSettings) -> FastAPI:
    """The dashboard of one run; refuses (DashboardError) a reachable bind without a token."""
    check_settings(settings)
    ctx = Context(settings=settings, guard=Guard(settings), templates=make_templates())
    app = FastAPI(title="Ratchet dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=PACKAGE / "static"), name="static")
    _errors(app, ctx)
    add_pages(app, ctx)
    add_live_routes(app, ctx)
    return app
