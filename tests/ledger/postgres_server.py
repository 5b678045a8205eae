"""A throwaway PostgreSQL server: initdb in a temporary directory, started on a free loopback
port with its socket in that directory, stopped and deleted afterwards (tests, benchmarks)."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from itertools import count
from pathlib import Path
from typing import Final

import psycopg

SUPERUSER: Final = "postgres"
LEDGER_USER: Final = "ratchet"
# Not a secret: a throwaway server on loopback; it lets tests check that no message leaks it.
LEDGER_PASSWORD: Final = "pw-s3cret-7f2c"
HBA: Final = (
    "local all all trust\n"
    f"host all {SUPERUSER} 127.0.0.1/32 trust\n"
    "host all all 127.0.0.1/32 scram-sha-256\n"
)
# Durability off for tests only: the benchmark keeps PostgreSQL's defaults (fsync on).
FAST_SETTINGS: Final = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")


def find_bindir() -> Path | None:
    """The directory of initdb/pg_ctl: on PATH, else the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which("initdb")
    if found is not None and (Path(found).resolve().parent / "pg_ctl").exists():
        return Path(found).resolve().parent
    candidates = [path.parent for path in Path("/usr/lib/postgresql").glob("*/bin/initdb")]
    candidates = [path for path in candidates if (path / "pg_ctl").exists()]

    def version(path: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", path.parent.name))

    return max(candidates, key=version) if candidates else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PostgresServer:
    """One running server; create databases on it, then stop() it."""

    def __init__(self, bindir: Path, root: Path, port: int) -> None:
        self.bindir = bindir
        self.root = root
        self.port = port
        self._names = count(1)

    @property
    def data(self) -> Path:
        """The cluster's data directory."""
        return self.root / "data"

    @property
    def log(self) -> Path:
        """The server's log file."""
        return self.root / "server.log"

    @classmethod
    def start(cls, bindir: Path, durable: bool = False) -> PostgresServer:
        """initdb and start a server (as the postgres user when run as root)."""
        root = Path(tempfile.mkdtemp(prefix="ratchet-pg-"))
        _hand_over(root)
        server = cls(bindir, root, 0)
        server._pg("initdb", "-D", str(server.data), "-U", SUPERUSER, "-A", "trust", "--no-sync")
        (server.data / "pg_hba.conf").write_text(HBA, encoding="utf-8")
        _hand_over(server.data / "pg_hba.conf")
        for _attempt in range(3):  # a free port can be taken between probe and bind
            server.port = free_port()
            if server._start(() if durable else FAST_SETTINGS):
                break
        else:
            tail = server.log.read_text(encoding="utf-8", errors="replace")[-2000:]
            shutil.rmtree(root, ignore_errors=True)
            raise RuntimeError(f"PostgreSQL did not start (log tail: {tail})")
        server.admin(f"CREATE ROLE {LEDGER_USER} LOGIN PASSWORD '{LEDGER_PASSWORD}' NOSUPERUSER")
        return server

    def _start(self, settings: Sequence[str]) -> bool:
        options = [
            "-c listen_addresses=127.0.0.1",
            f"-c port={self.port}",
            f"-c unix_socket_directories={self.root}",
            *(f"-c {setting}" for setting in settings),
        ]
        command = ["pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60"]
        result = self._pg(*command, "-o", " ".join(options), "start", check=False)
        return result.returncode == 0

    def _pg(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / program), *args]
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            command = ["runuser", "-u", SUPERUSER, "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, timeout=120)

    def stop(self) -> None:
        """Stop the server and delete its directory."""
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._pg("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str, user: str = LEDGER_USER, password: str | None = None) -> str:
        """SQLAlchemy URL of a database as the ledger user (its password by default)."""
        secret = LEDGER_PASSWORD if password is None and user == LEDGER_USER else password
        auth = user if secret is None else f"{user}:{secret}"
        return f"postgresql+psycopg://{auth}@127.0.0.1:{self.port}/{database}"

    def connect(
        self, database: str, user: str = SUPERUSER
    ) -> psycopg.Connection[tuple[object, ...]]:
        """A raw autocommit connection (the superuser's by default), bypassing the Ledger."""
        password = LEDGER_PASSWORD if user == LEDGER_USER else None
        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            dbname=database,
            user=user,
            password=password,
            autocommit=True,
        )

    def admin(self, statement: str) -> None:
        """Run one statement as superuser on the maintenance database."""
        with self.connect("postgres") as connection:
            connection.execute(statement.encode())

    def create_database(self, prefix: str = "ledger") -> str:
        """A new, empty database owned by the ledger user; returns its name."""
        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        self.admin(f"CREATE DATABASE {name} OWNER {LEDGER_USER}")
        return name


def _hand_over(path: Path) -> None:
    """Give a path to the postgres user when running as root (initdb needs to own it)."""
    if os.geteuid() != 0:
        return
    try:
        account = pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise RuntimeError(
            f"running as root, PostgreSQL must run as the {SUPERUSER!r} user, which does not "
            "exist; install Debian's postgresql package (it creates the user) or run as non-root"
        ) from None
    os.chown(path, account.pw_uid, account.pw_gid)


@contextlib.contextmanager
def running_server(durable: bool = False) -> Iterator[PostgresServer]:
    """A started server for the duration of the block; RuntimeError without binaries."""
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError(
            "no PostgreSQL server binaries: initdb/pg_ctl are neither on PATH nor in "
            "/usr/lib/postgresql/*/bin; install Debian's postgresql package"
        )
    server = PostgresServer.start(bindir, durable)
    try:
        yield server
    finally:
        server.stop()
