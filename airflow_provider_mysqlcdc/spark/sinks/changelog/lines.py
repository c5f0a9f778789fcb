"""The changelog's lines built by Spark's JSON writer in the JVM (``JsonLines``), the metadata columns'
JSON keys and Parquet types, and a schema change as a line.

Snapshot lines, and stream lines handed over as rows (``ChangelogSink.write_changes``), are built
here; the stream's direct write builds the same bytes in Python (``json_text.py``).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DecimalType, FloatType

from ....cdc.model import TableId, TableSchema
from ..base import (
    META_COLUMNS,
    META_DATABASE,
    META_FILE,
    META_GTID,
    META_OP,
    META_POS,
    META_ROW,
    META_SEQ,
    META_TABLE,
    META_TS,
)
from ..files.arrow import (
    spark_col,
    table_arrow_schema,
)
from ..json_text import joined_bytes

# Types of the metadata columns in Parquet changelog files.
META_ARROW_TYPES = {
    META_OP: pa.string(),
    META_DATABASE: pa.string(),
    META_TABLE: pa.string(),
    META_FILE: pa.string(),
    META_POS: pa.int64(),
    META_ROW: pa.int64(),
    META_GTID: pa.string(),
    META_TS: pa.timestamp("us", tz="UTC"),
    META_SEQ: pa.int64(),
}
# JSON "meta" keys of the metadata columns (op is top-level, as in changelog-json).
META_JSON_KEYS = {
    META_DATABASE: "database",
    META_TABLE: "table",
    META_FILE: "binlog_file",
    META_POS: "binlog_pos",
    META_ROW: "binlog_row",
    META_GTID: "gtid",
    META_TS: "event_time",
    META_SEQ: "seq",
}
# Spark's JSON writer options that give the encoding above: NULLs kept as null, instants in UTC
# with "Z", wall-clock values without a zone, microseconds always printed.
SPARK_JSON_OPTIONS = {
    "ignoreNullFields": "false",
    "timeZone": "UTC",
    "dateFormat": "yyyy-MM-dd",
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}


def _json_ready(column: Column, dtype: DataType) -> Column:
    """Spark prints decimals as JSON numbers (readers would parse them into binary floats) and
    FLOAT at float precision (0.1, not the 0.10000000149011612 the value is): the changelog has
    decimals as plain strings with their scale and floats as the exact double."""
    if isinstance(dtype, DecimalType):
        return column.cast("string")
    if isinstance(dtype, FloatType):
        return column.cast("double")
    return column


class JsonLines:
    """The ``to_json`` expression of a table's lines, built by Spark's JSON writer in the JVM:
    Python never sees the rows, only the finished lines. Built once per table and column
    set: the expression takes a few hundred py4j calls, which each micro-batch paid before.

    ``op`` and each ``meta`` value (pairs of JSON key and value, in order) are a column name,
    encoded by its type (``types``) like a table column, or a Column used as it is.
    """

    def __init__(
        self,
        types: Mapping[str, DataType],
        columns: Sequence[str],
        op: str | Column,
        meta: Sequence[tuple[str, str | Column]],
    ) -> None:
        def value(v: str | Column) -> Column:
            return _json_ready(spark_col(v), types[v]) if isinstance(v, str) else v

        self.data = F.struct(*[value(c).alias(c) for c in columns]).alias("data")
        self.op = value(op).alias("op")
        self.meta = [value(v).alias(k) for k, v in meta]

    def column(self, more_meta: Sequence[tuple[str, Column]] = ()) -> Column:
        """One line per row (without the newline); ``more_meta`` go after the fixed meta keys."""
        meta = F.struct(*self.meta, *[v.alias(k) for k, v in more_meta]).alias("meta")
        return F.to_json(F.struct(self.data, self.op, meta), SPARK_JSON_OPTIONS)


def json_line_column(
    frame: DataFrame, columns: Sequence[str], op: str | Column, meta: Sequence[tuple[str, str | Column]]
) -> Column:
    """One changelog-json line per row of ``frame`` (see ``JsonLines``)."""
    return JsonLines({f.name: f.dataType for f in frame.schema}, columns, op, meta).column()


# The file schema of changelog-json writes: the finished lines.
LINES_SCHEMA = pa.schema([("line", pa.string())])
# ... of stream writes: the lines and their order.
STREAM_LINES_SCHEMA = pa.schema([("line", pa.string()), (META_SEQ, pa.int64())])


def joined_lines(batch: pa.RecordBatch) -> bytes:
    """A batch of one string column (lines without newlines) as the bytes of a text file."""
    return joined_bytes(batch.column(0))


def change_arrow_schema(schema: TableSchema, with_meta_of: Sequence[str] = META_COLUMNS) -> pa.Schema:
    """Table columns plus the metadata columns present (in base.py's order)."""
    fields = list(table_arrow_schema(schema))
    fields += [pa.field(m, META_ARROW_TYPES[m]) for m in META_COLUMNS if m in with_meta_of]
    return pa.schema(fields)


def schema_change_line(table_id: TableId, step: Any, batch_id: int) -> str:
    """A schema change as a changelog line: ``op`` "SC", the statement, what the sink did, and
    the table's columns from here on (the shape of the lines that follow)."""
    after = step.source_after
    body = {
        "ddl": step.ddl,
        "actions": [a.to_dict() for a in step.actions],
        "columns": [[c.name, c.column_type] for c in after.columns] if after is not None else None,
        "notes": list(step.notes),
    }
    meta = {
        "database": table_id.database,
        "table": table_id.table,
        "binlog_file": step.offset.get("file"),
        "binlog_pos": step.offset.get("position"),
        "seq": step.seq,
        "batch": int(batch_id),
    }
    return json.dumps({"schema_change": body, "op": "SC", "meta": meta}, separators=(",", ":"), sort_keys=False)
