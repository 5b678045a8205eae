"""The live side: server-sent events when the ledger head moves, and the views as JSON."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from ledger import Ledger, LedgerError
from orchestrator import run_view
from orchestrator.dashboard.context import Context
from orchestrator.ledger_location import resolve_ledger

KEEP_ALIVE_S = 15.0


def _event(kind: str, data: object) -> str:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"


def _open(ctx: Context) -> Ledger:
    # The run's own ledger, SQLite file or the database its ledger.url names.
    return resolve_ledger(ctx.settings.run_dir, None).open(create=False)


async def head_events(ctx: Context, request: Request) -> AsyncIterator[str]:
    """A `head` event now and whenever the head changes. The ledger is polled, not watched:
    each poll is one short read transaction that never blocks the run's appends, and any
    number of writers (parallel workers) only move the head further between two polls."""
    ledger: Ledger | None = None
    last: tuple[int, str] | None = None
    quiet_since = time.monotonic()
    try:
        while not await request.is_disconnected():
            try:
                if ledger is None:
                    ledger = await asyncio.to_thread(_open, ctx)
                head: tuple[int, str] | None = await asyncio.to_thread(ledger.head)
            except LedgerError as exc:
                yield _event("problem", str(exc))
                head = last
            if head is not None and head != last:
                last, quiet_since = head, time.monotonic()
                yield _event("head", {"seq": head[0], "hash": head[1]})
            elif time.monotonic() - quiet_since > KEEP_ALIVE_S:
                quiet_since = time.monotonic()
                yield ": still here\n\n"  # a comment line keeps proxies from closing the stream
            await asyncio.sleep(ctx.settings.poll_s)
    finally:
        if ledger is not None:
            ledger.close()


def add_live_routes(app: FastAPI, ctx: Context) -> None:
    """/events (SSE) and /api/* (every view as JSON, for scripts and the report)."""

    @app.get("/events")
    async def events(request: Request) -> StreamingResponse:
        ctx.guard.check_read(request)
        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(
            head_events(ctx, request), media_type="text/event-stream", headers=headers
        )

    @app.get("/api/head")
    def api_head(request: Request) -> JSONResponse:
        ctx.guard.check_read(request)
        with ctx.run() as (ledger, _):
            seq, digest = ledger.head()
        return JSONResponse({"seq": seq, "hash": digest})

    @app.get("/api/{view}")
    def api_view(view: str, request: Request) -> JSONResponse:
        ctx.guard.check_read(request)
        with ctx.run() as (ledger, data):
            builders = {
                "overview": lambda: run_view.overview(ledger, data),
                "trajectory": lambda: run_view.trajectory(ledger, data),
                "lineage": lambda: run_view.lineage(data),
                "queue": lambda: run_view.queue(ledger, data),
                "ledger": lambda: run_view.ledger_view(ledger),
            }
            if view == "ideas":
                return JSONResponse([row.model_dump(mode="json") for row in run_view.ideas(data)])
            if view not in builders:
                known = ", ".join(["ideas", *builders, "head", "candidate/SHA"])
                return JSONResponse({"detail": f"no view {view!r}; known: {known}"}, 404)
            return JSONResponse(builders[view]().model_dump(mode="json"))

    @app.get("/api/candidate/{sha}")
    def api_candidate(sha: str, request: Request) -> JSONResponse:
        ctx.guard.check_read(request)
        with ctx.run() as (ledger, data):
            try:
                detail = run_view.candidate_detail(ledger, data, sha)
            except run_view.RunViewError as exc:
                return JSONResponse({"detail": str(exc)}, 404)
            return JSONResponse(detail.model_dump(mode="json"))
