"""A re-snapshot's rows as one more record of a micro-batch (``stream/tables/resnapshots.py`` makes them).

Merge-based sinks (Delta, PostgreSQL) get them as change rows in the last-change layout:
upserts of the rows exact at S and deletes of the keys the sink held in the ranges, all with
one ``_seq`` past every change of the micro-batch, so the micro-batch's reduction keeps them
as the last word on those keys and the sink's one commit replaces the ranges. The changelog
gets a part file: an ``RS`` line (batch, ranges, the offset the rows are exact at) followed
by the rows as read records, ``op`` = ``r``.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import pyarrow as pa

from ...cdc.chunks import KeyRange
from ...cdc.model import TableId, TableSchema
from .change_meta import META_OP, META_SEQ
from .direct_spec import columns_signature

# Sorts after every change of a micro-batch: ``_seq`` is twice a binlog place numbered from the
# micro-batch's first file (file << 52 | position << 20 | row), below 2**62 while a micro-batch
# spans fewer than 512 binlog files (its byte bounds keep it to a few).
RESNAPSHOT_SEQ = 1 << 62


def replacement_table(image: pa.StructType, rows: pa.Table, gone: pa.Table | None, seq: int) -> pa.Table:
    """Upserts of ``rows`` and deletes of ``gone`` as change rows of ``image``'s columns (``_op``,
    ``_seq``), for a merge-based sink's last-change reduction."""
    fields = list(image)
    cols = {}
    for f in fields:
        up = rows.column(f.name).cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
        down = (
            gone.column(f.name).cast(f.type)
            if gone is not None and f.name in gone.column_names
            else pa.nulls(gone.num_rows if gone is not None else 0, f.type)
        )
        cols[f.name] = pa.concat_arrays([_one_chunk(up), _one_chunk(down)])
    n_up, n_down = rows.num_rows, gone.num_rows if gone is not None else 0
    cols[META_OP] = pa.array(["+I"] * n_up + ["-D"] * n_down, pa.string())
    cols[META_SEQ] = pa.array([seq] * (n_up + n_down), pa.int64())
    return pa.table(cols)


def _one_chunk(a: Any) -> pa.Array:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def record_base(table_id: TableId, schema: TableSchema, seq: int, where: str) -> dict[str, Any]:
    return {
        "database": table_id.database,
        "table": table_id.table,
        "first_seq": seq,
        "last_seq": seq,
        "columns": columns_signature(schema),
        "ddl": "",
        "first_at": where,
    }


_INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})


def integer_bounds(schema: TableSchema, r: KeyRange | None) -> tuple[str, int | None, int | None] | None:
    """(column, start, end) when ``r`` is a range of one integer chunk-key column without NULLs: a
    sink can then read only that range's keys (numbers compare alike everywhere). None: read
    them all, the caller filters by the server's order (collations)."""
    if r is None or r.includes_null or len(schema.chunk_key) != 1:
        return None
    col = schema.chunk_key[0]
    if schema.column(col).data_type.lower() not in _INTEGER_TYPES:
        return None
    lo, hi = (r.start or (None,))[0], (r.end or (None,))[0]
    if not all(v is None or isinstance(v, int) for v in (lo, hi)):
        return None
    return col, lo, hi


def last_change_record(
    schema: TableSchema, image: pa.StructType, rows: pa.Table, gone: pa.Table | None, info: Mapping[str, Any], seq: int
) -> dict[str, Any]:
    """A last-change record (``last_change.RECORD_FIELDS``) of the replacement."""
    from .last_change import to_ipc

    table = replacement_table(image, rows, gone, seq)
    return {
        **record_base(schema.table_id, schema, seq, f"re-snapshot {info['handoff']}"),
        "changes": 0,
        "rows": table.num_rows,
        "payload": to_ipc(table),
    }


def resnapshot_lines(
    table_id: TableId, rows: pa.Table, r: KeyRange, info: Mapping[str, Any], batch_id: int, schema_id: str
) -> list[str]:
    """The changelog's lines for a re-snapshot of one range: the ``RS`` line, then one ``r`` line per
    row, encoded column at a time (``json_text.json_texts``: the stream's own encoding)."""
    from .json_text import concat_texts, json_string, json_texts

    meta = {"database": table_id.database, "table": table_id.table, "batch": int(batch_id)}
    head = {
        "resnapshot": {
            "batch": info["batch"],
            "handoff": info["handoff"],
            "ranges": [r.to_dict()],
            "exact_at": info["exact_at"],
            "rows": rows.num_rows,
        },
        "op": "RS",
        "meta": meta,
    }
    lines = [json.dumps(head, separators=(",", ":"))]
    if rows.num_rows == 0:
        return lines
    pieces: list[Any] = []
    for i, name in enumerate(rows.column_names):
        pieces += [('{"data":{' if i == 0 else ",") + json_string(name) + ":", json_texts(rows.column(name))]
    tail = json.dumps({**meta, "resnapshot": info["handoff"], "schema_id": schema_id}, separators=(",", ":"))
    pieces.append('},"op":"r","meta":' + tail + "}")
    return lines + concat_texts(pieces).to_pylist()
