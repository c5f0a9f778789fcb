"""Following the source across a failover: which server an offset belongs to, and where it lies
on another server by GTID.

Why: a binlog file name and position mean something only on the server that wrote them. After a
replica is promoted (behind the same endpoint or a new one) the new primary holds the same
transactions under the same GTIDs, but in files and at positions of its own; reading the old
offset there fails with a misleading error, or worse, reads from a wrong place without one.

So every stream offset carries the identity of the server it was taken on (``ServerIdentity``:
the flavor, ``@@server_id`` and, on MySQL, ``@@server_uuid``) and the GTID state *at* that offset
(every transaction before it). When the server a reader talks to is not the offset's,
``relocate`` finds the same point in the new server's binlog:

1. the new server must hold every transaction of the committed GTID state (else the replica
   was behind: those transactions are missing, and the stream stops naming them);
2. the walk starts at the newest binlog file whose starting GTID state (MariaDB's Gtid_list,
   MySQL's Previous_gtids) lies inside the committed state (if even the oldest file starts past
   it, transactions the sink never saw were purged: stop);
3. it walks transactions (``SHOW BINLOG EVENTS``: a server-side walk, no dump connection and no
   server id needed) until the GTIDs seen cover the committed state: the stream resumes there;
4. a transaction before that point which the committed state does not hold was never seen by the
   sink (an errant transaction of the new server, or the replica's own domain): harmless when it
   touches no captured table (logged), else the stream stops -- the sink would miss it.

MariaDB GTIDs (domain-server-seq, several domains) and MySQL GTID sets (uuid:intervals) take the
same path through ``GtidSet``; only MariaDB is exercised against a real server here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from ..errors import NOT_EXACT_MARKER, CdcError
from ..offsets import BinlogOffset
from ..source.gtid import Flavor, GtidSet, MariadbGtidSet, MysqlGtidSet, parse_gtid_set
from ..source.server import binlog_gtid_pos, list_binlogs
from ..source.version import ServerVersion

FILE_START = 4  # the first event of every binlog file
_PAGE = 5000  # SHOW BINLOG EVENTS rows per query
_TABLE_MAP = re.compile(r"table_id:\s*\d+\s*\((?P<name>.+)\)\s*$")
_MYSQL_GTID_NEXT = re.compile(r"GTID_NEXT\s*=\s*'(?P<gtid>[^']+)'", re.IGNORECASE)
_MARIADB_GTID = re.compile(r"GTID\s+(?P<gtid>\d+-\d+-\d+)", re.IGNORECASE)
_TXN_WORDS = ("BEGIN", "COMMIT", "ROLLBACK", "XA ")


class SourceChangedError(CdcError):
    """A reader was given an offset of another server than the one it reached: the range must be
    planned again (by GTID) on the driver, never read by file and position here."""


class FailoverNotExactError(CdcError):
    """The new server cannot continue the stream exactly (transactions missing, purged, or an errant
    transaction in a captured table). Not retried: a relaunch would find the same binlog."""


@dataclass(frozen=True)
class ServerIdentity:
    """Who wrote a binlog: the flavor, ``@@server_id`` and (MySQL) ``@@server_uuid``.

    Replicas need server ids of their own to replicate at all, so a promoted replica always
    differs from the old primary here; MySQL's uuid also tells apart two servers given the
    same id. The text form is what offsets store."""

    flavor: Flavor
    server_id: int
    uuid: str | None = None

    def __str__(self) -> str:
        tail = f":{self.uuid}" if self.uuid else ""
        return f"{self.flavor}:{self.server_id}{tail}"

    @classmethod
    def parse(cls, text: str) -> "ServerIdentity":
        parts = str(text).split(":", 2)
        if len(parts) < 2 or parts[0] not in ("mysql", "mariadb") or not parts[1].isdigit():
            raise ValueError(f"not a server identity ('mariadb:<server_id>' or 'mysql:<id>:<uuid>'): {text!r}")
        flavor: Flavor = "mysql" if parts[0] == "mysql" else "mariadb"
        return cls(flavor, int(parts[1]), parts[2] if len(parts) > 2 and parts[2] else None)

    def describe(self) -> str:
        return f"server_id {self.server_id}" + (f" (uuid {self.uuid})" if self.uuid else "")


def _scalar(conn: Any, sql: str, args: Any = None) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        row = cur.fetchone()
    value = row[0] if row else None
    return value.decode() if isinstance(value, bytes) else value


def server_identity(conn: Any, version: ServerVersion) -> ServerIdentity:
    """The identity of the server ``conn`` reached (one cheap query)."""
    if version.is_mariadb:
        return ServerIdentity("mariadb", int(_scalar(conn, "SELECT @@global.server_id")))
    with conn.cursor() as cur:
        cur.execute("SELECT @@global.server_id, @@global.server_uuid")
        sid, uuid = cur.fetchone()
    return ServerIdentity("mysql", int(sid), str(uuid.decode() if isinstance(uuid, bytes) else uuid).lower())


def server_gtid_state(conn: Any, version: ServerVersion) -> GtidSet:
    """Every transaction the server's binlog holds or held (MariaDB ``gtid_binlog_pos``, MySQL
    ``gtid_executed``)."""
    if version.is_mariadb:
        return parse_gtid_set(_scalar(conn, "SELECT @@global.gtid_binlog_pos") or "", "mariadb")
    return parse_gtid_set(_scalar(conn, "SELECT @@global.gtid_executed") or "", "mysql")


# --- the server-side walk -----------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One row of ``SHOW BINLOG EVENTS``."""

    file: str
    pos: int
    type: str
    end: int
    info: str


EventWalk = Callable[[str, int], Iterator[Event]]


def show_events(conn: Any, files: Sequence[str]) -> EventWalk:
    """A walk over the binlog from ``file:pos`` to its end, through ``files`` in order, paged."""

    def walk(file: str, pos: int) -> Iterator[Event]:
        at = files.index(file)
        for name in files[at:]:
            skip = 0
            start = pos if name == file else FILE_START
            while True:
                with conn.cursor() as cur:
                    cur.execute(f"SHOW BINLOG EVENTS IN %s FROM {int(start)} LIMIT {skip}, {_PAGE}", (name,))
                    rows = cur.fetchall()
                for r in rows:
                    info = r[5].decode(errors="replace") if isinstance(r[5], bytes) else str(r[5] or "")
                    yield Event(name, int(r[1]), str(r[2]), int(r[4]), info)
                if len(rows) < _PAGE:
                    break
                skip += _PAGE

    return walk


def event_gtid(ev: Event, flavor: Flavor) -> str | None:
    """The GTID a transaction-start event gives (MariaDB ``Gtid``, MySQL ``Gtid``/``Anonymous_Gtid``)."""
    if ev.type != "Gtid":
        return None
    m = (_MARIADB_GTID if flavor == "mariadb" else _MYSQL_GTID_NEXT).search(ev.info)
    return m.group("gtid") if m else None


def file_start_state(walk: EventWalk, file: str, flavor: Flavor) -> GtidSet:
    """The GTID state at the start of ``file``: its Gtid_list (MariaDB) or Previous_gtids (MySQL) event."""
    wanted = "Gtid_list" if flavor == "mariadb" else "Previous_gtids"
    for ev in walk(file, FILE_START):
        if ev.type == wanted:
            text = ev.info.strip().strip("[]")
            return parse_gtid_set(text, flavor)
        if ev.type == "Gtid" or ev.file != file:
            break
    return parse_gtid_set("", flavor)


def gtid_state_at(
    conn: Any,
    version: ServerVersion,
    offset: BinlogOffset,
    walk: EventWalk | None = None,
    known: BinlogOffset | None = None,
) -> str | None:
    """The GTID state at ``offset`` (a transaction boundary): every transaction before it, canonical.

    MariaDB answers with ``BINLOG_GTID_POS`` (a read of the file up to the position: about 70 ms per
    370 MB here); None when the position is not an event boundary of this server's file. MySQL has
    no such function: the file's Previous_gtids plus the GTIDs before the position -- or, given
    ``known`` (an earlier boundary of the same file with its state, e.g. the last offset placed),
    that state plus the GTIDs between the two, so a stream walks each event of its binlog once.

    At the binlog's head (where a stream near the head ends most micro-batches) the server's own
    GTID state answers in three short queries instead, when nothing committed while they ran."""
    at_head = head_gtid_state(conn, version, offset)
    if at_head is not None:
        return at_head
    if version.is_mariadb:
        return binlog_gtid_pos(conn, offset)
    if walk is None:
        walk = show_events(conn, [f for f, _ in list_binlogs(conn)])
    if known is not None and known.gtid and known.file == offset.file and known.position <= offset.position:
        state, start = parse_gtid_set(known.gtid, "mysql"), known.position
    else:
        state, start = file_start_state(walk, offset.file, "mysql"), FILE_START
    for ev in walk(offset.file, start):
        if ev.file != offset.file or ev.pos >= offset.position:
            break
        gtid = event_gtid(ev, "mysql")
        if gtid:
            state = state.add(gtid)
    return str(state)


def head_gtid_state(conn: Any, version: ServerVersion, offset: BinlogOffset) -> str | None:
    """The GTID state at ``offset`` if it is the binlog's head right now, else None. MariaDB: the
    head's position between two equal reads of ``gtid_binlog_pos`` (a commit in between changes
    it); MySQL: ``Executed_Gtid_Set`` of the same status row as the position."""
    with conn.cursor() as cur:
        before = None
        if version.is_mariadb:
            cur.execute("SELECT @@global.gtid_binlog_pos")
            before = cur.fetchone()[0]
        cur.execute(version.binlog_status_sql)
        cols = [d[0] for d in cur.description]
        row = dict(zip(cols, cur.fetchone() or ()))
        if str(row.get("File")) != offset.file or int(row.get("Position") or -1) != offset.position:
            return None
        if not version.is_mariadb:
            text = row.get("Executed_Gtid_Set")
            return None if text is None else str(parse_gtid_set(text, "mysql"))
        cur.execute("SELECT @@global.gtid_binlog_pos")
        after = cur.fetchone()[0]
    if before != after:
        return None
    return str(parse_gtid_set(before.decode() if isinstance(before, bytes) else (before or ""), "mariadb"))


# --- relocation ---------------------------------------------------------------------------------


@dataclass
class Transaction:
    gtid: str
    start: BinlogOffset
    tables: list[str] = field(default_factory=list)
    statements: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Relocation:
    """Where a committed offset of ``old`` lies on ``new``, and what was passed over to get there."""

    old: ServerIdentity
    new: ServerIdentity
    committed: BinlogOffset
    offset: BinlogOffset  # on the new server, with its GTID state
    skipped: tuple[str, ...] = ()  # GTIDs before ``offset`` that the committed state lacks (no captured table)

    def describe(self) -> str:
        skipped = f"; passed over {len(self.skipped)} transaction(s) of no captured table: " if self.skipped else ""
        return (
            f"source failover: {self.old.describe()} at {self.committed} (GTID {self.committed.gtid or '-'}) -> "
            f"{self.new.describe()} at {self.offset} (GTID {self.offset.gtid or '-'}){skipped}"
            + ", ".join(self.skipped[:10])
        )


def _missing(have: GtidSet, need: GtidSet) -> str:
    """The part of ``need`` that ``have`` lacks, in words (per domain / per uuid)."""
    if isinstance(need, MariadbGtidSet):
        out = []
        h = have.domains if isinstance(have, MariadbGtidSet) else {}
        for domain, (server, seq) in sorted(need.domains.items()):
            had = h.get(domain, (0, 0))[1]
            if had < seq:
                out.append(f"domain {domain}: {domain}-{server}-{had + 1} .. {domain}-{server}-{seq}")
        return "; ".join(out)
    parts = []
    hs = have.sources if isinstance(have, MysqlGtidSet) else {}
    for key, intervals in sorted(need.sources.items()):
        held = hs.get(key, ())
        name = key[0] + (f":{key[1]}" if key[1] else "")
        for s, e in intervals:
            for a, b in _minus((s, e), held):
                parts.append(f"{name}:{a}-{b}" if a != b else f"{name}:{a}")
    return "; ".join(parts)


def _minus(interval: tuple[int, int], held: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of an inclusive interval that no held interval covers."""
    out = [interval]
    for a, b in held:
        nxt = []
        for s, e in out:
            if b < s or e < a:
                nxt.append((s, e))
                continue
            if s < a:
                nxt.append((s, a - 1))
            if b < e:
                nxt.append((b + 1, e))
        out = nxt
    return out


def _not_exact(
    old: ServerIdentity, new: ServerIdentity, committed: BinlogOffset, why: str, fix: str
) -> FailoverNotExactError:
    return FailoverNotExactError(
        f"source failover: the stream was at {committed} (GTID {committed.gtid}) of {old.describe()}; the server "
        f"it reaches now is {new.describe()}, and {why}: {NOT_EXACT_MARKER} there, so it stops without committing "
        f"anything past that point. Fix: {fix}"
    )


_REREAD = (
    "re-read the affected tables while the stream runs (the pipeline DAG's re-read of a table, or its batches "
    "cleared), or start a new initial load (trigger with reset=true)."
)


def relocate(
    conn: Any,
    version: ServerVersion,
    old: ServerIdentity,
    new: ServerIdentity,
    committed: BinlogOffset,
    captured: Callable[[str], bool],
    walk: EventWalk | None = None,
    files: Sequence[str] | None = None,
) -> Relocation:
    """Where ``committed`` (an offset of ``old`` with its GTID state) lies in the binlog of the server
    behind ``conn`` (``new``). ``captured("db.table")`` says whether a table is captured. Raises
    ``FailoverNotExactError`` when no point of the new binlog continues the stream exactly."""
    flavor = version.gtid_flavor
    if not committed.gtid:
        raise _not_exact(
            old,
            new,
            committed,
            "that offset has no GTID state recorded (it was taken before GTIDs were kept with offsets, or the old "
            "server has GTIDs off), so its place on the new server is unknown",
            _REREAD,
        )
    if new.flavor != old.flavor:
        raise _not_exact(old, new, committed, f"the new server is {new.flavor}, the old one {old.flavor}", _REREAD)
    need = parse_gtid_set(committed.gtid, flavor)
    have = server_gtid_state(conn, version)
    if not have.contains(need):
        raise _not_exact(
            old,
            new,
            committed,
            f"its binlog lacks transactions the sink already holds ({_missing(have, need)}): the replica "
            "was behind when it was promoted",
            "bring the missing transactions to the new server (from the old primary's binlog) and relaunch, or "
            + _REREAD,
        )
    if files is None:
        files = [f for f, _ in list_binlogs(conn)]
    if walk is None:
        walk = show_events(conn, files)
    start_file = None
    for name in reversed(files):
        if need.contains(file_start_state(walk, name, flavor)):
            start_file = name
            break
    if start_file is None:
        oldest = file_start_state(walk, files[0], flavor) if files else None
        raise _not_exact(
            old,
            new,
            committed,
            f"its oldest binlog file {files[0] if files else '(none)'} starts at GTID {oldest}, past the stream's "
            "position: transactions the sink has not seen were purged there",
            _REREAD,
        )
    running = file_start_state(walk, start_file, flavor)
    here = BinlogOffset(start_file, FILE_START)
    passed: list[Transaction] = []
    txn: Transaction | None = None
    last_end = here
    if not running.contains(need):
        for ev in walk(start_file, FILE_START):
            gtid = event_gtid(ev, flavor)
            if gtid is not None:
                if txn is not None and running.contains(need):
                    here = BinlogOffset(ev.file, ev.pos)
                    break
                txn = Transaction(gtid, BinlogOffset(ev.file, ev.pos))
                if not need.contains(parse_gtid_set(gtid, flavor)):
                    passed.append(txn)
                running = running.add(gtid)
            elif txn is not None:
                if ev.type == "Table_map":
                    m = _TABLE_MAP.search(ev.info)
                    if m:
                        txn.tables.append(m.group("name").replace("`", ""))
                elif ev.type == "Query" and not ev.info.strip().upper().startswith(_TXN_WORDS):
                    txn.statements.append(ev.info)
            last_end = BinlogOffset(ev.file, ev.end)
        else:
            here = last_end  # the walk reached the binlog's end: the stream continues at the head
    errant = [t for t in passed if any(captured(name) for name in t.tables) or _ddl_on_captured(t, captured)]
    if errant:
        shown = ", ".join(f"{t.gtid} at {t.start} ({', '.join(sorted(set(t.tables))) or 'DDL'})" for t in errant[:5])
        raise _not_exact(
            old,
            new,
            committed,
            f"its binlog has {len(errant)} transaction(s) before that point that the old server never had, "
            f"changing captured tables (errant transactions: {shown})",
            _REREAD,
        )
    return Relocation(
        old, new, committed, BinlogOffset(here.file, here.position, str(running)), tuple(t.gtid for t in passed)
    )


def _ddl_on_captured(txn: Transaction, captured: Callable[[str], bool]) -> bool:
    """A statement (DDL, or row changes logged as statements) naming a captured table, conservatively:
    any word of the statement that, as ``db.table`` or after ``use `db```, names one."""
    for stmt in txn.statements:
        db = None
        m = re.match(r"\s*use\s+`?([^`;\s]+)`?\s*;", stmt, re.IGNORECASE)
        if m:
            db = m.group(1)
        for word in re.findall(r"`?([\w$]+)`?(?:\.`?([\w$]+)`?)?", stmt):
            a, b = word
            if b and captured(f"{a}.{b}"):
                return True
            if not b and db and captured(f"{db}.{a}"):
                return True
    return False
