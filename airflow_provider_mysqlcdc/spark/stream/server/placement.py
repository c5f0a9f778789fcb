"""Which server the stream's offsets belong to, and their place on the server reachable now.

The driver side of ``cdc/binlog/failover.py``. Every end offset the source hands Spark is *placed*: marked
with the identity of the server it was computed on and the GTID state at it. Every offset Spark
hands back (a micro-batch's start, a replayed range) is *resolved*: when the server behind the
endpoint is another one (a promoted replica), the offset is found again in that server's binlog by
its GTID state, once, logged (old server/offset -> new) and recorded in the state location
(``stream/failovers.json``). The snapshot's high watermarks, which the handoff filter compares row
offsets with, are placed on the new server the same way (or dropped once the stream is past them).

An offset with no server (a checkpoint from before offsets carried one) is read as before, on
whatever server answers: there is nothing to compare it with.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Iterator

from ....cdc.binlog.failover import (
    FailoverNotExactError,
    ServerIdentity,
    gtid_state_at,
    relocate,
    server_identity,
)
from ....cdc.chunks import FinishedBatch
from ....cdc.errors import NOT_EXACT_MARKER
from ....cdc.model import TableId
from ....cdc.offsets import BinlogOffset
from ....cdc.source.gtid import parse_gtid_set
from ....cdc.source.version import ServerVersion
from ..offsets.stream_offset import StreamOffset
from ..settings import StreamSettings

log = logging.getLogger(__name__)

FAILOVERS_FILE = "stream/failovers.json"
_KEPT_RECORDS = 50


class Placement:
    """The driver's memory of relocated offsets and placed watermarks (per server it has seen)."""

    def __init__(self, settings: StreamSettings) -> None:
        self.settings = settings
        self._moved: dict[tuple[str, str], StreamOffset] = {}  # (offset text, server) -> placed there
        self._handoffs: dict[str, tuple[FinishedBatch, ...]] = {}  # server -> watermarks placed there
        self._known: dict[str, None] = {}  # offsets placed or checked on their server by this driver (recent)
        self._last_placed: StreamOffset | None = None  # MySQL: the next placement walks on from here

    @contextlib.contextmanager
    def _server(self) -> Iterator[tuple[Any, ServerVersion, ServerIdentity]]:
        from ....cdc.source.server import server_version

        conn = self.settings.source.connect_binlog()
        try:
            version = server_version(conn)
            yield conn, version, server_identity(conn, version)
        finally:
            conn.close()

    def _captured(self, name: str) -> bool:
        db, _, table = name.partition(".")
        tid = TableId(db, table)
        return tid in set(self.settings.tables) or self.settings.new_table(tid)

    # --- offsets --------------------------------------------------------------------------------

    def place(self, off: StreamOffset, expect: str | None) -> StreamOffset | None:
        """``off`` (computed on ``expect``) marked with its server and GTID state; None when the
        server behind the endpoint is no longer ``expect`` (the caller then makes no progress, and
        its next call resolves the start on the new server)."""
        with self._server() as (conn, version, ident):
            if expect is not None and str(ident) != expect:
                log.warning("binlog stream: the source server changed while planning (%s -> %s)", expect, ident)
                return None
            last = self._last_placed if self._last_placed and self._last_placed.server == str(ident) else None
            known = BinlogOffset(last.dump_from.file, last.dump_from.position, last.at.gtid) if last else None
            gtid = gtid_state_at(conn, version, off.dump_from, known=known)
        placed = off.placed(gtid, str(ident))
        self._remember(placed)
        if gtid is not None:
            self._last_placed = placed
        return placed

    def _remember(self, off: StreamOffset) -> None:
        self._known[_text(off)] = None
        while len(self._known) > 64:
            del self._known[next(iter(self._known))]

    def forget(self, off: StreamOffset) -> None:
        """Check ``off`` against its server again at the next ``resolve`` (the binlog went backwards)."""
        self._known.pop(_text(off), None)

    def resolve(self, off: StreamOffset) -> tuple[StreamOffset, str]:
        """``off`` on the server reachable now, and that server's identity."""
        with self._server() as (conn, version, ident):
            here = str(ident)
            if off.server is None:
                return off, here
            key = (str(off.to_dict()), here)
            if off.server == here:
                if _text(off) in self._known or not off.at.gtid or self._still_there(conn, version, off):
                    self._remember(off)
                    return off, here
                # The same server, but its binlog no longer holds this offset as it was (RESET MASTER, a
                # restored backup). Not placed by GTID either: a reset server numbers its transactions from 1
                # again, so the old GTIDs name new transactions.
                raise FailoverNotExactError(
                    f"the source's binlog was reset or replaced: {ident.describe()} no longer has the stream's "
                    f"offset {off} (GTID {off.at.gtid}) as it was, and after a reset the server numbers its "
                    f"transactions from 1 again, so neither the position nor the GTID finds the stream's place: "
                    f"{NOT_EXACT_MARKER} there. Fix: start a new initial load (trigger with reset=true)."
                )
            if key in self._moved:
                return self._moved[key], here
            old = ServerIdentity.parse(off.server)
            if off.txn_start is not None or off.at.row:
                raise FailoverNotExactError(
                    f"source failover: the stream was inside a transaction larger than max_events_per_batch "
                    f"({off} on {old.describe()}) when the server changed to {ident.describe()}; a place inside "
                    f"a transaction cannot be found again by GTID: {NOT_EXACT_MARKER} there. Fix: re-read the "
                    "captured tables while the stream runs, or start a new initial load (trigger with reset=true)."
                )
            began = time.monotonic()
            at = BinlogOffset(off.dump_from.file, off.dump_from.position, off.at.gtid)  # the GTID is dump_from's
            moved = relocate(conn, version, old, ident, at, self._captured)
        placed = StreamOffset.boundary(moved.offset, here)
        self._moved[key] = placed
        log.warning("%s (found in %.2f s)", moved.describe(), time.monotonic() - began)
        self._record(
            {
                "at": round(time.time(), 3),
                "old_server": str(old),
                "old_offset": off.to_dict(),
                "new_server": here,
                "new_offset": placed.to_dict(),
                "skipped": list(moved.skipped),
            }
        )
        return placed, here

    def _still_there(self, conn: Any, version: ServerVersion, off: StreamOffset) -> bool:
        """Whether the server's binlog still has ``off`` where it was: the GTID state there is the same."""
        now = gtid_state_at(conn, version, off.dump_from)
        flavor = version.gtid_flavor
        return now is not None and parse_gtid_set(now, flavor) == parse_gtid_set(off.at.gtid, flavor)

    def _record(self, entry: dict) -> None:
        from ....cdc.state import StateStore

        try:
            store = StateStore(self.settings.state_location)
            kept = store.read_json(FAILOVERS_FILE) if store.exists(FAILOVERS_FILE) else []
            store.write_json(FAILOVERS_FILE, [*kept, entry][-_KEPT_RECORDS:])
        except Exception as e:  # a record for people; the stream itself does not depend on it
            log.warning("could not record the failover in %s: %s", FAILOVERS_FILE, e)

    # --- the handoff's watermarks ---------------------------------------------------------------

    def handoff(self, server: str, start: StreamOffset) -> tuple[FinishedBatch, ...] | None:
        """The finished batches' high watermarks placed on ``server`` for a range from ``start``;
        None when they are all of that server (or of no recorded server): use them as they are."""
        finished = self.settings.finished
        if all(b.server in (None, server) for b in finished):
            return None
        if server in self._handoffs:
            return self._handoffs[server]
        at = parse_gtid_set(start.at.gtid, _flavor(server)) if start.at.gtid else None
        placed: list[FinishedBatch] = []
        with self._server() as (conn, version, ident):
            for b in finished:
                hw = b.high_watermark
                if b.server in (None, server):
                    placed.append(b)
                    continue
                if at is not None and hw.gtid and at.contains(parse_gtid_set(hw.gtid, version.gtid_flavor)):
                    continue  # the stream is past this watermark: no row of a range from here is before it
                assert b.server is not None
                moved = relocate(conn, version, ServerIdentity.parse(b.server), ident, hw, self._captured)
                log.info("snapshot batch %s: high watermark %s placed at %s", b.batch_id, hw, moved.offset)
                placed.append(FinishedBatch(b.batch_id, b.ranges, moved.offset, str(ident)))
        self._handoffs[server] = tuple(placed)
        return self._handoffs[server]


def _text(off: StreamOffset) -> str:
    return f"{off.server}|{off.at}|{off.dump_from}"


def _flavor(server: str) -> Any:
    return ServerIdentity.parse(server).flavor
