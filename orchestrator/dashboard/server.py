"""Serving a dashboard: check the settings and the run, then run uvicorn until interrupted."""

from __future__ import annotations

import socket
from collections.abc import Callable

import uvicorn

from orchestrator import service
from orchestrator.dashboard.app import create_app
from orchestrator.dashboard.settings import DashboardError, DashboardSettings, check_settings


def _bind(settings: DashboardSettings) -> socket.socket:
    """The listening socket, bound here so that a port in use is a clear error, not a log."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host.strip("[]"), settings.port))
    except OSError as exc:
        sock.close()
        raise DashboardError(
            f"cannot listen on {settings.host}:{settings.port} ({exc.strerror}); pass another "
            "--port (or --port 0 for any free one), or stop what holds it"
        ) from exc
    return sock


def serve(settings: DashboardSettings, announce: Callable[[str], None] = print) -> None:
    """`ratchet dashboard`: refuses a reachable bind without a token, a run dir without a run
    and a port in use (DashboardError), then serves until Ctrl-C."""
    check_settings(settings)
    try:
        with service.open_run_ledger(settings.run_dir):
            pass  # only to refuse, now and clearly, a directory that holds no run
    except service.RatchetError as exc:
        raise DashboardError(str(exc)) from exc
    app = create_app(settings)
    sock = _bind(settings)
    port = sock.getsockname()[1]
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    guarded = "every page and write needs the token" if settings.token else "no token"
    announce(
        f"dashboard of {settings.run_dir} on http://{host}:{port}/ ({guarded}); Ctrl-C stops it"
    )
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
