"""What the server says about its binlog: version, current/earliest offsets, retained files.

Thin functions over a pymysql connection (autocommit, as ``SourceConfig.connect()`` makes
it). Version differences live in ``ServerVersion``; this module only picks the statement.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import BinlogPurgedError, ConfigError
from ..offsets import BinlogOffset
from .gtid import canonical_gtid
from .version import ServerVersion

# The first event of every binlog file starts after the 4-byte magic header.
BINLOG_FIRST_EVENT_POS = 4

_ER_NO_BINARY_LOGGING = 1381


def _rows(conn: Any, sql: str, args: Any = None) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        if not cur.description:
            return []
        return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in cur.fetchall()]


def _dict_rows(conn: Any, sql: str) -> list[dict[str, Any]]:
    """Rows as dicts keyed by column name: status columns differ between versions."""
    with conn.cursor() as cur:
        cur.execute(sql)
        names = [d[0] for d in cur.description or ()]
        return [dict(zip(names, r.values() if isinstance(r, dict) else r)) for r in cur.fetchall()]


def _binlog_off_error(version: ServerVersion | None = None) -> ConfigError:
    return ConfigError(
        f"log_bin: found 'OFF' on the {version or 'server'}, need 'ON'. Fix: start the server with "
        "log_bin (log-bin=mysql-bin under [mysqld] in my.cnf, plus a server_id) and binlog_format=ROW; "
        "binary logging cannot be turned on at runtime."
    )


def server_version(conn: Any) -> ServerVersion:
    """The server's flavor and version, from ``SELECT VERSION()``."""
    return ServerVersion.parse(str(_rows(conn, "SELECT VERSION()")[0][0]))


def current_offset(conn: Any, version: ServerVersion) -> BinlogOffset:
    """The offset just past the last event written to the binlog, with the GTID set there.

    On MariaDB the GTID comes from ``@@gtid_binlog_pos``, a separate read from the status
    statement. It is read *before* the position and re-read after: if a transaction
    committed in between, the GTID lags the position, never leads it, so resuming by GTID
    replays a few transactions rather than skipping one. Replays converge; skips lose data.
    """
    if version.is_mariadb:
        for _ in range(5):
            gtid_before = _rows(conn, "SELECT @@global.gtid_binlog_pos")[0][0]
            offset = _status_offset(conn, version)
            gtid_after = _rows(conn, "SELECT @@global.gtid_binlog_pos")[0][0]
            if gtid_before == gtid_after:
                break
        return BinlogOffset(offset.file, offset.position, canonical_gtid(gtid_before, "mariadb"))
    return _status_offset(conn, version)


def _status_offset(conn: Any, version: ServerVersion) -> BinlogOffset:
    try:
        rows = _dict_rows(conn, version.binlog_status_sql)
    except Exception as e:  # pymysql.err.* -- not imported here to keep the module light
        if getattr(e, "args", None) and e.args[0] == _ER_NO_BINARY_LOGGING:
            raise _binlog_off_error(version) from None
        raise
    if not rows or not rows[0].get("File"):
        raise _binlog_off_error(version)
    row = rows[0]
    gtid = canonical_gtid(row.get("Executed_Gtid_Set"), "mysql") if version.is_mysql else None
    return BinlogOffset(str(row["File"]), int(row["Position"]), gtid)


def consistent_snapshot_offset(conn: Any, version: ServerVersion | None = None) -> BinlogOffset | None:
    """A binlog offset no later than the first transaction a new snapshot might not see.

    Why a plain LW is not enough: a transaction is written to the binlog a moment before
    InnoDB makes it visible, so a SELECT that starts right after ``SHOW MASTER STATUS`` can
    miss a change that is already before LW, and a backfill starting at LW never repairs it.

    Why this is exact on MariaDB: ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` takes its
    InnoDB read view while holding the binlog's commit ordering lock, and the server records
    the binlog file/position belonging to exactly that read view in the session status
    variables ``binlog_snapshot_file`` / ``binlog_snapshot_position``: every transaction
    before that position is visible in the snapshot, none after it is. Read views only
    grow, so any snapshot taken afterwards (the chunk SELECTs) sees at least those
    transactions, and a backfill starting here covers everything a SELECT might miss.

    MySQL has no such status variables (Percona Server does, but is not told apart from
    MySQL here), so this returns None there and callers start the backfill at an offset
    read earlier. Needs an autocommit connection: START TRANSACTION commits an open one.
    """
    version = version or server_version(conn)
    if not version.is_mariadb:
        return None
    with conn.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        try:
            cur.execute(
                "SHOW SESSION STATUS WHERE Variable_name IN ('binlog_snapshot_file', 'binlog_snapshot_position')"
            )
            status = {str(k).lower(): v for k, v in cur.fetchall()}
        finally:
            cur.execute("COMMIT")
    file = status.get("binlog_snapshot_file")
    if not file:
        raise _binlog_off_error(version)
    return BinlogOffset(str(file), int(status["binlog_snapshot_position"]))


def list_binlogs(conn: Any) -> list[tuple[str, int]]:
    """The binlog files the server still has, oldest first, with their sizes in bytes."""
    try:
        rows = _rows(conn, "SHOW BINARY LOGS")
    except Exception as e:
        if getattr(e, "args", None) and e.args[0] == _ER_NO_BINARY_LOGGING:
            raise _binlog_off_error() from None
        raise
    logs = [(str(r[0]), int(r[1])) for r in rows]
    return sorted(logs, key=lambda fs: BinlogOffset(fs[0], 0).sort_key())


def earliest_offset(conn: Any) -> BinlogOffset:
    """The first event of the oldest binlog file still on the server."""
    logs = list_binlogs(conn)
    if not logs:
        raise _binlog_off_error()
    return BinlogOffset(logs[0][0], BINLOG_FIRST_EVENT_POS)


def binlog_gtid_pos(conn: Any, offset: BinlogOffset) -> str | None:
    """MariaDB's GTID position at ``offset`` (``BINLOG_GTID_POS``), canonical; None if unknown.

    The server scans ``offset.file`` up to the position to answer, so this costs a read of
    up to one binlog file: call it once per resume, not per event.
    """
    rows = _rows(conn, "SELECT BINLOG_GTID_POS(%s, %s)", (offset.file, offset.position))
    value = rows[0][0] if rows else None
    if isinstance(value, bytes):
        value = value.decode()
    return canonical_gtid(value, "mariadb")


def check_offset_available(conn: Any, offset: BinlogOffset, tables: Sequence[str] = ()) -> None:
    """Fail with a message saying what to do when a reader cannot start at ``offset``.

    A purged file means the changes between ``offset`` and the oldest retained binlog are
    gone for good: no replay can rebuild them, only a new snapshot of the affected tables.
    """
    logs = list_binlogs(conn)
    sizes = dict(logs)
    what = ", ".join(tables) if tables else "the captured table(s)"
    if offset.file not in sizes:
        oldest = logs[0][0] if logs else "(none)"
        newest = logs[-1][0] if logs else "(none)"
        if logs and offset.file_index > BinlogOffset(newest, 0).file_index:
            gone = (
                f"binlog file {offset.file!r} (offset {offset}) is newer than the newest binlog on the "
                f"server ({newest!r}): the server's binlog was reset or this offset belongs to another "
                "server."
            )
        else:
            gone = (
                f"binlog file {offset.file!r} (offset {offset}) has been purged from the server; "
                f"the oldest binlog file still on the server is {oldest!r}."
            )
        raise BinlogPurgedError(
            f"{gone} The changes since that offset are lost to CDC: {what} must be snapshotted again. Fix: "
            "start a new initial load for them (trigger with reset=true), and keep binlogs longer than the "
            "pipeline can be down (binlog_expire_logs_seconds on MySQL, binlog_expire_logs_seconds / "
            "expire_logs_days on MariaDB) so it does not recur."
        )
    if offset.position > sizes[offset.file]:
        raise BinlogPurgedError(
            f"offset {offset} lies past the end of binlog file {offset.file!r} ({sizes[offset.file]} bytes): "
            f"the server's binlog was reset or the offset belongs to another server. {what} must be "
            "snapshotted again. Fix: start a new initial load for them (trigger with reset=true)."
        )
