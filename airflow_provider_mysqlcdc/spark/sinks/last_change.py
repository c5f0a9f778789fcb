"""The ``last-change`` direct stream write: each range reduced to the last change per row identity.

A merge-based sink (Delta) applies only the last change of each row identity in a
micro-batch. On the row path Spark computed that with a window over every change row of the
batch (a shuffle of all of them through the JVM). Here the task that decodes a binlog range
reduces its own changes in Arrow (``change_arrow.last_per_identity``) and returns only those
rows, as Arrow IPC inside its record; the driver reduces the ranges' rows again (the highest
``_seq`` per identity over all ranges is the highest of the ranges' highest) and merges.

A range's rows are bounded by its changes, as the row path's reduced batch was; a workload
that updates few keys often (counters, queues) sends a few rows per range instead of all
its changes. Nothing is written by the tasks, so a failed or replayed attempt leaves nothing
behind; exactly once is the sink's business, as on the row path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa

from ...cdc.model import TableSchema
from .change_arrow import OP_ARRAY, explode_changes, last_per_identity
from .change_meta import META_OP, META_SEQ
from .direct_spec import DdlMark, DirectSpec, Segments, TableRows, columns_signature, first_at

RECORD_FIELDS = (
    ("database", pa.string()),
    ("table", pa.string()),
    ("changes", pa.int64()),
    ("rows", pa.int64()),
    ("first_seq", pa.int64()),
    ("last_seq", pa.int64()),
    ("payload", pa.binary()),
    ("columns", pa.string()),
    ("ddl", pa.string()),
    ("first_at", pa.string()),
)
RECORD_SCHEMA = pa.schema([pa.field(n, t, nullable=False) for n, t in RECORD_FIELDS])

# Reduce a range's accumulated rows again once they pass this many (bounds a task's memory).
_COMPACT_ROWS = 1 << 18


def change_table(changes: Any, names: Sequence[str]) -> pa.Table:
    """Change rows (``change_arrow.ArrowChanges``) as a table: the columns, ``_op``, ``_seq``."""
    columns = dict(zip(names, changes.images.flatten()))
    columns[META_OP] = OP_ARRAY.take(pa.array(changes.op_code))
    columns[META_SEQ] = pa.array(changes.seq, pa.int64())
    return pa.table(columns)


class _Reduced:
    """One table's reduced rows of a range, compacted as they grow."""

    def __init__(self, identity: Sequence[str]) -> None:
        self.identity = tuple(identity)
        self.pieces: list[pa.Table] = []
        self.rows = 0
        self.changes = 0
        self.first_seq: int | None = None
        self.last_seq: int | None = None

    def add(self, rows: pa.Table, changes: int) -> None:
        seq = rows.column(META_SEQ).to_numpy()
        lo, hi = int(seq.min()), int(seq.max())
        self.first_seq = lo if self.first_seq is None else min(self.first_seq, lo)
        self.last_seq = hi if self.last_seq is None else max(self.last_seq, hi)
        self.changes += changes
        piece = last_per_identity(rows, self.identity, META_SEQ)
        self.pieces.append(piece)
        self.rows += piece.num_rows
        if self.rows > _COMPACT_ROWS and len(self.pieces) > 1:
            self.pieces = [self.result()]
            self.rows = self.pieces[0].num_rows

    def result(self) -> pa.Table:
        if len(self.pieces) == 1:
            return self.pieces[0]  # reduced when it was added
        return last_per_identity(pa.concat_tables(self.pieces), self.identity, META_SEQ)


def to_ipc(rows: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write_table(rows)
    return sink.getvalue().to_pybytes()


def from_ipc(payload: bytes) -> pa.Table:
    return pa.ipc.open_stream(payload).read_all()


@dataclass(frozen=True)
class LastChange(DirectSpec):
    """The spec: nothing to configure (the tables and their identities come with the layout)."""

    kind = "last-change"

    def options(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "LastChange":
        return cls()

    def arrow_schema(self) -> pa.Schema:
        return RECORD_SCHEMA

    def write_range(self, items: Iterable[TableRows | DdlMark], batch_id: int, part: int) -> pa.RecordBatch:
        reduced: dict[tuple[Any, int, str], _Reduced] = {}
        where: dict[tuple[Any, int, str], str] = {}
        segments = Segments()
        records = []
        for item in items:
            if isinstance(item, DdlMark):
                segments.add(item)
                records += [ddl_record(t, item) for t in item.tables]
                continue
            t, slot = item.table_id, item.slot
            table = change_table(explode_changes(item.rows, slot.column), slot.schema.column_names)
            columns = columns_signature(slot.schema)
            seq = table.column(META_SEQ).to_numpy()
            for seg, rows in segments.split(t, seq):
                key = (t, seg, columns)
                if key not in reduced:
                    reduced[key] = _Reduced(slot.schema.row_identity)
                    where[key] = first_at(item.rows)
                if len(rows) == table.num_rows:
                    reduced[key].add(table, item.rows.num_rows)
                    continue
                piece = table.take(pa.array(rows))
                # a source row is one change: an update's -U and +U count once
                ops = piece.column(META_OP).to_numpy(zero_copy_only=False)
                reduced[key].add(piece, int(np.count_nonzero(ops != "-U")))
        for key, r in reduced.items():
            t, _seg, columns = key
            rows = r.result()
            records.append(
                {
                    "database": t.database,
                    "table": t.table,
                    "changes": r.changes,
                    "rows": rows.num_rows,
                    "first_seq": r.first_seq,
                    "last_seq": r.last_seq,
                    "payload": to_ipc(rows),
                    "columns": columns,
                    "ddl": "",
                    "first_at": where[key],
                }
            )
        return pa.RecordBatch.from_pylist(records, schema=RECORD_SCHEMA)


def ddl_record(table_id: Any, mark: DdlMark) -> dict[str, Any]:
    """A DDL's record for one of its tables: no rows, its place in ``first_seq``/``last_seq``."""
    return {
        "database": table_id.database,
        "table": table_id.table,
        "changes": 0,
        "rows": 0,
        "first_seq": mark.seq,
        "last_seq": mark.seq,
        "payload": b"",
        "columns": "",
        "ddl": mark.to_json(),
        "first_at": f"{mark.offset['file']}:{mark.offset['position']}",
    }


def merged_rows(schema: TableSchema, payloads: Sequence[bytes]) -> pa.Table:
    """The last change per identity over all ranges' reduced rows of one table."""
    tables = [from_ipc(p) for p in payloads]
    # one range's rows were reduced by its task already
    out = tables[0] if len(tables) == 1 else last_per_identity(pa.concat_tables(tables), schema.row_identity, META_SEQ)
    order = np.argsort(out.column(META_SEQ).to_numpy(), kind="stable")
    return out.take(pa.array(order))
