"""`ratchet dashboard`: the live web view of a run (FastAPI, server-sent events, no CDN)."""

from orchestrator.dashboard.app import create_app
from orchestrator.dashboard.server import serve
from orchestrator.dashboard.settings import (
    TOKEN_VARIABLE,
    DashboardError,
    DashboardSettings,
    check_settings,
    is_loopback,
)

__all__ = [
    "TOKEN_VARIABLE",
    "DashboardError",
    "DashboardSettings",
    "check_settings",
    "create_app",
    "is_loopback",
    "serve",
]
