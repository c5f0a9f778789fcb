"""Batch corrections (design.md section 3, step 4): the backfill window reduced to the last change per key.

A batch's SELECTs each saw the table at some moment inside [LW, HW]. Replaying the binlog
window over them converges on the table as of HW: a key no event touched is already right;
a key that was touched ends as its last event says. So the window is reduced to, per table,

* ``deleted`` -- identity keys whose final state in the window is "absent", and
* ``upserts`` -- identity key -> last after-image,

and the snapshot rows are corrected as ``rows - (deleted | upserts.keys()) + upserts.values()``
(in Spark: an anti-join on ``drop_keys`` plus a union of ``upserts``).

Only keys inside the batch's key range count: a row whose chunk key lies outside belongs to
another batch, which replays its own window. An UPDATE is therefore a delete of the before
image plus an insert of the after image, each kept only if *its* chunk key is in range: a
key moved between chunks ends up in the right one only, and an UPDATE that keeps its key is
simply a delete immediately overwritten by the insert.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol, Sequence

from ..chunks import Batch, Key, KeyRange
from ..errors import SchemaMismatchError
from ..events import RowChange
from ..model import TableId, TableSchema


class KeyOrderLike(Protocol):
    """The server-consistent key comparison (``cdc.snapshot.keyorder.KeyOrder``)."""

    def contains(self, start: Key | None, end: Key | None, includes_null: bool, key: Key) -> bool: ...

    def sort_key(self, key: Key) -> Any: ...


@dataclass
class TableCorrections:
    """What to change in one table's snapshot rows so they equal the table at HW."""

    deleted: set[Key] = field(default_factory=set)
    upserts: dict[Key, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def drop_keys(self) -> set[Key]:
        """Every identity key whose snapshot row must go (the anti-join side)."""
        return self.deleted | set(self.upserts)

    def __bool__(self) -> bool:
        return bool(self.deleted or self.upserts)

    def delete(self, key: Key) -> None:
        self.upserts.pop(key, None)
        self.deleted.add(key)

    def upsert(self, key: Key, row: Mapping[str, Any]) -> None:
        self.deleted.discard(key)
        self.upserts[key] = row


def key_of(row: Mapping[str, Any], columns: tuple[str, ...], table_id: TableId) -> Key:
    """The tuple of ``columns`` of a row image; a missing column means the schema is stale."""
    try:
        return tuple(row[c] for c in columns)
    except KeyError as e:
        raise SchemaMismatchError(
            f"a binlog row of {table_id} has no column {e.args[0]!r} (it has {sorted(row)}): the table "
            "changed since its schema was read. Fix: snapshot the table again after the schema change."
        ) from None


class _TableReducer:
    """Applies one table's changes, in order, to its ``TableCorrections``."""

    def __init__(self, schema: TableSchema, key_range: KeyRange, key_order: KeyOrderLike) -> None:
        self.schema = schema
        self.range = key_range
        self.order = key_order
        self.out = TableCorrections()

    def _in_range(self, row: Mapping[str, Any]) -> bool:
        r = self.range
        chunk_key = key_of(row, self.schema.chunk_key, self.schema.table_id)
        return self.order.contains(r.start, r.end, r.includes_null, chunk_key)

    def _identity(self, row: Mapping[str, Any]) -> Key:
        return key_of(row, self.schema.row_identity, self.schema.table_id)

    def remove(self, row: Mapping[str, Any]) -> None:
        if self._in_range(row):
            self.out.delete(self._identity(row))

    def add(self, row: Mapping[str, Any]) -> None:
        if self._in_range(row):
            self.out.upsert(self._identity(row), row)

    def apply(self, change: RowChange) -> None:
        if change.before is not None and change.kind in ("update", "delete"):
            self.remove(change.before)
        if change.after is not None and change.kind in ("update", "insert"):
            self.add(change.after)


def reduce_changes(
    changes: Iterable[RowChange],
    batch: Batch,
    schemas: Mapping[TableId, TableSchema],
    key_orders: Mapping[TableId, KeyOrderLike],
) -> dict[TableId, TableCorrections]:
    """Reduce a batch's backfill window to its corrections, one entry per table of the batch.

    ``changes`` may hold other tables, other key ranges and non-row events; they are ignored.
    They are processed in offset order whatever order they come in.
    """
    reducers = {r.table_id: _TableReducer(schemas[r.table_id], r, key_orders[r.table_id]) for r in batch.ranges()}
    relevant = [c for c in changes if isinstance(c, RowChange) and c.table_id in reducers]
    relevant.sort(key=lambda c: c.offset.sort_key())
    warm_key_orders(relevant, schemas, key_orders)
    for c in relevant:
        reducers[c.table_id].apply(c)
    return {t: r.out for t, r in reducers.items()}


def warm_key_orders(
    changes: Sequence[RowChange], schemas: Mapping[TableId, TableSchema], key_orders: Mapping[TableId, KeyOrderLike]
) -> None:
    """Order every key of ``changes`` up front, a table at a time. A key order that asks the server
    (string keys in a collation Python cannot reproduce) then fetches weights a few hundred keys per
    round-trip and answers the range checks from its cache, instead of one round-trip per key."""
    keys: dict[TableId, list[Key]] = {}
    for c in changes:
        out = keys.setdefault(c.table_id, [])
        columns = schemas[c.table_id].chunk_key
        for image in (c.before, c.after):
            if image is not None:
                out.append(key_of(image, columns, c.table_id))
    for t, ks in keys.items():
        many = getattr(key_orders[t], "sort_keys", None)
        if callable(many) and getattr(key_orders[t], "needs_server", False):
            many(ks)
