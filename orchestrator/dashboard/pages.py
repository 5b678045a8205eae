"""The HTML pages: overview, trajectory, lineage, candidate, ideas, queue (with the inject
form), ledger (with the verify button) and the login page of a dashboard with a token."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from orchestrator import run_view, service
from orchestrator.dashboard.context import Context
from orchestrator.dashboard.plots import lineage_svg, trajectory_svg
from orchestrator.dashboard.security import COOKIE

FORM_LIMIT = 64_000  # bytes of a posted form: a message is at most 4,000 characters


async def _form(request: Request) -> dict[str, str]:
    body = await request.body()
    if len(body) > FORM_LIMIT:
        raise HTTPException(413, f"the form is {len(body)} bytes; at most {FORM_LIMIT}")
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {key: values[-1] for key, values in fields.items()}


def _queue_page(ctx: Context, request: Request, status: int = 200, **form: Any) -> HTMLResponse:
    with ctx.run() as (ledger, data):
        view = run_view.queue(ledger, data)
        head = ledger.head()
    values = {"kind": "IDEA", "text": "", "author": "", "error": None, "injected": None}
    values.update(form)
    return ctx.page(request, "queue.html", status, view=view, head=head, form=values)


def _inject(ctx: Context, request: Request, form: dict[str, str]) -> Response:
    kind, text = form.get("kind", ""), form.get("text", "")
    author = form.get("author", "").strip() or None
    try:
        seq = service.inject_message(ctx.settings.run_dir, kind, text, author)
    except service.RatchetError as exc:  # the CLI's validation and words, nothing written
        return _queue_page(
            ctx, request, 400, kind=kind, text=text, author=author or "", error=str(exc)
        )
    return RedirectResponse(f"/queue?injected={seq}", status_code=303)


def _ledger_page(ctx: Context, request: Request, verified: Any = None) -> HTMLResponse:
    with ctx.run() as (ledger, _):
        view = run_view.ledger_view(ledger)
    fix = service.chain_fix(verified, ctx.settings.run_dir) if verified and not verified.ok else ""
    head = (view.head_seq, view.head_hash)
    return ctx.page(request, "ledger.html", view=view, head=head, report=verified, fix=fix)


def _verify(ctx: Context, request: Request) -> HTMLResponse:
    return _ledger_page(ctx, request, service.verify_ledger(ctx.settings.run_dir))


def _read_pages(app: FastAPI, ctx: Context) -> None:
    @app.get("/", response_class=HTMLResponse)
    def overview(request: Request) -> HTMLResponse:
        ctx.guard.check_read(request)
        with ctx.run() as (ledger, data):
            view = run_view.overview(ledger, data)
        head = (view.status.ledger_entries, view.status.ledger_head)
        return ctx.page(request, "overview.html", view=view, head=head)

    @app.get("/trajectory", response_class=HTMLResponse)
    def trajectory(request: Request, x: str = "time", config: str | None = None) -> HTMLResponse:
        ctx.guard.check_read(request)
        with ctx.run() as (ledger, data):
            view = run_view.trajectory(ledger, data)
            head = ledger.head()
        x_axis = "step" if x == "step" else "time"
        chosen = config if config in view.config_ids else None
        svg = trajectory_svg(view, x_axis, chosen)
        return ctx.page(
            request, "trajectory.html", view=view, head=head, svg=svg, x=x_axis, config=chosen
        )

    @app.get("/lineage", response_class=HTMLResponse)
    def lineage(request: Request) -> HTMLResponse:
        ctx.guard.check_read(request)
        with ctx.run() as (ledger, data):
            view = run_view.lineage(data)
            head = ledger.head()
        return ctx.page(request, "lineage.html", view=view, head=head, svg=lineage_svg(view))

    @app.get("/candidate/{sha}", response_class=HTMLResponse)
    def candidate(sha: str, request: Request) -> HTMLResponse:
        ctx.guard.check_read(request)
        with ctx.run() as (ledger, data):
            try:
                view = run_view.candidate_detail(ledger, data, sha)
            except run_view.RunViewError as exc:
                raise HTTPException(404, str(exc)) from exc
            head = ledger.head()
        return ctx.page(request, "candidate.html", view=view, head=head)

    @app.get("/ideas", response_class=HTMLResponse)
    def ideas(request: Request) -> HTMLResponse:
        ctx.guard.check_read(request)
        with ctx.run() as (ledger, data):
            rows = run_view.ideas(data)
            head = ledger.head()
        return ctx.page(request, "ideas.html", rows=rows, head=head)


def _write_pages(app: FastAPI, ctx: Context) -> None:
    @app.get("/queue", response_class=HTMLResponse)
    def queue(request: Request, injected: int | None = None) -> HTMLResponse:
        ctx.guard.check_read(request)
        return _queue_page(ctx, request, injected=injected)

    @app.post("/queue")
    async def inject(request: Request) -> Response:
        form = await _form(request)
        ctx.guard.check_write(request, form.get("token"))
        return await run_in_threadpool(_inject, ctx, request, form)

    @app.get("/ledger", response_class=HTMLResponse)
    def ledger(request: Request) -> HTMLResponse:
        ctx.guard.check_read(request)
        return _ledger_page(ctx, request)

    @app.post("/ledger/verify", response_class=HTMLResponse)
    async def verify(request: Request) -> HTMLResponse:
        form = await _form(request)
        ctx.guard.check_write(request, form.get("token"))
        return await run_in_threadpool(_verify, ctx, request)


def _login(app: FastAPI, ctx: Context) -> None:
    @app.get("/login", response_class=HTMLResponse)
    def login_page(request: Request, next: str = "/") -> HTMLResponse:
        return ctx.page(request, "login.html", next=next, error=None)

    @app.post("/login")
    async def login(request: Request) -> Response:
        form = await _form(request)
        target = form.get("next", "/")
        target = target if target.startswith("/") and not target.startswith("//") else "/"
        if not ctx.guard.login(form.get("token", "")):
            return ctx.page(request, "login.html", 403, next=target, error="wrong token")
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE, form["token"], httponly=True, samesite="strict", secure=False, path="/"
        )
        return response


def add_pages(app: FastAPI, ctx: Context) -> None:
    """Every HTML page of the dashboard."""
    _read_pages(app, ctx)
    _write_pages(app, ctx)
    _login(app, ctx)
