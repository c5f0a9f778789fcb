"""A private PostgreSQL instance for tests, the demo and benchmarks.

Its own data dir, free TCP port (loopback only) and unix socket dir, created with
``initdb`` and run with ``pg_ctl``. ``initdb`` refuses to run as root, so when the tests run
as root every server command runs as the ``postgres`` OS user (``runuser``), in a base dir
that user owns. TCP connections need a password (scram-sha-256), so the sink's password
handling is exercised for real; the unix socket trusts local users.

Durability is off (fsync, synchronous_commit, full_page_writes): the data dir is thrown
away at the end anyway.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import psycopg
import pytest

from mysqlcdc_harness.mariadb import free_port

PG_BIN = Path(os.environ.get("MYSQLCDC_PG_BIN", "/usr/lib/postgresql/15/bin"))
SUPERUSER = "mysqlcdc"
PASSWORD = "pg-Secret-7d2q"  # only ever on loopback, in a throwaway data dir
DATABASE = "mysqlcdc"
OS_USER = "postgres"


def _as_server_user(argv: list[str]) -> list[str]:
    """Run ``argv`` as the postgres OS user when we are root (initdb refuses root)."""
    if os.geteuid() == 0:
        return ["runuser", "-u", OS_USER, "--", *argv]
    return argv


def _run(argv: list[str], what: str) -> None:
    r = subprocess.run(_as_server_user(argv), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{what} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")


@dataclass
class PostgreSQL:
    """One running server. ``stop()`` (or :func:`running_postgres`) ends it and removes its files."""

    base_dir: Path
    port: int = 0

    @property
    def datadir(self) -> Path:
        return self.base_dir / "data"

    @property
    def socket_dir(self) -> Path:
        return self.base_dir / "sock"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "postgres.log"

    # --- lifecycle ---------------------------------------------------------------------------

    def _own_base_dir(self) -> None:
        """The server user must own its directories (mkdtemp makes them 0700 for us)."""
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            pw = pwd.getpwnam(OS_USER)
            for p in (self.base_dir, self.socket_dir):
                os.chown(p, pw.pw_uid, pw.pw_gid)

    def install(self) -> None:
        if (self.datadir / "PG_VERSION").exists():
            return
        self._own_base_dir()
        pwfile = self.base_dir / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if os.geteuid() == 0:
            pw = pwd.getpwnam(OS_USER)
            os.chown(pwfile, pw.pw_uid, pw.pw_gid)
        os.chmod(pwfile, 0o600)
        try:
            _run(
                [
                    str(PG_BIN / "initdb"),
                    "-D",
                    str(self.datadir),
                    "-U",
                    SUPERUSER,
                    f"--pwfile={pwfile}",
                    "--auth-host=scram-sha-256",
                    "--auth-local=trust",
                    "-E",
                    "UTF8",
                    "--locale=C.UTF-8",
                    "--no-sync",
                ],
                "initdb",
            )
        finally:
            pwfile.unlink(missing_ok=True)

    def _server_options(self) -> str:
        opts = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.socket_dir),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "shared_buffers": "128MB",
            "max_connections": "100",
            "timezone": "UTC",
            "log_timezone": "UTC",
        }
        return " ".join(f"-c {k}={v}" for k, v in opts.items())

    def start(self) -> "PostgreSQL":
        self.install()
        if not self.port:
            self.port = free_port()
        _run(
            [
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-l",
                str(self.log_path),
                "-w",
                "-t",
                "60",
                "-o",
                self._server_options(),
                "start",
            ],
            f"pg_ctl start (log: {self.log_path})",
        )
        self._create_database()
        return self

    def _create_database(self) -> None:
        with psycopg.connect(self.conninfo(dbname="postgres"), password=PASSWORD, autocommit=True) as c:
            if c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone() is None:
                c.execute(f'CREATE DATABASE "{DATABASE}"')

    def stop(self, remove: bool = True) -> None:
        if (self.datadir / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError):
                _run([str(PG_BIN / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop"], "pg_ctl stop")
        if remove:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    # --- clients -----------------------------------------------------------------------------

    def conninfo(self, dbname: str = DATABASE) -> str:
        """libpq conninfo without the password (give that as ``password=`` or PGPASSWORD)."""
        return f"host=127.0.0.1 port={self.port} dbname={dbname} user={SUPERUSER}"

    @property
    def dsn(self) -> str:
        return self.conninfo()

    @property
    def password(self) -> str:
        return PASSWORD

    def connect(self, dbname: str = DATABASE, **kw: Any) -> psycopg.Connection:
        kw.setdefault("autocommit", True)
        return psycopg.connect(self.conninfo(dbname), password=PASSWORD, **kw)

    def query(self, sql: str, args: Any = None) -> list[tuple]:
        with self.connect() as c:
            cur = c.execute(sql, args)
            return list(cur.fetchall()) if cur.description else []

    def execute(self, *sql: str) -> None:
        with self.connect() as c:
            for s in sql:
                c.execute(s)

    def fresh_schema(self, prefix: str = "s") -> str:
        """A new, empty schema name (created), for one test's tables."""
        name = f"{prefix}{os.getpid()}_{time.monotonic_ns() % 10**9}"
        self.execute(f'CREATE SCHEMA "{name}"')
        return name


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgreSQL]:
    base = Path(tempfile.mkdtemp(prefix="mysqlcdc-postgres-"))
    server = PostgreSQL(base_dir=base)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgreSQL]:
    """A private PostgreSQL for the whole session (stopped and removed at the end)."""
    with running_postgres() as server:
        yield server
