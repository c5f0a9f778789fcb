"""The binlog reader: python-mysql-replication's stream turned into RowChange / SchemaChange / Heartbeat.

Two traps of the library shape this module:

* **Starting at an exact (file, position) on MariaDB.** With ``is_mariadb=True`` and no
  GTID the library sends an empty file name and position 4, so the server starts
  somewhere else. We therefore always use the library's MySQL-style ``COM_BINLOG_DUMP``
  (``is_mariadb=False``, ``resume_stream=True``, ``log_file``/``log_pos``). The library sets
  ``@mariadb_slave_capability=4`` (GTID-aware replica) on every connection, so MariaDB sends
  its native events unchanged -- ``MariadbGtidEvent`` (the transaction GTID),
  ``MariadbGtidListEvent``, ``MariadbBinLogCheckPointEvent`` -- all of which the library
  parses. The server's first event is a fake ROTATE whose position is exactly the
  requested one. The same path is the ordinary one on MySQL.
* **Stopping at (file, position).** The library's ``end_log_pos`` compares positions only
  and ignores the file, so a bounded read across a rotation stops in the wrong place. We
  track the current file from ROTATE events and stop ourselves once an event's
  (file index, start position) reaches ``stop``.

Offsets of yielded changes are where their event *starts* (``log_pos - event_size``), with
``row`` the index of the row inside a multi-row event; watermarks (SHOW MASTER STATUS) are
"next write position", so a change is after a watermark exactly when ``offset >= watermark``.

Resuming in the middle of a transaction: a rows event is only decodable after its
TABLE_MAP event, and the library silently drops rows whose table map it has not seen.
``start`` must therefore be a transaction boundary (watermarks always are), or the caller
passes ``dump_from`` = the start of the transaction (see ``transaction_start``): the dump
then begins there and everything before ``start`` is read but not yielded.
"""

from __future__ import annotations

from typing import Any, Callable, Collection, Iterator, Mapping

import pymysql

from ..errors import REPORT_BUG, CdcError
from ..events import Heartbeat, RowChange, SchemaChange
from ..model import TableId
from ..offsets import BinlogOffset
from ..schema.detect import BEGIN, END, OTHER, captured_ddl_tables, statement_kind
from ..source.config import SourceConfig, binlog_read_timeout
from ..source.connection import connect
from ..source.server import check_offset_available
from ..source.statements import StatementGuard

Normalizer = Callable[..., dict]  # normalize(values, none_sources=None)
Event = RowChange | SchemaChange | Heartbeat

# MySQL/MariaDB error "Could not find first log file name in binary log index file" & co.
_ER_MASTER_FATAL_READING_BINLOG = 1236


def _server_is_mariadb(conn: Any) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        return "mariadb" in str(cur.fetchone()[0]).lower()


def check_start_available(conn: Any, start: BinlogOffset, tables: Collection[TableId] | None = None) -> None:
    """Raise ``BinlogPurgedError`` if the server can no longer serve ``start`` (one message, server.py)."""
    check_offset_available(conn, start, sorted(str(t) for t in tables) if tables else ())


class BinlogReader:
    """Reads the binlog from ``start`` (inclusive) up to ``stop`` (exclusive) or forever.

    Iterating yields ``RowChange`` (one per row, only for ``tables``), ``SchemaChange``
    (DDL touching ``tables`` or their databases) and ``Heartbeat`` (server heartbeats while
    idle, so consumers' offsets move). ``server_id`` must be unique among concurrent
    readers of the server: two replicas with one id kick each other off.
    """

    def __init__(
        self,
        source: SourceConfig,
        server_id: int,
        start: BinlogOffset,
        stop: BinlogOffset | None = None,
        tables: Collection[TableId] | None = None,
        normalizers: Mapping[TableId, Normalizer] | None = None,
        is_mariadb: bool | None = None,
        heartbeat_s: float = 2.0,
        blocking: bool | None = None,
        dump_from: BinlogOffset | None = None,
    ) -> None:
        if stop is not None and stop < start:
            raise ValueError(f"binlog read: stop {stop} is before start {start}")
        if dump_from is not None and dump_from > start:
            raise ValueError(f"binlog read: dump_from {dump_from} is after start {start}")
        self.source = source
        self.server_id = int(server_id)
        self.start = start
        self.stop = stop
        self.tables = frozenset(tables) if tables is not None else None
        self.normalizers = dict(normalizers or {})
        self.is_mariadb = is_mariadb
        self.heartbeat_s = heartbeat_s
        self.blocking = (stop is None) if blocking is None else blocking
        self.dump_from = dump_from or BinlogOffset(start.file, start.position)
        self._databases = frozenset(t.database for t in self.tables) if self.tables is not None else None
        self._stream: Any = None
        self._file = self.dump_from.file
        self._gtid: str | None = None
        self._txn_start: BinlogOffset | None = None
        self._in_txn = False
        self._checked_tables: set[TableId] = set()
        self._done = False

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> "BinlogReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the replication connection (and the library's control connection).

        Safe from another thread: the iterating thread then ends at its next packet (a
        heartbeat at the latest) instead of letting the library reconnect.
        """
        self._done = True
        if self._stream is not None:
            try:
                self._stream.close()
            except Exception:  # already closed under the reading thread
                pass

    def _connect(self, **kwargs: Any) -> Any:
        """The library's connection factory: refuses to (re)connect once the reader is closed."""
        if self._done:
            raise _ReaderClosed()
        return connect(**kwargs)

    def _open(self) -> None:
        """Check the start file is still there, then open the dump at ``dump_from``."""
        conn = self.source.connect_binlog()
        try:
            if self.is_mariadb is None:
                self.is_mariadb = _server_is_mariadb(conn)
            check_start_available(conn, self.dump_from, self.tables)
        finally:
            conn.close()
        self._stream = self._make_stream()

    def _make_stream(self) -> Any:
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import (
            GtidEvent,
            HeartbeatLogEvent,
            MariadbGtidEvent,
            QueryEvent,
            RotateEvent,
            XAPrepareEvent,
            XidEvent,
        )
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        settings = self.source.connect_kwargs()
        settings.pop("autocommit", None)
        settings["read_timeout"] = settings["write_timeout"] = binlog_read_timeout(self.heartbeat_s)
        only_schemas = sorted(self._databases) if self._databases is not None else None
        only_tables = sorted({t.table for t in self.tables}) if self.tables is not None else None
        return BinLogStreamReader(
            connection_settings=settings,
            server_id=self.server_id,
            # Always the file/pos dump, also on MariaDB: see the module docstring.
            is_mariadb=False,
            resume_stream=True,
            log_file=self.dump_from.file,
            log_pos=self.dump_from.position,
            blocking=self.blocking,
            only_events=[
                RotateEvent,
                QueryEvent,
                XidEvent,
                XAPrepareEvent,
                GtidEvent,
                MariadbGtidEvent,
                WriteRowsEvent,
                UpdateRowsEvent,
                DeleteRowsEvent,
                HeartbeatLogEvent,
            ],
            only_schemas=only_schemas,
            only_tables=only_tables,
            slave_heartbeat=self.heartbeat_s if self.heartbeat_s else None,
            pymysql_wrapper=self._connect,
            enable_logging=False,
        )

    # --- positions -------------------------------------------------------------------------

    @property
    def position(self) -> BinlogOffset:
        """The next offset to read: everything before it has been received."""
        if self._stream is None or not self._stream.log_file or not self._stream.log_pos:
            return self.dump_from
        return BinlogOffset(self._stream.log_file, int(self._stream.log_pos or 4))

    @property
    def transaction_start(self) -> BinlogOffset | None:
        """Where the transaction of the last event read starts: a safe ``dump_from`` to resume it."""
        return self._txn_start

    def _reached_stop(self, offset: BinlogOffset) -> bool:
        return self.stop is not None and offset >= self.stop

    # --- iteration -------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Event]:
        if self._done:
            return
        if self._stream is None:
            self._open()
        try:
            for ev in self._events():
                if self._done:
                    return
                yield ev
        except Exception as e:
            if self._done:  # closed (maybe from another thread) while reading: just end
                return
            if isinstance(e, pymysql.err.OperationalError) and e.args and e.args[0] == _ER_MASTER_FATAL_READING_BINLOG:
                self._raise_if_purged(e)
            raise
        finally:
            self.close()

    def _raise_if_purged(self, cause: Exception) -> None:
        raise_dump_stopped(self.source, self._file, self.tables, self.position, cause)

    def _events(self) -> Iterator[Event]:
        from pymysqlreplication.event import (
            GtidEvent,
            HeartbeatLogEvent,
            MariadbGtidEvent,
            QueryEvent,
            RotateEvent,
            XAPrepareEvent,
            XidEvent,
        )
        from pymysqlreplication.row_event import RowsEvent

        for ev in self._stream:
            if self._done:
                return
            pkt = ev.packet
            if isinstance(ev, RotateEvent):
                if self._on_rotate(ev):
                    return
                continue
            if isinstance(ev, HeartbeatLogEvent):
                pos = self.position
                if self._reached_stop(pos):
                    return
                if pos >= self.start:
                    yield Heartbeat(pos)
                continue
            if not pkt.log_pos:  # artificial event (no place in the binlog)
                continue
            offset = BinlogOffset(self._file, pkt.log_pos - pkt.event_size)
            if self._reached_stop(offset):
                return
            if isinstance(ev, (MariadbGtidEvent, GtidEvent)):
                self._gtid = ev.gtid
                self._begin(offset)
            elif isinstance(ev, (XidEvent, XAPrepareEvent)):
                self._in_txn = False
            elif isinstance(ev, QueryEvent):
                yield from self._on_query(ev, offset)
            elif isinstance(ev, RowsEvent):
                self._begin(offset)
                yield from self._on_rows(ev, offset)
        if self.stop is not None and not self.blocking and self.position < self.stop:
            raise CdcError(
                f"the binlog ended at {self.position} before the requested stop {self.stop}: "
                "the stop offset must be one the server has already written. Fix: give a stop at or before "
                "the server's current position (SHOW MASTER STATUS)."
            )

    def _begin(self, offset: BinlogOffset) -> None:
        if not self._in_txn:
            self._txn_start = offset
            self._in_txn = True

    def _on_rotate(self, ev: Any) -> bool:
        """Switch files; True when the new file/position is at or past ``stop``."""
        self._file = ev.next_binlog
        if not ev.packet.log_pos:  # fake rotate: "you are now at next_binlog:position"
            return self._reached_stop(BinlogOffset(self._file, int(ev.position)))
        return False

    def _on_query(self, ev: Any, offset: BinlogOffset) -> Iterator[SchemaChange]:
        sql = ev.query
        kind = statement_kind(sql)
        if kind == BEGIN:
            self._begin(offset)
            return
        database = ev.schema.decode("utf-8", "replace") if isinstance(ev.schema, bytes) else str(ev.schema or "")
        if offset >= self.start:  # a statement-logged change of a captured table: stop, never skip it
            StatementGuard(self.tables).check(sql, database, str(offset))
        if kind == END:
            self._in_txn = False
        if kind != OTHER:
            return
        self._begin(offset)
        self._in_txn = False  # DDL commits implicitly
        named = captured_ddl_tables(sql, database, self.tables)
        if not named or offset < self.start:
            return
        yield SchemaChange(
            database=database,
            sql=sql,
            offset=offset,
            table_id=named[0],
            gtid=self._gtid,
            timestamp=int(ev.packet.timestamp),
            tables=tuple(named),
        )

    def _on_rows(self, ev: Any, offset: BinlogOffset) -> Iterator[RowChange]:
        table_id = TableId(ev.schema, ev.table)
        if self.tables is not None and table_id not in self.tables:
            return
        kind = _row_kind(ev)
        norm = self.normalizers.get(table_id)
        ts = int(ev.packet.timestamp)
        for i, row in enumerate(ev.rows):
            row_offset = BinlogOffset(offset.file, offset.position, row=i)
            if row_offset < self.start:
                continue
            if kind == "update":
                before, after = row["before_values"], row["after_values"]
                nb, na = row.get("before_none_sources"), row.get("after_none_sources")
            elif kind == "insert":
                before, after = None, row["values"]
                nb, na = None, row.get("none_sources")
            else:
                before, after = row["values"], None
                nb, na = row.get("none_sources"), None
            self._check_column_names(table_id, before if before is not None else after)
            if norm is not None:
                # none_sources is the only way to tell a nullable SET's empty set from NULL.
                before = norm(before, nb) if before is not None else None
                after = norm(after, na) if after is not None else None
            yield RowChange(kind, table_id, before, after, row_offset, self._gtid, ts)

    def _check_column_names(self, table_id: TableId, row: Mapping[str, Any]) -> None:
        """Column names come from the table map's optional metadata; without it they are lost."""
        if table_id in self._checked_tables:
            return
        if any(str(k).startswith("UNKNOWN_COL") for k in row) or not row:
            raise CdcError(
                f"binlog rows of {table_id} arrive without column names ({sorted(row)[:3]}...): "
                "the server logs no column metadata. Fix: SET GLOBAL binlog_row_metadata = FULL "
                "(MySQL >= 8.0.14, MariaDB >= 10.5) and snapshot the table again, since events "
                "written before the change cannot be decoded."
            )
        self._checked_tables.add(table_id)


class _ReaderClosed(Exception):
    """Raised into the library when it tries to reconnect a closed reader."""


def _row_kind(ev: Any) -> str:
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    if isinstance(ev, WriteRowsEvent):
        return "insert"
    if isinstance(ev, UpdateRowsEvent):
        return "update"
    if isinstance(ev, DeleteRowsEvent):
        return "delete"
    raise CdcError(f"unexpected rows event {type(ev).__name__}. {REPORT_BUG}")


def raise_dump_stopped(source: SourceConfig, file: str, tables: Any, position: Any, cause: Exception) -> None:
    """The server ended a binlog dump with a fatal error: say it was purged (which file, what
    to do) when that is why, else report where the dump stopped. Shared by both readers."""
    conn = source.connect_binlog()
    try:
        check_start_available(conn, BinlogOffset(file, 4), tables)
    finally:
        conn.close()
    raise CdcError(
        f"the server stopped the binlog dump at {position}: {cause}. Fix: act on the server's reason after the "
        "colon (a server that restarted or a connection that dropped is read again when the stream starts again "
        "from its last commit)."
    ) from cause
