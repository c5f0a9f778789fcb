"""The handoff filter: the one binlog stream after the snapshot, minus what the batches already hold.

The stream starts at the minimum high watermark over all finished batches. A batch's rows
are the table as of its HW, so an event on key k at offset o is already in the sink when
o is before the HW of the batch whose range holds k, and must be emitted when ``o >= HW``
(HW is the next write position, so an event starting exactly at HW is after it).

Per event the lookup is a bisect over the (disjoint) ranges of the table sorted by start,
compared with ``KeyOrder.sort_key`` so string keys follow the server's collation. Once o is
at or past the largest HW of the table, nothing of that table is in any batch's future and
every event is emitted without a lookup.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..chunks import FinishedBatch, Key, KeyRange
from ..events import Heartbeat, RowChange, SchemaChange
from ..model import TableId, TableSchema
from ..offsets import BinlogOffset
from .corrections import KeyOrderLike, key_of, warm_key_orders


@dataclass(frozen=True)
class _Entry:
    range: KeyRange
    high_watermark: BinlogOffset
    batch_id: str


class _TableIndex:
    """One table's finished ranges, for O(log n) "which batch holds this key"."""

    def __init__(self, entries: list[_Entry], order: KeyOrderLike) -> None:
        self.order = order
        self.entries = entries
        self.unbounded = [e for e in entries if e.range.start is None]
        bounded = [e for e in entries if e.range.start is not None]
        starts = _sort_keys(order, [e.range.start for e in bounded if e.range.start is not None])
        keyed = sorted(zip(starts, range(len(bounded)), bounded), key=lambda t: (t[0], t[1]))
        self.starts = [sk for sk, _, _ in keyed]
        self.bounded = [e for _, _, e in keyed]
        self.max_hw = max(e.high_watermark for e in entries)

    def _holds(self, e: _Entry, key: Key) -> bool:
        r = e.range
        return self.order.contains(r.start, r.end, r.includes_null, key)

    def find(self, key: Key) -> _Entry | None:
        """The finished range holding ``key``, if any."""
        if any(v is None for v in key):  # rare: only ranges with includes_null (or unbounded) hold it
            return next((e for e in self.entries if self._holds(e, key)), None)
        i = bisect.bisect_right(self.starts, self.order.sort_key(key)) - 1
        if i >= 0 and self._holds(self.bounded[i], key):
            return self.bounded[i]
        return next((e for e in self.unbounded if self._holds(e, key)), None)


def _sort_keys(order: KeyOrderLike, keys: list[Key]) -> list[Any]:
    """Sort keys of many keys, in one call when the key order offers it (one server round-trip)."""
    many = getattr(order, "sort_keys", None)
    return list(many(keys)) if callable(many) else [order.sort_key(k) for k in keys]


class HandoffFilter:
    """Decides which stream events reach the sink after the snapshot batches."""

    def __init__(
        self,
        finished: Sequence[FinishedBatch],
        key_orders: Mapping[TableId, KeyOrderLike],
        schemas: Mapping[TableId, TableSchema],
    ) -> None:
        self.schemas = schemas
        by_table: dict[TableId, list[_Entry]] = {}
        for b in finished:
            for r in b.ranges:
                by_table.setdefault(r.table_id, []).append(_Entry(r, b.high_watermark, b.batch_id))
        self._tables = {t: _TableIndex(es, key_orders[t]) for t, es in by_table.items()}
        self._start = min((b.high_watermark for b in finished), default=None)

    def close(self) -> None:
        """Release what the key orders hold (server connections for collation weights)."""
        for index in self._tables.values():
            close = getattr(index.order, "close", None)
            if callable(close):
                close()

    @property
    def start_offset(self) -> BinlogOffset | None:
        """Where the stream must start: the minimum HW over all batches (None without batches)."""
        return self._start

    def horizon(self, table_id: TableId) -> BinlogOffset | None:
        """From this offset on, every change of ``table_id`` is emitted as is (None: all of them are).

        Lets a columnar reader pass whole batches through and look up keys only for the rows
        before it."""
        index = self._tables.get(table_id)
        return index.max_hw if index is not None else None

    def _emit(self, index: _TableIndex, table_id: TableId, row: Mapping[str, Any], offset: BinlogOffset) -> bool:
        entry = index.find(key_of(row, self.schemas[table_id].chunk_key, table_id))
        return entry is None or offset >= entry.high_watermark

    def apply(self, change: RowChange | SchemaChange | Heartbeat) -> list[RowChange | SchemaChange | Heartbeat]:
        """The events to emit for ``change``: none, itself, or half of a key-changing update."""
        if not isinstance(change, RowChange):
            return [change]
        index = self._tables.get(change.table_id)
        if index is None or change.offset >= index.max_hw:
            return [change]
        t, o = change.table_id, change.offset
        if change.kind == "insert":
            assert change.after is not None  # an insert has its after image
            return [change] if self._emit(index, t, change.after, o) else []
        if change.kind == "delete":
            assert change.before is not None  # a delete has its before image
            return [change] if self._emit(index, t, change.before, o) else []
        assert change.before is not None and change.after is not None  # an update has both
        old = self._emit(index, t, change.before, o)
        new = self._emit(index, t, change.after, o)
        if old and new:
            return [change]
        if old:
            return [RowChange("delete", t, change.before, None, o, change.gtid, change.timestamp)]
        if new:
            return [RowChange("insert", t, None, change.after, o, change.gtid, change.timestamp)]
        return []

    def apply_many(
        self, changes: Sequence[RowChange | SchemaChange | Heartbeat]
    ) -> list[RowChange | SchemaChange | Heartbeat]:
        """``apply`` over a run of changes, in order. The keys still to be looked up are ordered
        first, all of a table's at once: a string key in a server collation then costs one round-trip
        per few hundred distinct keys, not one per key (about 5,000 changes/s over the network)."""
        pending = [
            c
            for c in changes
            if isinstance(c, RowChange) and c.table_id in self._tables and c.offset < self._tables[c.table_id].max_hw
        ]
        warm_key_orders(pending, self.schemas, {t: index.order for t, index in self._tables.items()})
        return [out for c in changes for out in self.apply(c)]
