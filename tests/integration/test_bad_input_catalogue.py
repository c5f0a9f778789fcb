"""The bad-input catalogue (issue 19, part 2): the mistakes a user can make, one case each.

Every case goes through the door a user would use -- the validate or plan task (run directly,
connections from the environment), the stream task, the stream job's lease, or the engine
function a Spark job calls where the door would need Spark (one case does start the stream job
on Spark: a corrupt checkpoint is read by Spark alone) -- and asserts three things of an error:

* it is a message for people: the engine's own error (a failed task, not retried, for a
  configuration error), never a raw exception from a library;
* it names the problem and the fix (``Fix:``, the house style), and matches the message
  pattern of its row in docs/troubleshooting.md's "Errors you may meet, and what to do" table;
* nothing was written: the temporary directory that holds the state location and the sink
  root is byte for byte as it was before (and a PostgreSQL sink got no schema); a stream launch
  may write only its own bookkeeping (``stream/`` beside the checkpoint).

Some inputs look odd and are not errors by design -- odd identifiers (backticks, blanks,
unicode, reserved words, dots), an empty table, a partitioned table, a 16 MB row, compressed
binlogs, a password full of URL and SQL metacharacters: those cases (``...-accepted-by-design``)
assert that validate and plan accept them, and what plan made of them.

Each case holds its troubleshooting row's message pattern (``harness/mysqlcdc_harness/readme_errors.py`` reads the
table and says what the placeholders mean); every case checks that the message matches it, and
``test_every_message_pattern_is_in_the_readme`` that the row exists: the table and the code
cannot drift apart unnoticed. A case marked xfail is a problem found here and not fixed in this
change's files: its reason says where the fix belongs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

import pymysql
import pytest

from airflow_provider_mysqlcdc._airflow_compat import AirflowFailException
from airflow_provider_mysqlcdc.cdc.errors import CdcError
from mysqlcdc_harness.mariadb import ROOT_PASSWORD, MariaDB, free_port
from mysqlcdc_harness.readme_errors import error_table_first_cells, message_regex

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ERRORS_PAGE = REPO / "docs" / "troubleshooting.md"  # the error table users read
DB = "shop"  # the README's examples name this database; the cases make it for real
SPECIAL_PASSWORD = "p@ss:w/rd#1?&%=+ 'q\"\\`;$(x)"  # what URLs, shells and SQL quote
NON_ASCII_PASSWORD = "pässwörd-€-😀"


# --- the tables the cases capture ---------------------------------------------------------------

ODD_TABLES = {
    # name -> (key column, how a user writes the table in the table list)
    "tick`et": ("k`ey", f"`{DB}`.`tick``et`"),
    "order items": ("line no", f"{DB}.order items"),
    "commandes_été_注文": ("clé", f"{DB}.commandes_été_注文"),
    "select": ("from", f"{DB}.select"),
    "a.b": ("x.y", f"`{DB}`.`a.b`"),
}


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@pytest.fixture(scope="module")
def shop(mariadb):
    """Database ``shop``: the README's example tables, and one table of each odd kind."""
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}")
    stmts = [
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, note VARCHAR(40))",
        "INSERT INTO orders SELECT seq, CONCAT('o', seq) FROM seq_1_to_20",
        "CREATE VIEW v AS SELECT id FROM orders",
        "CREATE TABLE no_key (a INT, b VARCHAR(10))",
        "INSERT INTO no_key VALUES (1, 'x'), (2, 'y')",
        "CREATE TABLE no_key_unique (code VARCHAR(10) NOT NULL, n INT, UNIQUE KEY (code))",
        "CREATE TABLE empty (id INT PRIMARY KEY, s TEXT)",
        "CREATE TABLE big_row (id INT PRIMARY KEY, payload LONGBLOB)",
        "INSERT INTO big_row VALUES (1, REPEAT('x', 16 * 1024 * 1024)), (2, 'small')",
        "CREATE TABLE parts (id INT NOT NULL, region INT NOT NULL, s VARCHAR(10), PRIMARY KEY (id, region)) "
        "PARTITION BY RANGE (region) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20), "
        "PARTITION p2 VALUES LESS THAN MAXVALUE)",
        "INSERT INTO parts SELECT seq, seq % 30, CONCAT('p', seq) FROM seq_1_to_40",
    ]
    for table, (key, _entry) in ODD_TABLES.items():
        stmts += [
            f"CREATE TABLE {_q(table)} ({_q(key)} INT PRIMARY KEY, {_q('value of ' + key)} VARCHAR(20))",
            f"INSERT INTO {_q(table)} SELECT seq, CONCAT('v', seq) FROM seq_1_to_30",
        ]
    stmts.append("ANALYZE TABLE orders, no_key, parts, big_row")
    mariadb.execute(*stmts, database=DB)
    # a database whose name holds a dot
    mariadb.execute(
        "DROP DATABASE IF EXISTS `shop.eu`",
        "CREATE DATABASE `shop.eu`",
        "CREATE TABLE `shop.eu`.orders (id INT PRIMARY KEY)",
        "INSERT INTO `shop.eu`.orders SELECT seq FROM seq_1_to_30",
        database=DB,
    )
    try:
        yield DB
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS {DB}", "DROP DATABASE IF EXISTS `shop.eu`")


@pytest.fixture(scope="module")
def no_binlog_server():
    """A private server with binary logging off (``log_bin`` cannot change at runtime)."""
    base = Path(tempfile.mkdtemp(prefix="mysqlcdc-catalogue-"))
    server = MariaDB(base_dir=base, server_id=11, extra_args=("--skip-log-bin",))
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --- the context every case runs in -------------------------------------------------------------


class Ctx:
    """What a case needs: connections in the environment, the state location and sink root
    (under one temporary directory), the operators, and clean-up for what a case changes."""

    def __init__(self, request, mariadb, shop, tmp_dir: Path, monkeypatch, stack: contextlib.ExitStack) -> None:
        self.request = request
        self.mariadb = mariadb
        self.db = shop
        self.root = tmp_dir
        self.state = tmp_dir / "state"
        self.lake = tmp_dir / "lake"
        self.monkeypatch = monkeypatch
        self.stack = stack
        self.watermark: tuple[str, int] | None = None

    # connections

    def conn(
        self,
        conn_id: str = "cat_src",
        *,
        server: MariaDB | None = None,
        login: str = "root",
        password: str | None = ROOT_PASSWORD,
        host: str = "127.0.0.1",
        port: int | None = None,
        schema: str | None = None,
        **extra: Any,
    ) -> str:
        server = server or self.mariadb
        body = {
            "conn_type": "mysql_cdc",
            "host": host,
            "port": port or server.port,
            "login": login,
            "password": password,
            "schema": schema,
            "extra": extra,
        }
        self.monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({k: v for k, v in body.items() if v is not None})
        )
        return conn_id

    def conn_uri(self, conn_id: str, uri: str) -> str:
        self.monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", uri)
        return conn_id

    def user(self, name: str, *grants: str, password: str = "pw-catalogue") -> str:
        """A user with these grants (each ``<privileges> ON <object>``) for this case; its connection id."""
        self.mariadb.execute(f"DROP USER IF EXISTS '{name}'@'%'")
        self.mariadb.query(f"CREATE USER '{name}'@'%%' IDENTIFIED BY %s", (password,))
        self.stack.callback(self.mariadb.execute, f"DROP USER IF EXISTS '{name}'@'%'")
        for g in grants:
            self.mariadb.execute(f"GRANT {g} TO '{name}'@'%'")
        return self.conn(f"cat_{name}", login=name, password=password)

    def set_global(self, name: str, value: Any, server: MariaDB | None = None) -> None:
        """SET GLOBAL for this case, restored afterwards."""
        server = server or self.mariadb

        def literal(v: Any) -> str:
            return str(v) if isinstance(v, int) else f"'{v}'"

        old = server.query(f"SELECT @@global.{name}")[0][0]
        server.execute(f"SET GLOBAL {name} = {literal(value)}")
        self.stack.callback(server.execute, f"SET GLOBAL {name} = {literal(old)}")

    def postgres(self):
        return self.request.getfixturevalue("postgres")

    # the doors

    def validate(self, tables: Any = (f"{DB}.orders",), conn_id: str | None = None, **kw: Any) -> dict:
        from airflow_provider_mysqlcdc.operators.validate import MySqlCdcValidateOperator

        op = MySqlCdcValidateOperator(
            task_id="validate",
            mysql_cdc_conn_id=conn_id or self.conn(),
            tables=list(tables) if isinstance(tables, tuple) else tables,
            **kw,
        )
        return op.execute({})

    def plan_operator(self, tables: Any = (f"{DB}.orders",), conn_id: str | None = None, **kw: Any):
        from airflow_provider_mysqlcdc.operators.plan import MySqlCdcPlanOperator

        args: dict[str, Any] = {
            "state_location": str(self.state),
            "sink_type": "delta",
            "sink_options": {"root": str(self.lake)},
            "parallelism": 1,
        }
        args.update(kw)
        return MySqlCdcPlanOperator(
            task_id="plan",
            mysql_cdc_conn_id=conn_id or self.conn(),
            tables=list(tables) if isinstance(tables, tuple) else tables,
            **args,
        )

    def plan(self, tables: Any = (f"{DB}.orders",), conn_id: str | None = None, **kw: Any) -> list[dict]:
        return self.plan_operator(tables, conn_id, **kw).execute({})

    def stream(self, **kw: Any) -> dict:
        from airflow_provider_mysqlcdc.operators.stream import MySqlCdcStreamOperator

        return MySqlCdcStreamOperator(
            task_id="stream", state_location=str(self.state), mysql_cdc_conn_id=self.conn(), **kw
        ).execute({})

    def state_store(self):
        from airflow_provider_mysqlcdc.cdc.state import StateStore

        return StateStore(str(self.state))

    # what "nothing written" compares

    def fingerprint(self, ignore: str | None = None) -> dict[str, str]:
        out = {}
        for p in sorted(self.root.rglob("*")):
            rel = str(p.relative_to(self.root))
            if ignore is None or not re.match(ignore, rel):
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        return out


@dataclass(frozen=True)
class Case:
    """One bad input. ``setup`` prepares what the input needs (a plan to corrupt, a user); each
    door then runs the step a user would run and must fail (or, with ``readme=None``, pass:
    accepted by design, and ``check`` looks at what the doors returned)."""

    group: str
    name: str
    doors: tuple[Callable[[Ctx], Any], ...]
    readme: str | None = None  # the README row's message pattern (text of its first cell)
    says: str | None = None  # a regex the message must match too: this case's problem in its words
    setup: Callable[[Ctx], None] | None = None
    check: Callable[[Ctx, list[Any]], None] | None = None
    marks: tuple = ()
    may_write: str | None = None  # a regex of paths the door writes by design (a launch's own bookkeeping)

    @property
    def id(self) -> str:
        return f"{self.group}-{self.name}" + ("-accepted-by-design" if self.readme is None else "")


def validate(**kw: Any) -> Callable[[Ctx], Any]:
    return lambda ctx: ctx.validate(**kw)


def plan(**kw: Any) -> Callable[[Ctx], Any]:
    return lambda ctx: ctx.plan(**kw)


def stream(**kw: Any) -> Callable[[Ctx], Any]:
    return lambda ctx: ctx.stream(**kw)


def with_conn(door: Callable[..., Any], **conn: Any) -> Callable[[Ctx], Any]:
    """``door`` on a connection ``cat_src`` with these fields (login, password, port, extras)."""
    return lambda ctx: door(ctx, conn_id=ctx.conn(**conn))


def as_user(door: Callable[..., Any], user: str, *grants: str, **kw: Any) -> Callable[[Ctx], Any]:
    return lambda ctx: door(ctx, conn_id=ctx.user(user, *grants, **kw))


def with_global(name: str, value: Any, door: Callable[[Ctx], Any]) -> Callable[[Ctx], Any]:
    def run(ctx: Ctx) -> Any:
        ctx.set_global(name, value)
        return door(ctx)

    return run


def validate_door(ctx: Ctx, **kw: Any) -> Any:
    return ctx.validate(**kw)


def plan_door(ctx: Ctx, **kw: Any) -> Any:
    return ctx.plan(**kw)


# --- connection ---------------------------------------------------------------------------------


def _special_password_user(ctx: Ctx) -> None:
    ctx.user("cat_special", "SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.*", password=SPECIAL_PASSWORD)


def _special_password_uri(ctx: Ctx) -> Any:
    uri = f"mysql-cdc://cat_special:{quote(SPECIAL_PASSWORD, safe='')}@127.0.0.1:{ctx.mariadb.port}"
    return ctx.validate(conn_id=ctx.conn_uri("cat_uri", uri))


def _special_password_json(ctx: Ctx) -> Any:
    return ctx.validate(conn_id=ctx.conn("cat_json", login="cat_special", password=SPECIAL_PASSWORD))


def _validated(ctx: Ctx, results: list[Any]) -> None:
    for r in results:
        assert r["binlog_format"] == "ROW" and r["offset"]["position"] > 0, r


def _silent_port(ctx: Ctx) -> Any:
    """A port where something accepts the connection and never speaks first (PostgreSQL,
    an HTTP server): the validate task must give up after the connect timeout, not hang."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    ctx.stack.callback(listener.close)
    port = listener.getsockname()[1]
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = ctx.validate(conn_id=ctx.conn(port=port, connect_timeout=1))
        except BaseException as e:  # handed to the test thread
            outcome["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():
        listener.close()  # the waiting handshake gets a reset and the thread ends
        t.join(10)
        pytest.fail("the validate task still waits for the server's greeting after 20 s (connect_timeout 1 s)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _require_tls(ctx: Ctx) -> Any:
    server = ctx.request.getfixturevalue("no_binlog_server")
    # restored over the unix socket: with the setting on, TCP logins without TLS are refused
    server.execute("SET GLOBAL require_secure_transport = ON")

    def restore() -> None:
        with (
            contextlib.closing(
                pymysql.connect(unix_socket=server.socket_path, user="root", password=ROOT_PASSWORD)
            ) as c,
            c.cursor() as cur,
        ):
            cur.execute("SET GLOBAL require_secure_transport = OFF")

    ctx.stack.callback(restore)
    return ctx.validate(conn_id=ctx.conn(server=server))


CONNECTION = [
    Case(
        "connection",
        "wrong-password",
        (with_conn(validate_door, login="cdc", password="not-the-password"),),
        readme="cannot log in to host:port as '<user>': access denied",
        says=r"as 'cdc'",
    ),
    Case(
        "connection",
        "empty-password",
        (with_conn(validate_door, password=None),),
        readme="cannot log in to host:port as '<user>': access denied",
        says=r"as 'root'",
    ),
    Case(
        "connection",
        "port-nobody-listens-on",
        (with_conn(validate_door, port=free_port()),),
        readme="nothing accepts connections at host:port",
        says=r"Fix: check the port",
    ),
    Case(
        "connection",
        "host-does-not-resolve",
        (with_conn(validate_door, host="no-such-host.invalid"),),
        readme="the host name '<host>' does not resolve",
        says="no-such-host.invalid",
    ),
    Case(
        "connection",
        "port-of-a-silent-service",
        (_silent_port,),
        readme="no answer from host:port",
        says=r"Fix: check the (host|port)",
    ),
    Case("connection", "no-host", (with_conn(validate_door, host=""),), readme="connection '<conn_id>' has no host"),
    Case(
        "connection",
        "tls-asked-server-has-none",
        (with_conn(validate_door, ssl_mode="verify-ca"),),
        readme="TLS with host:port failed: ...",
        says=r"remove the connection's TLS fields",
    ),
    Case(
        "connection",
        "tls-required-by-server-not-configured",
        (_require_tls,),
        readme="cannot log in to host:port as '<user>': access denied",
        says=r"require_secure_transport=ON: then set the connection's TLS fields",
    ),
    Case(
        "connection",
        "tls-mode-unknown",
        (with_conn(validate_door, ssl_mode="yes"),),
        readme="ssl_mode: found '<mode>', need one of verify-full, verify-ca, trust",
    ),
    Case(
        "connection",
        "ssl-extra-not-json",
        (with_conn(validate_door, ssl="ca=/etc/ca.pem"),),
        readme="connection extra 'ssl' is not JSON",
    ),
    Case(
        "connection",
        "special-characters-in-password-json-form",
        (_special_password_json,),
        setup=_special_password_user,
        check=_validated,
    ),
    Case(
        "connection",
        "special-characters-in-password-uri-form",
        (_special_password_uri,),
        setup=_special_password_user,
        check=_validated,
    ),
    Case(
        "connection",
        "non-ascii-password",
        (
            as_user(
                validate_door,
                "cat_utf8",
                "SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.*",
                password=NON_ASCII_PASSWORD,
            ),
        ),
        check=_validated,
    ),
]


# --- privileges ---------------------------------------------------------------------------------

PRIVILEGES_ROW = "privileges: found 'missing <privileges> (global grants: ...)'"
NO_MATCH_ROW = "table pattern '<pattern>' matches no table on the server. Fix: check the database and table names"
NO_KEY_ROW = "table db.t has no primary key, so the planner does not know how to split it into chunks"
REGEX_ROW = (
    "table pattern '<pattern>' matches no table on the server. Fix: a regular expression matches the whole "
    "'db.table' name: include the database"
)

PRIVILEGES = [
    Case(
        "privileges",
        "no-SELECT",
        (as_user(validate_door, "cat_nosel", "REPLICATION SLAVE, BINLOG MONITOR ON *.*"),),
        readme=PRIVILEGES_ROW,
        says=r"missing SELECT \(.*GRANT SELECT ON \*\.\* TO 'cat_nosel'",
    ),
    Case(
        "privileges",
        "no-REPLICATION-SLAVE",
        (as_user(validate_door, "cat_norepl", "SELECT, BINLOG MONITOR ON *.*"),),
        readme=PRIVILEGES_ROW,
        says=r"missing REPLICATION SLAVE \(.*GRANT REPLICATION SLAVE ON \*\.\*",
    ),
    Case(
        "privileges",
        "no-BINLOG-MONITOR",
        (as_user(validate_door, "cat_nomon", "SELECT, REPLICATION SLAVE ON *.*"),),
        readme=PRIVILEGES_ROW,
        says=r"missing BINLOG MONITOR \(.*GRANT BINLOG MONITOR ON \*\.\*",
    ),
    Case(
        "privileges",
        "no-grants-at-all",
        (as_user(validate_door, "cat_none", "USAGE ON *.*"),),
        readme=PRIVILEGES_ROW,
        says=r"missing SELECT, REPLICATION SLAVE, BINLOG MONITOR \(global grants: USAGE\)",
    ),
    Case(
        "privileges",
        "SELECT-on-another-database-only",
        (as_user(validate_door, "cat_otherdb", "REPLICATION SLAVE, BINLOG MONITOR ON *.*", "SELECT ON mysql.*"),),
        readme=PRIVILEGES_ROW,
        says=r"missing SELECT \(.*matches no table the connection's user can see: it has no "
        r"SELECT grant on shop\.orders",
    ),
]


# --- server settings ----------------------------------------------------------------------------


def _no_binlog(ctx: Ctx) -> Any:
    server = ctx.request.getfixturevalue("no_binlog_server")
    return ctx.validate(tables=(), conn_id=ctx.conn(server=server))


def _purge_the_watermark(ctx: Ctx) -> None:
    """A snapshot's high watermark (here: the binlog's head now), then the server purges that file."""
    file, pos = ctx.mariadb.master_status()
    ctx.watermark = (file, pos)
    ctx.mariadb.execute("FLUSH BINARY LOGS")
    newest, _ = ctx.mariadb.master_status()
    deadline = time.monotonic() + 30
    # MariaDB keeps a file until its binlog checkpoint is written (InnoDB flushed): purge until it is gone
    while file in [r[0] for r in ctx.mariadb.query("SHOW BINARY LOGS")]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server did not purge {file}")
        ctx.mariadb.execute(f"PURGE BINARY LOGS TO '{newest}'")
        time.sleep(0.1)


def _stream_start_check(ctx: Ctx) -> Any:
    """What the stream's source checks before it reads from the snapshot's lowest high
    watermark (the engine function: the door itself would need Spark)."""
    from airflow_provider_mysqlcdc.cdc.binlog.reader import check_start_available
    from airflow_provider_mysqlcdc.cdc.model import TableId
    from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset

    with contextlib.closing(ctx.mariadb.source_config().connect()) as conn:
        check_start_available(conn, BinlogOffset(*ctx.watermark), [TableId(DB, "orders")])


def _compressed(ctx: Ctx) -> Any:
    ctx.set_global("log_bin_compress", "ON")
    ctx.set_global("log_bin_compress_min_len", 10)
    ctx.mariadb.execute(
        "INSERT INTO orders VALUES (1000, REPEAT('z', 30))", "DELETE FROM orders WHERE id = 1000", database=DB
    )
    return ctx.validate()


def _checksum_none(ctx: Ctx) -> Any:
    ctx.set_global("binlog_checksum", "NONE")
    return ctx.validate()


SERVER = [
    *[
        Case(
            "server",
            f"{name}-{bad}",
            (with_global(name, bad, validate()),),
            readme=f"{name}: found '{bad}', need {needed}",
            says=rf"SET GLOBAL {name} = '{needed}'",
        )
        for name, bad, needed in [
            ("binlog_format", "STATEMENT", "ROW"),
            ("binlog_format", "MIXED", "ROW"),
            ("binlog_row_image", "MINIMAL", "FULL"),
            ("binlog_row_image", "NOBLOB", "FULL"),
            ("binlog_row_metadata", "MINIMAL", "FULL"),
            ("binlog_row_metadata", "NO_LOG", "FULL"),
        ]
    ],
    Case(
        "server",
        "log_bin-OFF",
        (_no_binlog,),
        readme="log_bin: found 'OFF', need ON",
        says=r"Fix: enable binary logging: log-bin=mysql-bin",
    ),
    Case("server", "binlog_checksum-NONE", (_checksum_none,), check=_validated),
    Case("server", "compressed-binlog-log_bin_compress", (_compressed,), check=_validated),
    Case(
        "server",
        "server-id-clash",
        (with_conn(validate_door, server_id_range="1-100"),),
        readme="server_id_range: ...",
        says=r"need a range without the server's own server_id 1\. Fix: set "
        r"server_id_range to ids no server or replica uses",
    ),
    Case(
        "server",
        "binlog-purged-at-stream-start",
        (_stream_start_check,),
        setup=_purge_the_watermark,
        readme="binlog file '<file>' (offset ...) has been purged from the server; the oldest binlog file still "
        "on the server is ... must be snapshotted again",
    ),
    Case(
        "server",
        "binlog-purged-before-specific-offset",
        (plan(startup_mode="specific-offset", startup_offset={"file": "mysql-bin.000000", "position": 4}),),
        readme="startup_offset.file: '<file>' is not on the server (its binlog files: ...)",
    ),
    Case(
        "server",
        "time-zone-mismatch",
        (with_conn(validate_door, server_time_zone="Asia/Tokyo"),),
        readme="server_time_zone: found 'Asia/Tokyo (UTC+09:00)', need the server's time zone ...",
    ),
    Case(
        "server",
        "time-zone-unknown",
        (with_conn(validate_door, server_time_zone="Mars/Olympus_Mons"),),
        readme="server_time_zone: found '<zone>', need an IANA zone name",
    ),
]


# --- tables -------------------------------------------------------------------------------------


def both(**kw: Any) -> tuple[Callable[[Ctx], Any], ...]:
    """The validate task and the plan task (in that order, as in the DAG): both get the table
    list (the validate task takes no plan settings) and both must refuse it, or accept it."""
    return validate(**{k: v for k, v in kw.items() if k in ("tables", "chunk_key_columns")}), plan(**kw)


def _planned(database: str, table: str, rows: int, min_chunks: int = 1) -> Callable[[Ctx, list[Any]], None]:
    """Validate named the table; plan split it into at least ``min_chunks`` chunks of that table,
    estimated ``rows`` rows, and the stored plan reads back the same."""

    def check(ctx: Ctx, results: list[Any]) -> None:
        from airflow_provider_mysqlcdc.cdc.model import TableId

        tid = TableId(database, table)
        validated, batches = results
        assert [t["table"] for t in validated["tables"]] == [str(tid)]
        assert batches and sum(b["estimated_rows"] for b in batches) == rows, batches
        stored = ctx.state_store().read_plan()
        assert list(stored.schemas) == [tid]
        chunks = [c for b in stored.batches for c in b.chunks]
        assert len(chunks) >= min_chunks and all(c.table_id == tid for c in chunks), chunks

    return check


def _odd_cases() -> list[Case]:
    out = []
    for (table, (key, entry)), what in zip(
        ODD_TABLES.items(), ("backtick", "blank", "unicode", "reserved-words", "dot")
    ):
        out.append(
            Case(
                "tables",
                f"name-with-{what}",
                both(tables=[entry], chunk_size=10),
                check=_planned(DB, table, 30, min_chunks=3),
            )
        )
    return out


TABLES = [
    Case("tables", "missing", both(tables=[f"{DB}.no_such_table"]), readme=NO_MATCH_ROW, says="shop.no_such_table"),
    Case("tables", "view", both(tables=[f"{DB}.v"]), readme="table pattern 'shop.v' matches only views (...)"),
    Case(
        "tables",
        "no-key",
        both(tables=[f"{DB}.no_key"]),
        readme=NO_KEY_ROW,
        says=r"chunk_key_columns=\{'shop\.no_key': '<column>'\}.*The table has no index",
    ),
    Case(
        "tables",
        "no-key-but-a-unique-column",
        both(tables=[f"{DB}.no_key_unique"]),
        readme=NO_KEY_ROW,
        says=r"Good candidates \(unique or indexed\): code",
    ),
    Case(
        "tables",
        "chunk-key-column-missing",
        both(tables=[f"{DB}.no_key"], chunk_key_columns={f"{DB}.no_key": "nope"}),
        readme="chunk_key_columns['db.t'] = '<column>': table db.t has no such column",
    ),
    Case("tables", "regex-without-database", both(tables=["order_.*"]), readme=REGEX_ROW),
    Case("tables", "regex-without-database-no-dot", both(tables=["order_[0-9]+"]), readme=REGEX_ROW),
    Case(
        "tables",
        "unclosed-quote",
        both(tables=["`shop.orders"]),
        readme="table '`shop.orders': the quote ` opened at character 1 is never closed",
    ),
    Case("tables", "no-database", both(tables=["orders"]), readme="table 'orders' has no database"),
    Case(
        "tables",
        "several-problems",
        both(tables=[f"{DB}.no_such_table", f"{DB}.v", f"{DB}.no_key"]),
        readme="the table list has N problems; nothing was read. Fix: correct each entry below, then trigger again.",
        says=r"has 3 problems",
    ),
    Case(
        "tables",
        "system-table",
        both(tables=["mysql.user"]),
        readme=NO_MATCH_ROW,
        says=r"only base tables outside the system schemas count",
    ),
    *_odd_cases(),
    Case(
        "tables",
        "database-name-with-dot",
        both(tables=["`shop.eu`.`orders`"], chunk_size=10),
        check=_planned("shop.eu", "orders", 30, min_chunks=3),
    ),
    Case("tables", "empty-table", both(tables=[f"{DB}.empty"]), check=_planned(DB, "empty", 0)),
    Case("tables", "16MB-row", both(tables=[f"{DB}.big_row"]), check=_planned(DB, "big_row", 2)),
    Case("tables", "partitioned", both(tables=[f"{DB}.parts"], chunk_size=10), check=_planned(DB, "parts", 40, 3)),
]


# --- params -------------------------------------------------------------------------------------


def _blocker(ctx: Ctx) -> None:
    """A plain file where a directory would have to be: nothing can be made below it."""
    (ctx.root / "blocker").write_text("a file, not a directory")


def _unwritable_sink(sink_type: str) -> Callable[[Ctx], Any]:
    return lambda ctx: ctx.plan(sink_type=sink_type, sink_options={"root": str(ctx.root / "blocker" / "lake")})


PG_SCHEMA = "cat_never_made"


def _postgres_sink(password: str) -> Callable[[Ctx], Any]:
    def run(ctx: Ctx) -> Any:
        from mysqlcdc_harness.postgres import DATABASE, SUPERUSER

        pg = ctx.postgres()
        ctx.monkeypatch.setenv(
            "AIRFLOW_CONN_PG",
            json.dumps(
                {
                    "conn_type": "postgres",
                    "host": "127.0.0.1",
                    "port": pg.port,
                    "login": SUPERUSER,
                    "password": password,
                    "schema": DATABASE,
                }
            ),
        )
        try:
            return ctx.plan(sink_type="postgres", sink_options={"schema": PG_SCHEMA}, sink_conn_id="pg")
        finally:
            assert not pg.query("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (PG_SCHEMA,)), (
                "the sink's schema was made"
            )

    return run


def _huge_chunks(ctx: Ctx, results: list[Any]) -> None:
    (batches,) = results
    stored = ctx.state_store().read_plan()
    assert [len(b.chunks) for b in stored.batches] == [1] and batches[0]["estimated_rows"] == 20


PARAMS = [
    Case("params", "chunk_size-0", (plan(chunk_size=0),), readme="chunk_size: found <n>, need >= 1"),
    Case("params", "chunk_size-negative", (plan(chunk_size=-8096),), readme="chunk_size: found <n>, need >= 1"),
    Case(
        "params",
        "chunk_size-not-a-number",
        (plan(chunk_size="8k"),),
        readme="chunk_size: found '<text>', need a whole number",
    ),
    Case("params", "chunk_size-huge", (plan(chunk_size=10**15),), check=_huge_chunks),
    Case("params", "rows_per_batch-0", (plan(rows_per_batch=0),), readme="rows_per_batch: found <n>, need >= 1"),
    Case(
        "params",
        "unknown-sink",
        (plan(sink_type="kafka"),),
        readme="sink.type: found '<type>', need one of delta, postgres, changelog, iceberg, console",
    ),
    Case(
        "params",
        "unknown-startup-mode",
        (plan(startup_mode="newest"),),
        readme="startup_mode: found '<mode>', need one of ...",
    ),
    Case(
        "params",
        "specific-offset-without-offset",
        (plan(startup_mode="specific-offset"),),
        readme="startup_mode 'specific-offset' needs startup_offset",
    ),
    Case(
        "params",
        "offset-file-malformed",
        (plan(startup_mode="specific-offset", startup_offset={"file": "mysql-bin", "position": 4}),),
        readme="startup_offset.file: found '<file>', need a binlog file name like 'mysql-bin.000003'",
    ),
    Case(
        "params",
        "offset-position-below-4",
        (plan(startup_mode="specific-offset", startup_offset={"file": "mysql-bin.000001", "position": 2}),),
        readme="startup_offset.position: found N, need an integer >= 4",
    ),
    Case(
        "params",
        "offset-unknown-key",
        (plan(startup_mode="specific-offset", startup_offset={"file": "mysql-bin.000001", "pos": 4}),),
        readme="startup_offset: unknown key(s) ...",
    ),
    Case(
        "params",
        "offset-not-json",
        (plan(startup_mode="specific-offset", startup_offset="mysql-bin.000001:4"),),
        readme="<setting>: '...' is not a JSON object",
        says="startup_offset",
    ),
    Case(
        "params",
        "timestamp-malformed",
        (plan(startup_mode="timestamp", startup_timestamp="yesterday"),),
        readme="startup_timestamp: '...' is neither epoch seconds nor an ISO 8601 date-time",
    ),
    Case(
        "params",
        "timestamp-mode-without-timestamp",
        (plan(startup_mode="timestamp"),),
        readme="startup_mode 'timestamp' needs startup_timestamp",
    ),
    Case(
        "params",
        "unwritable-state-location",
        (lambda ctx: ctx.plan(state_location=str(ctx.root / "blocker" / "state")),),
        setup=_blocker,
        readme="state_location '...' is not writable: ...",
    ),
    Case(
        "params",
        "unwritable-delta-root",
        (_unwritable_sink("delta"),),
        setup=_blocker,
        readme="the <sink> sink's root (sink_options.root) '...' is not writable",
        says="delta",
    ),
    Case(
        "params",
        "unwritable-changelog-root",
        (_unwritable_sink("changelog"),),
        setup=_blocker,
        readme="the <sink> sink's root (sink_options.root) '...' is not writable",
        says="changelog",
    ),
    Case(
        "params",
        "wrong-postgres-password",
        (_postgres_sink("not-the-password"),),
        readme="cannot connect to the PostgreSQL sink of connection 'pg': ...",
    ),
    Case(
        "params",
        "postgres-sink-without-connection",
        (plan(sink_type="postgres", sink_options={}),),
        readme="the postgres sink needs a database",
    ),
    Case("params", "delta-sink-without-root", (plan(sink_options={}),), readme="the <sink> sink needs a root"),
    Case(
        "params",
        "password-in-sink-options",
        (plan(sink_type="postgres", sink_options={"dsn": "host=x", "password": "secret"}),),
        readme="sink_options must not hold a password",
    ),
    Case(
        "params",
        "sink-connection-for-delta",
        (plan(sink_conn_id="pg"),),
        readme="sink_conn_id is for the postgres sink or an iceberg sink's catalog; the sink is '<sink>'",
    ),
    Case(
        "params",
        "sink-option-unknown",
        (plan(sink_options={"root": "/tmp/x", "roots": "/tmp/y"}),),
        readme="sink '<sink>': bad options [...] (...). Fix: use only the options the <sink> sink accepts: ...",
    ),
    Case(
        "params",
        "stream-option-unknown",
        (plan(stream_options={"max_events": 10}),),
        readme="stream_options: unknown key 'max_events'. Fix: use only max_events_per_batch, ...",
    ),
    Case(
        "params",
        "stream-option-out-of-range",
        (plan(stream_options={"catchup_parallelism": 100}),),
        readme="stream_options.<key>: found <value>, need ...",
        says="catchup_parallelism: found 100, need at most 64",
    ),
    Case(
        "params",
        "schema-change-behavior-unknown",
        (plan(schema_change_behavior="yolo"),),
        readme="schema_change_behavior: found '<value>', need one of ...",
    ),
    Case(
        "params",
        "zero-dates-unknown",
        (plan(zero_dates="zero"),),
        readme="zero_dates: found '<value>', need one of null, text",
    ),
    Case(
        "params",
        "reread-batches-unknown",
        (plan(reread_batches=["shop.nope"]),),
        readme="reread_batches: [...] is not a batch of the plan nor a captured table",
    ),
    Case(
        "params",
        "server-id-range-malformed",
        (with_conn(validate_door, server_id_range="many"),),
        readme="server_id_range: ...",
    ),
    Case("params", "no-tables", (plan(tables=[]),), readme="tables: no include pattern given"),
]


# --- state --------------------------------------------------------------------------------------


def planned(ctx: Ctx) -> None:
    """A good plan and pipeline.json, as the plan task leaves them."""
    ctx.plan(chunk_size=10)


def write_state(rel: str, content: str | Callable[[str], str]) -> Callable[[Ctx], None]:
    """After a good plan: the state file ``rel`` replaced by ``content`` (text, or a function of
    the file's good text -- e.g. its first half, as a write cut short leaves it)."""

    def setup(ctx: Ctx) -> None:
        planned(ctx)
        path = ctx.state / rel
        good = path.read_text() if path.exists() else ""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content(good) if callable(content) else content)

    return setup


def batch_result(content: Callable[[dict], str]) -> Callable[[Ctx], None]:
    """After a good plan: the first batch's result file (what its snapshot job writes: ranges
    and high watermark) as ``content`` makes it of the good one."""

    def setup(ctx: Ctx) -> None:
        from airflow_provider_mysqlcdc.cdc.state import StateStore

        planned(ctx)
        b = ctx.state_store().read_plan().batches[0]
        file, pos = ctx.mariadb.master_status()
        good = {
            "batch_id": b.batch_id,
            "ranges": [r.to_dict() for r in b.ranges()],
            "high_watermark": {"file": file, "position": pos},
            "rows": 20,
            "rows_per_s": 1000.0,
        }
        path = ctx.state / StateStore.batch_result_rel(b.batch_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content(good))

    return setup


def _half(text: str) -> str:
    return text[: len(text) // 2]


def _stream_started_with_finished(content: str) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        planned(ctx)
        (ctx.state / "stream" / "checkpoint").mkdir(parents=True)
        (ctx.state / "finished_batches.json").write_text(content)

    return setup


def _running_stream(ctx: Ctx) -> None:
    """A stream of this pipeline runs: it holds the lease (this process, alive, on this host)."""
    from airflow_provider_mysqlcdc.cdc.store.lease import StreamLease

    planned(ctx)
    StreamLease(ctx.state_store(), ttl_s=60).acquire()


def _second_launch(ctx: Ctx) -> Any:
    """What the stream job does before Spark starts: take the pipeline's lease."""
    from airflow_provider_mysqlcdc.cdc.store.lease import StreamLease

    return StreamLease(ctx.state_store(), ttl_s=60).acquire()


def _lease_cut_short(ctx: Ctx) -> None:
    """A lease file cut short (a holder killed while renewing it, which writes it in place), its
    holder long gone: the next launch must take the lease over, or say what to do."""
    from airflow_provider_mysqlcdc.cdc.store.lease import LEASE_DIR

    planned(ctx)
    lease_dir = ctx.state / LEASE_DIR
    lease_dir.mkdir(parents=True)
    (lease_dir / "000000000001.json").write_text('{"owner": {"host": "elsewhere", "pid": 1}, "expires_at": 1')


def _checkpoint_cut_short(ctx: Ctx) -> None:
    """A stream that ran once (its checkpoint holds a query id and the offsets of micro-batch 0),
    whose offset file was then cut short -- a disk that filled up, a copy that stopped half way."""
    ctx.plan(startup_mode="latest-offset", sink_type="changelog")
    checkpoint = ctx.state / "stream" / "checkpoint"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"6c1c4b8e-5d8a-4d43-9b1e-0d6b9a0f2e11"}\n')
    (checkpoint / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":17')


def _launch_stream(ctx: Ctx) -> Any:
    """The stream task on a local Spark master: it launches the stream job and waits for its first
    micro-batch (the job's log tail comes with its error)."""
    from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import stop_local_stream

    ctx.monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    try:
        return ctx.stream(start_timeout_s=240)
    finally:
        stop_local_stream(ctx.state_store(), timeout_s=30)  # the job this launched, if it still shuts down


STATE = [
    Case(
        "state",
        "plan-json-garbage",
        (plan(chunk_size=10), stream()),
        setup=write_state("plan.json", "\x00\x17garbage"),
        readme="the plan <file> in the state location is unreadable",
    ),
    Case(
        "state",
        "plan-json-truncated",
        (plan(chunk_size=10), stream()),
        setup=write_state("plan.json", _half),
        readme="the plan <file> in the state location is unreadable",
    ),
    Case(
        "state",
        "plan-json-wrong-shape",
        (plan(chunk_size=10), stream()),
        setup=write_state("plan.json", "[]"),
        readme="the plan <file> in the state location is unreadable",
    ),
    Case(
        "state",
        "plan-for-other-settings",
        (plan(chunk_size=20),),
        setup=planned,
        readme="the state location ... holds a plan for other settings (...); this run asks for ...",
    ),
    Case(
        "state",
        "pipeline-json-garbage",
        (stream(),),
        setup=write_state("pipeline.json", "name: shop\n"),
        readme="pipeline config <file> is not valid JSON",
    ),
    Case(
        "state",
        "pipeline-json-truncated",
        (stream(),),
        setup=write_state("pipeline.json", _half),
        readme="pipeline config <file> is not valid JSON",
    ),
    Case(
        "state",
        "pipeline-json-missing-key",
        (stream(),),
        setup=write_state(
            "pipeline.json", lambda good: json.dumps({k: v for k, v in json.loads(good).items() if k != "include"})
        ),
        readme="pipeline config <file> lacks the key '<key>'",
    ),
    Case("state", "pipeline-json-missing", (stream(),), readme="no pipeline.json in the state location ..."),
    Case(
        "state",
        "batch-result-garbage",
        (plan(chunk_size=10), stream()),
        setup=batch_result(lambda good: "}{"),
        readme="the snapshot result <file> in the state location is unreadable",
    ),
    Case(
        "state",
        "batch-result-truncated",
        (plan(chunk_size=10), stream()),
        setup=batch_result(lambda good: _half(json.dumps(good))),
        readme="the snapshot result <file> in the state location is unreadable",
    ),
    Case(
        "state",
        "batch-result-missing-keys",
        (plan(chunk_size=10), stream()),
        setup=batch_result(lambda good: json.dumps({"batch_id": good["batch_id"], "rows": 20})),
        readme="the snapshot result <file> in the state location is unreadable",
    ),
    Case(
        "state",
        "batch-result-missing",
        (stream(),),
        setup=planned,
        readme="N batch(es) have no snapshot result (<batch ids>)",
    ),
    Case(
        "state",
        "finished-batches-garbage",
        (stream(),),
        setup=_stream_started_with_finished("[{"),
        readme="the finished-batch list <file> in the state location is unreadable",
    ),
    Case(
        "state",
        "checkpoint-offsets-cut-short",
        (_launch_stream,),
        setup=_checkpoint_cut_short,
        readme="the stream's checkpoint <file> is unreadable",
        may_write=r"state/stream/(?!checkpoint)",
        marks=(pytest.mark.spark,),
    ),
    Case(
        "state",
        "double-launch",
        (_second_launch,),
        setup=_running_stream,
        readme="the stream of <state> already runs (...)",
    ),
    Case(
        "state",
        "lease-file-cut-short",
        (_second_launch,),
        setup=_lease_cut_short,
        readme="the stream's lease <file> is unreadable",
    ),
]

CASES = CONNECTION + PRIVILEGES + SERVER + TABLES + PARAMS + STATE


# --- the tests ----------------------------------------------------------------------------------


@pytest.fixture
def ctx(request, mariadb, shop, tmp_dir, monkeypatch):
    with contextlib.ExitStack() as stack:
        yield Ctx(request, mariadb, shop, tmp_dir, monkeypatch, stack)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=c.marks) for c in CASES])
def test_bad_input(case: Case, ctx: Ctx) -> None:
    if case.setup is not None:
        case.setup(ctx)
    if case.readme is None:
        results = [door(ctx) for door in case.doors]
        if case.check is not None:
            case.check(ctx, results)
        return
    before = ctx.fingerprint(case.may_write)
    for door in case.doors:
        with pytest.raises(Exception) as ei:
            door(ctx)
        error = ei.value
        message = str(error)
        assert isinstance(error, (AirflowFailException, CdcError)), (
            f"a raw {type(error).__name__} instead of the engine's message: {message}"
        )
        after = ctx.fingerprint(case.may_write)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        assert not changed, f"written before the error: {changed}; the error: {message}"
        if case.says is not None:
            assert re.search(case.says, message, re.DOTALL), message
        assert message_regex(case.readme).search(message), (
            f"the troubleshooting row's pattern {case.readme!r} does not match the message:\n{message}"
        )
        assert "Fix:" in message, f"no fix named: {message}"


def _xfail(case: Case) -> bool:
    return any(getattr(m, "name", None) == "xfail" for m in case.marks)


def test_every_message_pattern_is_in_the_readme() -> None:
    """Each error case's pattern is in a first cell of docs/troubleshooting.md's error table (an xfail case's
    pattern is the message its fix is to bring: its row comes with the fix)."""
    cells = error_table_first_cells(ERRORS_PAGE)
    missing = sorted(
        {
            c.readme
            for c in CASES
            if c.readme is not None and not _xfail(c) and not any(c.readme in cell for cell in cells)
        }
    )
    assert not missing, "docs/troubleshooting.md's error table lacks rows for: " + "; ".join(missing)


def test_the_catalogue_covers_every_group_with_40_cases_or_more() -> None:
    groups = {c.group for c in CASES}
    assert groups == {"connection", "privileges", "server", "tables", "params", "state"}
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)
