"""A private MariaDB instance for tests, the demo and benchmarks.

Its own data dir, free TCP port and socket, binlog ROW/FULL with full row metadata, a
server id; started with ``mariadbd --no-defaults`` so nothing on the machine leaks in.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import pymysql

ROOT_PASSWORD = "root-Secret-9f3k"  # only ever on loopback, in a throwaway data dir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _find(binary: str) -> str:
    for cand in (shutil.which(binary), f"/usr/sbin/{binary}", f"/usr/bin/{binary}"):
        if cand and os.path.exists(cand):
            return cand
    raise RuntimeError(f"{binary} not found: run `make test` (it installs mariadb-server)")


@dataclass
class MariaDB:
    """One running server. ``stop()`` (or the context manager) ends it and removes its files."""

    base_dir: Path
    port: int = 0
    server_id: int = 1
    extra_args: Sequence[str] = ()
    keep_dir: bool = False
    proc: subprocess.Popen | None = field(default=None, init=False)

    @property
    def datadir(self) -> Path:
        return self.base_dir / "data"

    @property
    def socket_path(self) -> str:
        return str(self.base_dir / "mysqld.sock")

    @property
    def log_path(self) -> Path:
        return self.base_dir / "mysqld.err"

    def install(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        if (self.datadir / "mysql").exists():
            return
        cmd = [
            _find("mariadb-install-db"),
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--user={getpass.getuser()}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
        ]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed:\n{r.stdout}\n{r.stderr}")

    def args(self) -> list[str]:
        return [
            _find("mariadbd"),
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--user={getpass.getuser()}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={self.socket_path}",
            f"--pid-file={self.base_dir / 'mysqld.pid'}",
            f"--log-error={self.log_path}",
            f"--server-id={self.server_id}",
            f"--log-bin={self.datadir / 'mysql-bin'}",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=512M",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            "--max-connections=400",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            "--default-time-zone=+00:00",
            "--innodb-log-file-size=256M",
            "--max-allowed-packet=64M",
            *self.extra_args,
        ]

    def start(self) -> "MariaDB":
        self.install()
        if not self.port:
            self.port = free_port()
        self.proc = subprocess.Popen(
            self.args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited with {self.proc.returncode}:\n{self._log_tail()}")
            try:
                c = pymysql.connect(unix_socket=self.socket_path, user="root", password="", connect_timeout=2)
                first = True
            except pymysql.err.OperationalError as e:
                if e.args and e.args[0] == 1045:  # already has the password (restart)
                    c = None
                    first = False
                else:
                    c = None
                    first = None
            if first is None:
                if time.time() > deadline:
                    raise RuntimeError(f"mariadbd did not come up:\n{self._log_tail()}")
                time.sleep(0.1)
                continue
            if first and c is not None:
                with c.cursor() as cur:
                    cur.execute("SELECT user, host FROM mysql.user WHERE user IN ('root', '') AND host <> 'localhost'")
                    for user, host in cur.fetchall():
                        cur.execute(f"DROP USER '{user}'@'{host}'")
                    for sql in (
                        f"CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '{ROOT_PASSWORD}'",
                        "GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION",
                        f"ALTER USER 'root'@'localhost' IDENTIFIED BY '{ROOT_PASSWORD}'",
                        "FLUSH PRIVILEGES",
                    ):
                        cur.execute(sql)
                c.close()
            break
        return self

    def _log_tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return "(no error log)"

    def stop(self, remove: bool = True) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if remove and not self.keep_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL, as a crash would; ``start()`` brings it back on the same port and data."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self) -> None:
        self.stop(remove=False)
        self.start()

    # --- clients ---------------------------------------------------------------------------

    def source_config(self, user: str = "root", password: str = ROOT_PASSWORD, **kw: Any):
        from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig

        return SourceConfig(host="127.0.0.1", port=self.port, user=user, password=password, **kw)

    def connect(self, database: str | None = None, **kw: Any) -> pymysql.connections.Connection:
        params = dict(
            host="127.0.0.1", port=self.port, user="root", password=ROOT_PASSWORD, autocommit=True, charset="utf8mb4"
        )
        if database:
            params["database"] = database
        params.update(kw)
        return pymysql.connect(**params)

    def execute(self, *sql: str, database: str | None = None) -> list[tuple]:
        """Run statements, returning the last one's rows."""
        rows: list[tuple] = []
        with contextlib.closing(self.connect(database)) as c, c.cursor() as cur:
            for s in sql:
                cur.execute(s)
                rows = list(cur.fetchall()) if cur.description else []
        return rows

    def query(self, sql: str, args: Any = None, database: str | None = None) -> list[tuple]:
        with contextlib.closing(self.connect(database)) as c, c.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def master_status(self) -> tuple[str, int]:
        rows = self.query("SHOW MASTER STATUS")
        return rows[0][0], int(rows[0][1])

    # --- replication (failover tests) ---------------------------------------------------------

    def gtid_binlog_pos(self) -> str:
        return str(self.query("SELECT @@global.gtid_binlog_pos")[0][0] or "")

    def replicate_from(self, primary: "MariaDB") -> None:
        """Become a GTID replica of ``primary`` from its current position (both servers set up their
        users themselves, so nothing before now is replayed). Start the replica with
        ``--log-slave-updates`` so its binlog holds the primary's transactions, as a promotable
        replica's does."""
        self.execute(
            "STOP SLAVE",
            f"SET GLOBAL gtid_slave_pos = '{primary.gtid_binlog_pos()}'",
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, MASTER_USER='root', "
            f"MASTER_PASSWORD='{ROOT_PASSWORD}', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
            "START SLAVE",
        )

    def caught_up(self, primary: "MariaDB", timeout_s: float = 60) -> None:
        """Wait until this replica has applied everything ``primary`` has logged."""
        pos = primary.gtid_binlog_pos()
        got = self.query("SELECT MASTER_GTID_WAIT(%s, %s)", (pos, timeout_s))[0][0]
        if got != 0:
            status = self.query("SHOW SLAVE STATUS")
            raise RuntimeError(f"replica did not reach {pos} in {timeout_s} s: {status}")

    def promote(self) -> None:
        """Stop replicating and forget the primary, as an orchestrator promoting this replica does."""
        self.execute("STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF")

    def cli(self, *args: str, database: str | None = None) -> list[str]:
        """argv for the ``mariadb`` client against this server (password via env, not argv)."""
        argv = [_find("mariadb"), "--no-defaults", "-h127.0.0.1", f"-P{self.port}", "-uroot"]
        if database:
            argv.append(f"-D{database}")
        return argv + list(args)

    def cli_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["MYSQL_PWD"] = ROOT_PASSWORD
        return env


@contextlib.contextmanager
def running_mariadb(**kw: Any) -> Iterator[MariaDB]:
    base = Path(tempfile.mkdtemp(prefix="mysqlcdc-mariadb-"))
    db = MariaDB(base_dir=base, **kw)
    try:
        db.start()
        yield db
    finally:
        db.stop()


@contextlib.contextmanager
def primary_and_replica(primary_id: int, replica_id: int) -> Iterator[tuple[MariaDB, MariaDB]]:
    """A primary and its GTID replica (both ``--log-slave-updates``, as a promotable replica is),
    each with its own data directory, removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="mysqlcdc-failover-"))
    primary = MariaDB(base_dir=base / "primary", server_id=primary_id, extra_args=["--log-slave-updates"])
    replica = MariaDB(base_dir=base / "replica", server_id=replica_id, extra_args=["--log-slave-updates"])
    try:
        primary.start()
        replica.start()
        replica.replicate_from(primary)
        yield primary, replica
    finally:
        for server in (primary, replica):
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
