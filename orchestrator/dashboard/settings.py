"""What a dashboard serves and how it is guarded: run dir, bind address, token, poll interval."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

LOOPBACK_NAMES = ("localhost", "localhost.localdomain")
TOKEN_VARIABLE = "RATCHET_DASHBOARD_TOKEN"
MIN_TOKEN = 8


class DashboardError(Exception):
    """The dashboard cannot start as asked: the message says what, the value and the fix."""


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name that is not localhost may resolve to anything


class DashboardSettings(BaseModel):
    """One dashboard: which run it shows and who may see and steer it."""

    model_config = ConfigDict(frozen=True)

    run_dir: Path = Field(description="The run directory (ledger.sqlite and repo/ inside).")
    host: str = Field(default="127.0.0.1", description="Address to bind; loopback by default.")
    port: int = Field(default=8765, ge=0, le=65535, description="TCP port (0: any free one).")
    token: str | None = Field(
        default=None,
        description="Secret every write needs and, when set, every page too; required for a "
        "bind that is not loopback.",
    )
    poll_s: float = Field(
        default=0.5, gt=0, le=10, description="How often the live view polls the ledger head."
    )

    @property
    def loopback(self) -> bool:
        """Bound to this machine only."""
        return is_loopback(self.host)


def check_settings(settings: DashboardSettings) -> None:
    """Refuse a bind that others can reach without a token, and a token that is too short."""
    token = settings.token
    if token is not None and len(token) < MIN_TOKEN:
        raise DashboardError(
            f"the dashboard token is {len(token)} characters long; use at least {MIN_TOKEN} "
            "random characters (e.g. from `python -c 'import secrets; "
            "print(secrets.token_urlsafe())'`)"
        )
    if not settings.loopback and token is None:
        raise DashboardError(
            f"--host {settings.host} is not a loopback address, so anyone who can reach it could "
            f"read and steer the run; pass --token T (or set {TOKEN_VARIABLE}), or bind "
            "--host 127.0.0.1"
        )
