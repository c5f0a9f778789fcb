"""The engine's configuration: where the source is and how to split and read it.

Plain dataclasses that survive a trip to Spark executors (pickle) and to JSON files.
The password is never part of ``repr()`` or ``to_dict()``: jobs receive it through an
environment variable or a file only the user can read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from ..errors import ConfigError

#: Every engine session gives up on a server that sends nothing for this long (pymysql waits
#: forever by default). A failed-over server whose address now drops packets, or a proxy that
#: lost its upstream without closing, otherwise holds a read -- and the stream -- for good,
#: while its status still looks fresh. Generous: a range aggregate over a large batch must fit.
SESSION_READ_TIMEOUT_S = 900

#: The binlog dump and the stream driver's short calls (the binlog's head, GTID positions):
#: a dump sends bytes continuously until it is caught up (a blocking one at least one
#: heartbeat per period), so a minute of silence is a dead connection, retried as one.
BINLOG_READ_TIMEOUT_S = 60


def binlog_read_timeout(heartbeat_s: float | None = None) -> int:
    """How long a binlog connection may receive nothing: a minute, or four server heartbeats."""
    return int(max(BINLOG_READ_TIMEOUT_S, 4 * float(heartbeat_s or 0)))


PASSWORD_ENV = "MYSQLCDC_PASSWORD"


@dataclass(frozen=True)
class ServerIdRange:
    """The replication server ids this pipeline may use, ``first..last`` inclusive.

    Two binlog readers with one server id kick each other off the server, so every
    concurrent reader (backfill of each batch, the stream, catch-up tasks) takes its own.
    """

    first: int
    last: int

    def __post_init__(self) -> None:
        if not (1 <= self.first <= self.last <= 2**32 - 1):
            raise ConfigError(
                f"server_id_range: found {self.first}-{self.last}, need 1 <= first <= last <= 4294967295. "
                "Fix: set server_id_range to e.g. '5400-5499', ids no other replica of this server uses."
            )

    @classmethod
    def parse(cls, text: str | int | "ServerIdRange") -> "ServerIdRange":
        if isinstance(text, ServerIdRange):
            return text
        s = str(text).strip()
        try:
            if "-" in s:
                a, b = s.split("-", 1)
                return cls(int(a), int(b))
            return cls(int(s), int(s))
        except ValueError:
            raise ConfigError(
                f"server_id_range: found {s!r}, need '<first>-<last>' (e.g. '5400-5499'). "
                "Fix: give a number or a range of numbers."
            ) from None

    def __len__(self) -> int:
        return self.last - self.first + 1

    def pick(self, slot: int) -> int:
        """The id for reader number ``slot``; fails rather than reuse an id."""
        if not 0 <= slot < len(self):
            raise ConfigError(
                f"server_id_range: {self} has {len(self)} ids but reader #{slot + 1} needs one. "
                "Fix: widen server_id_range so every concurrent reader gets its own id."
            )
        return self.first + slot

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"


ZERO_DATES = ("null", "text")
SNAPSHOT_READERS = ("auto", "jdbc", "arrow")


@dataclass(frozen=True)
class SourceConfig:
    """How to reach the MySQL/MariaDB server."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    server_id_range: ServerIdRange = field(default_factory=lambda: ServerIdRange(5400, 5499))
    server_time_zone: str = "UTC"
    connect_timeout: int = 10
    ssl: Mapping[str, Any] | None = None
    jdbc_fetch_size: int = 10_000
    # What a zero or invalid date ('0000-00-00', '2024-00-10') becomes: "null", or "text" (every
    # DATE/DATETIME/TIMESTAMP column captured as its text, the literal kept). cdc/types.py.
    zero_dates: str = "null"
    # How snapshot SELECTs are read: "auto" (Arrow where it can be used: connectorx installed, no
    # TLS, a sink that takes files), "jdbc" (Spark's JDBC reader), "arrow". spark/snapshot/arrow_read.py.
    snapshot_reader: str = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.server_id_range, ServerIdRange):
            object.__setattr__(self, "server_id_range", ServerIdRange.parse(self.server_id_range))
        if self.zero_dates not in ZERO_DATES:
            raise ConfigError(
                f"zero_dates: found {self.zero_dates!r}, need one of {', '.join(ZERO_DATES)}. Fix: 'null' stores "
                "zero and invalid dates as NULL; 'text' captures DATE, DATETIME and TIMESTAMP columns as text "
                "('0000-00-00 00:00:00' kept as it is)."
            )
        if self.snapshot_reader not in SNAPSHOT_READERS:
            raise ConfigError(
                f"snapshot_reader: found {self.snapshot_reader!r}, need one of {', '.join(SNAPSHOT_READERS)}. Fix: "
                "'auto' (Arrow where it can be used, else JDBC), 'jdbc' (Spark's JDBC reader) or 'arrow'."
            )

    def connect_kwargs(self) -> dict[str, Any]:
        # PyMySQL would send a str password as latin-1: 'ä' then mismatches the server's hash and
        # '€' cannot be sent at all. Servers hash the UTF-8 bytes a client sends (the mysql
        # client's default character set is utf8mb4), so those bytes are given.
        password = self.password.encode("utf-8") if isinstance(self.password, str) else self.password
        kw: dict[str, Any] = dict(
            host=self.host,
            port=int(self.port),
            user=self.user,
            password=password,
            connect_timeout=self.connect_timeout,
            read_timeout=SESSION_READ_TIMEOUT_S,
            write_timeout=SESSION_READ_TIMEOUT_S,
            charset="utf8mb4",
            autocommit=True,
            # Every engine session works in UTC, so TIMESTAMP values and boundaries read
            # through pymysql are UTC wall-clock, whatever the server's default zone.
            init_command="SET time_zone = '+00:00'",
        )
        if self.ssl:
            kw["ssl"] = dict(self.ssl)
        return kw

    def jdbc_tls_params(self) -> str:
        """The TLS part of the JDBC URL (MariaDB Connector/J 3), matching ``ssl`` for pymysql.

        A client certificate works for pymysql (the binlog) but Connector/J wants a Java key
        store, so it is refused here rather than silently connecting without it.
        """
        if not self.ssl:
            return ""
        ssl = dict(self.ssl)
        if ssl.get("cert") or ssl.get("key"):
            raise ConfigError(
                "TLS client certificates (ssl_cert/ssl_key) are not supported for the snapshot's JDBC reads. "
                "Fix: authenticate with a password over TLS (keep ssl_ca), or remove ssl_cert/ssl_key."
            )
        from urllib.parse import quote

        from .connection import tls_mode

        params = [f"sslMode={tls_mode(ssl)}"]  # Connector/J 3 names the three modes alike
        if ssl.get("ca"):
            params.append(f"serverSslCert={quote(str(ssl['ca']), safe='/')}")
        return "&".join(params)

    # Where the server is and how to log in: what the source's connection says at each launch.
    ADDRESS_FIELDS = ("host", "port", "user", "ssl", "connect_timeout")

    def following(self, current: "SourceConfig") -> tuple["SourceConfig", list[str]]:
        """This (stored) source with the address of ``current`` (the connection as it is now), and
        what changed, in words without secrets. A failover to a new endpoint is followed by
        editing the connection: the pipeline's state keeps the address it was planned with, and a
        relaunch must not keep dialling a server that is gone. The rest stays as planned (the
        server ids, the time zone values were read in, how zero dates and snapshots are read)."""
        changes = []
        for name in self.ADDRESS_FIELDS:
            old, new = getattr(self, name), getattr(current, name)
            if (dict(old) if isinstance(old, Mapping) else old) != (dict(new) if isinstance(new, Mapping) else new):
                changes.append("TLS settings changed" if name == "ssl" else f"{name} {old!r} -> {new!r}")
        if not changes:
            return self, []
        return replace(self, **{n: getattr(current, n) for n in self.ADDRESS_FIELDS}), changes

    def connect(self, **overrides: Any):
        """A pymysql connection (autocommit, utf8mb4, session time zone UTC)."""
        import pymysql

        from .connection import connect

        kw = self.connect_kwargs()
        kw.update(overrides)
        try:
            return connect(**kw)
        except pymysql.err.OperationalError as e:
            from .connect_errors import explain_connect_failure

            code = e.args[0] if e.args and isinstance(e.args[0], int) else None
            text = str(e.args[-1]) if e.args else str(e)
            raise explain_connect_failure(
                self.host, self.port, self.user, code, text, f"${PASSWORD_ENV} or the connection"
            ) from None

    def connect_binlog(self, heartbeat_s: float | None = None):
        """A connection for a binlog dump or the stream's short calls next to one: it gives up
        after ``binlog_read_timeout`` of silence, which the readers retry as a lost connection."""
        timeout = binlog_read_timeout(heartbeat_s)
        return self.connect(read_timeout=timeout, write_timeout=timeout)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, without the password."""
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "server_id_range": str(self.server_id_range),
            "server_time_zone": self.server_time_zone,
            "connect_timeout": self.connect_timeout,
            "ssl": dict(self.ssl) if self.ssl else None,
            "jdbc_fetch_size": self.jdbc_fetch_size,
            "zero_dates": self.zero_dates,
            "snapshot_reader": self.snapshot_reader,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], password: str | None = None) -> "SourceConfig":
        """Build from ``to_dict()`` output; the password comes from the argument or $MYSQLCDC_PASSWORD."""
        kw = dict(d)
        kw.pop("password", None)
        kw["server_id_range"] = ServerIdRange.parse(kw.get("server_id_range", "5400-5499"))
        if password is None:
            password = os.environ.get(PASSWORD_ENV, "")
        return cls(password=password, **kw)

    def with_password(self, password: str) -> "SourceConfig":
        return replace(self, password=password)


@dataclass(frozen=True)
class SplitOptions:
    """How tables are cut into chunks (Flink CDC's defaults).

    ``chunk_key_columns`` maps ``db.table`` to the column to split on when the table has
    no primary key. ``boundary_query_pause_s`` throttles uneven splitting: it sleeps that
    long between boundary queries so planning a huge table does not load the primary.
    """

    chunk_size: int = 8096
    distribution_factor_lower: float = 0.05
    distribution_factor_upper: float = 1000.0
    chunk_key_columns: Mapping[str, str] = field(default_factory=dict)
    boundary_query_pause_s: float = 0.0

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ConfigError(f"chunk_size: found {self.chunk_size}, need >= 1. Fix: use e.g. 8096.")
        if not (0 < self.distribution_factor_lower <= self.distribution_factor_upper):
            raise ConfigError(
                "distribution factor bounds: need 0 < lower <= upper, found "
                f"{self.distribution_factor_lower}..{self.distribution_factor_upper}. Fix: use 0.05 and 1000.0."
            )
