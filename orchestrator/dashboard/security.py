"""Who may read and who may write: the token (header, form field or session cookie), the Host
header of a loopback bind (no DNS rebinding) and the Origin of every write (no cross-site form)."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

from fastapi import HTTPException, Request

from orchestrator.dashboard.settings import LOOPBACK_NAMES, DashboardSettings, is_loopback

TOKEN_HEADER = "x-ratchet-token"
TOKEN_FIELD = "token"
COOKIE = "ratchet_dashboard"


class Guard:
    """The checks every request goes through, for one dashboard's settings."""

    def __init__(self, settings: DashboardSettings) -> None:
        self._settings = settings

    def _matches(self, given: str | None) -> bool:
        token = self._settings.token
        return token is not None and given is not None and secrets.compare_digest(given, token)

    def _host_allowed(self, request: Request) -> bool:
        if not self._settings.loopback:
            return True  # the token guards a reachable bind
        host = urlsplit(f"//{request.headers.get('host', '')}").hostname or ""
        return host in LOOPBACK_NAMES or is_loopback(host)

    def presented(self, request: Request, form_token: str | None = None) -> str | None:
        """The token a request carries: header, form field or session cookie."""
        bearer = request.headers.get("authorization", "")
        header = request.headers.get(TOKEN_HEADER)
        if bearer.lower().startswith("bearer "):
            header = header or bearer[7:]
        return header or form_token or request.cookies.get(COOKIE)

    def check_read(self, request: Request) -> None:
        """A page or the event stream: the right Host; the token when one is configured."""
        if not self._host_allowed(request):
            raise HTTPException(403, "this dashboard is bound to loopback; open it as 127.0.0.1")
        if self._settings.token is not None and not self._matches(self.presented(request)):
            raise HTTPException(401, "this dashboard needs its token: log in at /login")

    def check_write(self, request: Request, form_token: str | None) -> None:
        """An inject or a verify: same origin, and the token whenever one is configured (a
        non-loopback bind always has one)."""
        if not self._host_allowed(request):
            raise HTTPException(403, "this dashboard is bound to loopback; open it as 127.0.0.1")
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            raise HTTPException(403, f"a write from another site ({origin}) is refused")
        if self._settings.token is None:
            return
        given = self.presented(request, form_token)
        if given is None:
            raise HTTPException(401, "this write needs the dashboard's token; nothing written")
        if not self._matches(given):
            raise HTTPException(403, "wrong dashboard token; nothing written")

    def login(self, given: str) -> bool:
        """Whether a token typed on the login page is the right one."""
        return self._matches(given)
