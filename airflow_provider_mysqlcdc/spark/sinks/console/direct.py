"""The ``console-lines`` direct stream write: each range's changes as changelog-json lines, in memory.

The console sink prints every change. On the row path every change row went through the JVM
and the query had one shape per table; here the task that decodes a binlog range encodes its
changes itself (``json_text.ChangeLines``, the changelog's encoding) and returns them in
its records, one per table and segment between DDLs, so the console follows schema changes
like the other sinks. A debugging sink: the lines of a micro-batch come to the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pyarrow as pa

from ..direct_spec import DdlMark, DirectSpec, Segments, TableRows, columns_signature, first_at
from ..json_text import ChangeLines, joined_bytes

FIELDS = (
    ("database", pa.string()),
    ("table", pa.string()),
    ("changes", pa.int64()),
    ("lines", pa.int64()),
    ("first_seq", pa.int64()),
    ("last_seq", pa.int64()),
    ("payload", pa.binary()),
    ("columns", pa.string()),
    ("ddl", pa.string()),
    ("first_at", pa.string()),
)
SCHEMA = pa.schema([pa.field(n, t, nullable=False) for n, t in FIELDS])


@dataclass(frozen=True)
class ConsoleLines(DirectSpec):
    kind = "console-lines"

    def options(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "ConsoleLines":
        return cls()

    def arrow_schema(self) -> pa.Schema:
        return SCHEMA

    def write_range(self, items: Iterable[TableRows | DdlMark], batch_id: int, part: int) -> pa.RecordBatch:
        encoders: dict[tuple, ChangeLines] = {}
        held: dict[tuple, list[tuple[pa.Array, np.ndarray, int]]] = {}
        where: dict[tuple, str] = {}
        segments = Segments()
        records: list[dict[str, Any]] = []
        for item in items:
            if isinstance(item, DdlMark):
                segments.add(item)
                records += [
                    {
                        "database": t.database,
                        "table": t.table,
                        "changes": 0,
                        "lines": 0,
                        "first_seq": item.seq,
                        "last_seq": item.seq,
                        "payload": b"",
                        "columns": "",
                        "ddl": item.to_json(),
                        "first_at": f"{item.offset['file']}:{item.offset['position']}",
                    }
                    for t in item.tables
                ]
                continue
            t, slot, rows = item.table_id, item.slot, item.rows
            columns = columns_signature(slot.schema)
            if (t, columns) not in encoders:
                encoders[(t, columns)] = ChangeLines(t.database, t.table, slot.column, slot.schema.column_names)
            seq = rows.column("seq").to_numpy(zero_copy_only=False).astype(np.int64) * 2
            for seg, at in segments.split(t, seq):
                piece = rows if len(at) == rows.num_rows else rows.take(pa.array(at))
                lines, line_seq = encoders[(t, columns)].lines(piece, batch_id)
                key = (t, seg, columns)
                where.setdefault(key, first_at(piece))
                held.setdefault(key, []).append((lines, line_seq, piece.num_rows))
        for key, parts in held.items():
            t, _seg, columns = key
            seq = np.concatenate([s for _, s, _ in parts])
            order = np.argsort(seq, kind="stable")
            lines = pa.concat_arrays([x for x, _, _ in parts]).take(pa.array(order))
            records.append(
                {
                    "database": t.database,
                    "table": t.table,
                    "changes": sum(n for _, _, n in parts),
                    "lines": len(seq),
                    "first_seq": int(seq.min()),
                    "last_seq": int(seq.max()),
                    "payload": joined_bytes(lines),
                    "columns": columns,
                    "ddl": "",
                    "first_at": where[key],
                }
            )
        return pa.RecordBatch.from_pylist(records, schema=SCHEMA)
