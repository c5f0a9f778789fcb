"""The stream's source rows, columnar: one struct column per captured table, and typed change rows.

The binlog stream is one Spark source for many tables, so its schema holds every captured
table: the binlog metadata columns, ``seq``, then one column per table (``t0``, ``t1`` ...
in the order of the stream's schemas) of type ``struct<before: image, after: image>``,
where an image is the table's snapshot row type (``struct_type(map_table(schema))``). A
source row fills its own table's column and leaves the others null.

Why this shape: the fast binlog decoder (``cdc/binlog/fast``) already produces Arrow record
batches whose ``before``/``after`` columns are exactly such structs, so an executor hands
them to Spark with no per-row Python work at all (a cast and a few null columns), and
turning them into change rows is a Spark projection (``typed_changes``) that runs in the
JVM. The JSON payload this replaced cost more per row than decoding the binlog.

``seq`` orders source rows globally inside a micro-batch, and is computed from the binlog
position alone -- ``(file index - the micro-batch's first file index) << 52 | position
<< 20 | row`` -- so that parallel readers of one micro-batch, and a replay of it, give every
row the same number without talking to each other. One change becomes one change row per
op: insert -> ``+I`` (after), delete -> ``-D`` (before), update -> ``-U`` (before) then
``+U`` (after), with ``_seq = 2 * seq (+1 for +U)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ....cdc.errors import REPORT_BUG, SchemaMismatchError
from ....cdc.events import OP_DELETE, OP_INSERT, OP_UPDATE_AFTER, OP_UPDATE_BEFORE, RowChange
from ....cdc.model import TableId, TableSchema
from ....cdc.offsets import split_binlog_file
from ....cdc.source.statements import NOT_EXACT_MARKER
from ....cdc.types import ColumnMapping, map_table
from ...sinks.base import (
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
from ...types import struct_type

# Columns of the stream source, by name, so the source and the projection agree.
SRC_DATABASE = "database"
SRC_TABLE = "table"
SRC_OP = "op"  # insert | update | delete
SRC_FILE = "binlog_file"
SRC_POS = "binlog_pos"
SRC_ROW = "binlog_row"
SRC_GTID = "gtid"
SRC_TS = "event_time"
SRC_SEQ = "seq"

FILE_SHIFT = 52
POS_SHIFT = 20
MAX_FILES_PER_BATCH = 1 << (63 - 1 - FILE_SHIFT)  # 2 * seq + 1 must fit a signed 64-bit integer
MAX_ROWS_PER_EVENT = 1 << POS_SHIFT

META_SPARK_FIELDS = {
    META_OP: StringType(),
    META_DATABASE: StringType(),
    META_TABLE: StringType(),
    META_FILE: StringType(),
    META_POS: LongType(),
    META_ROW: IntegerType(),
    META_GTID: StringType(),
    META_TS: TimestampType(),
    META_SEQ: LongType(),
}

_SOURCE_META_SPARK = [
    StructField(SRC_DATABASE, StringType(), False),
    StructField(SRC_TABLE, StringType(), False),
    StructField(SRC_OP, StringType(), False),
    StructField(SRC_FILE, StringType(), False),
    StructField(SRC_POS, LongType(), False),
    StructField(SRC_ROW, IntegerType(), False),
    StructField(SRC_GTID, StringType(), True),
    StructField(SRC_TS, TimestampType(), True),
    StructField(SRC_SEQ, LongType(), False),
]


def seq_of(file: str, position: int, row: int, first_file_index: int) -> int:
    """The source row number of a change at ``file:position#row`` (see the module docstring)."""
    rel = split_binlog_file(file)[1] - first_file_index
    if not 0 <= rel < MAX_FILES_PER_BATCH or not 0 <= row < MAX_ROWS_PER_EVENT:
        raise ValueError(
            f"binlog offset {file}:{position}#{row} cannot be numbered in a micro-batch "
            f"starting at file index {first_file_index}"
        )
    return rel << FILE_SHIFT | position << POS_SHIFT | row


def offsets_of(batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(file index, position, row) of every row of a fast-decoder batch, as int64 arrays."""
    files = batch.column(SRC_FILE)
    pos = batch.column(SRC_POS).to_numpy(zero_copy_only=False).astype(np.int64)
    row = batch.column(SRC_ROW).to_numpy(zero_copy_only=False).astype(np.int64)
    uniq = pc.unique(files).to_pylist()
    if len(uniq) == 1:
        fidx = np.full(len(pos), split_binlog_file(uniq[0])[1], dtype=np.int64)
    else:
        index = {f: split_binlog_file(f)[1] for f in uniq}
        fidx = np.array([index[f] for f in files.to_pylist()], dtype=np.int64)
    return fidx, pos, row


@dataclass(frozen=True)
class _TableSlot:
    index: int
    column: str
    schema: TableSchema
    mappings: tuple[ColumnMapping, ...]
    image: pa.StructType
    pair: pa.StructType


class SourceLayout:
    """The stream source's schema for a list of captured tables, and Arrow batches in it."""

    def __init__(self, schemas: Sequence[TableSchema], server_time_zone: str = "UTC") -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.schemas = tuple(schemas)
        spark_fields = list(_SOURCE_META_SPARK)
        mappings = {}
        for i, s in enumerate(self.schemas):
            mappings[s.table_id] = tuple(map_table(s, server_time_zone))
            image = struct_type(mappings[s.table_id])
            spark_fields.append(
                StructField(
                    f"t{i}", StructType([StructField("before", image, True), StructField("after", image, True)]), True
                )
            )
        self.spark_schema = StructType(spark_fields)
        # Spark checks returned batches against exactly this Arrow schema (types and nullability)
        self.arrow_schema = to_arrow_schema(self.spark_schema, timezone="UTC")
        self.slots: dict[TableId, _TableSlot] = {}
        for i, s in enumerate(self.schemas):
            pair = self.arrow_schema.field(f"t{i}").type
            self.slots[s.table_id] = _TableSlot(i, f"t{i}", s, mappings[s.table_id], pair.field("before").type, pair)

    def slot(self, table_id: TableId) -> _TableSlot:
        try:
            return self.slots[table_id]
        except KeyError:
            raise SchemaMismatchError(f"{table_id} is not one of the stream's captured tables. {REPORT_BUG}") from None

    def _assemble(self, slot: _TableSlot, meta: list[pa.Array], before: pa.Array, after: pa.Array) -> pa.RecordBatch:
        n = len(meta[0])
        pair = pa.StructArray.from_arrays([before, after], fields=list(slot.pair))
        columns = list(meta)
        for other in self.slots.values():
            columns.append(pair if other is slot else pa.nulls(n, other.pair))
        return pa.RecordBatch.from_arrays(
            [c if c.type == f.type else c.cast(f.type) for c, f in zip(columns, self.arrow_schema)],
            schema=self.arrow_schema,
        )

    def _cast_image(self, slot: _TableSlot, image: pa.Array) -> pa.Array:
        if image.type == slot.image:
            return image
        got = [f.name for f in image.type]
        want = [f.name for f in slot.image]
        if got != want:
            raise SchemaMismatchError(
                f"{slot.schema.table_id}: the binlog has columns {got} but the stream started with {want}: the "
                "table's schema changed, and this sink's row path (the changelog's parquet format, direct_write "
                f"false) reads one shape per table for the whole query, so {NOT_EXACT_MARKER} here. Fix: use a "
                "Delta, PostgreSQL, changelog-json or console sink with its direct write (the default), which "
                "follows DDL, or reload the table (trigger the pipeline with reset=true)."
            )
        try:
            return image.cast(slot.image)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaMismatchError(
                f"{slot.schema.table_id}: binlog column types {image.type} do not convert to the stream's "
                f"{slot.image} ({e}): this sink's row path reads one shape per table for the whole query, so "
                f"{NOT_EXACT_MARKER} here. Fix: use a sink with its direct write (the default), which follows DDL, "
                "or reload the table (trigger the pipeline with reset=true)."
            ) from e

    def from_arrow(self, table_id: TableId, batch: pa.RecordBatch, first_file_index: int) -> pa.RecordBatch:
        """A fast-decoder batch (``binlog.fast.reader.batch_schema``) in the source layout."""
        slot = self.slot(table_id)
        fidx, pos, row = offsets_of(batch)
        rel = fidx - first_file_index
        if row.size and int(row.max()) >= MAX_ROWS_PER_EVENT:
            raise ValueError(f"{table_id}: a rows event with more than {MAX_ROWS_PER_EVENT} rows")
        if rel.size and (int(rel.min()) < 0 or int(rel.max()) >= MAX_FILES_PER_BATCH):
            raise ValueError(f"{table_id}: binlog files beyond the {MAX_FILES_PER_BATCH} a micro-batch may span")
        seq = pa.array((rel << FILE_SHIFT) | (pos << POS_SHIFT) | row, pa.int64())
        meta = [
            batch.column(name)
            for name in (SRC_DATABASE, SRC_TABLE, SRC_OP, SRC_FILE, SRC_POS, SRC_ROW, SRC_GTID, SRC_TS)
        ] + [seq]
        before = self._cast_image(slot, batch.column("before"))
        after = self._cast_image(slot, batch.column("after"))
        return self._assemble(slot, meta, before, after)

    def from_changes(self, changes: Sequence[RowChange], first_file_index: int) -> list[pa.RecordBatch]:
        """Row changes (canonical values, e.g. from python-mysql-replication) in the source layout."""
        by_table: dict[TableId, list[RowChange]] = {}
        for c in changes:
            by_table.setdefault(c.table_id, []).append(c)
        out = []
        for table_id, rows in by_table.items():
            slot = self.slot(table_id)
            meta = [
                pa.array([c.table_id.database for c in rows], pa.string()),
                pa.array([c.table_id.table for c in rows], pa.string()),
                pa.array([c.kind for c in rows], pa.string()),
                pa.array([c.offset.file for c in rows], pa.string()),
                pa.array([c.offset.position for c in rows], pa.int64()),
                pa.array([c.offset.row for c in rows], pa.int32()),
                pa.array([c.gtid for c in rows], pa.string()),
                pa.array(
                    [c.timestamp * 1_000_000 if c.timestamp else None for c in rows], pa.timestamp("us", tz="UTC")
                ),
                pa.array(
                    [seq_of(c.offset.file, c.offset.position, c.offset.row, first_file_index) for c in rows], pa.int64()
                ),
            ]
            out.append(
                self._assemble(
                    slot,
                    meta,
                    self._images(slot, [c.before for c in rows]),
                    self._images(slot, [c.after for c in rows]),
                )
            )
        return out

    @staticmethod
    def _images(slot: _TableSlot, images: Sequence[Mapping[str, Any] | None]) -> pa.Array:
        arrays = []
        for mp in slot.mappings:
            try:
                arrays.append(pa.array([None if img is None else img[mp.name] for img in images], mp.arrow_type))
            except KeyError:
                raise SchemaMismatchError(
                    f"{slot.schema.table_id}: a change image lacks column {mp.name!r}: the table's schema changed "
                    "since the stream started. Fix: restart the stream job so it reads the new schema."
                ) from None
        mask = pa.array([img is None for img in images], pa.bool_())
        return pa.StructArray.from_arrays(arrays, fields=list(slot.image), mask=mask)

    def tables_in(self, batch: DataFrame) -> list[TableId]:
        """The captured tables with rows in a (persisted) micro-batch."""
        return sorted(TableId(r[0], r[1]) for r in batch.select(SRC_DATABASE, SRC_TABLE).distinct().collect())


# --- Spark ------------------------------------------------------------------------------------


def change_schema(mappings: Sequence[ColumnMapping]) -> StructType:
    """The change-row type of a table: the snapshot's row type plus the META_* columns."""
    clash = [mp.name for mp in mappings if mp.name in META_SPARK_FIELDS]
    if clash:
        raise SchemaMismatchError(
            f"columns {clash} clash with the change-row metadata columns {META_COLUMNS}. Fix: leave the table "
            "out of the capture, or use the sink's direct stream write (the default, direct_write true), which "
            "does not read changes through these columns."
        )
    base = struct_type(mappings)
    return StructType(list(base.fields) + [StructField(n, META_SPARK_FIELDS[n], True) for n in META_COLUMNS])


def _op(kind: str, image: str, half: int, column: SparkColumn) -> SparkColumn:
    return F.struct(F.lit(kind).alias("op"), column.getField(image).alias("img"), F.lit(half).alias("half"))


class ChangeProjection:
    """One table's change rows (typed columns + META_*) from the stream's source rows: a filter,
    a projection and an explode, in the JVM; ordering inside the result is by ``_seq``.

    Why an object: building the column expressions takes over a thousand py4j calls (~0.2 s
    on the driver), which every micro-batch paid before; they do not depend on the batch, so
    a stream builds them once per table and applies them to each batch.
    """

    def __init__(self, layout: SourceLayout, table_id: TableId) -> None:
        slot = layout.slot(table_id)
        change_schema(slot.mappings)  # refuses column names that clash with the metadata
        pair = F.col(slot.column)
        op = F.col(SRC_OP)
        ops = (
            F.when(
                op == "update",
                F.array(_op(OP_UPDATE_BEFORE, "before", 0, pair), _op(OP_UPDATE_AFTER, "after", 1, pair)),
            )
            .when(op == "insert", F.array(_op(OP_INSERT, "after", 0, pair)))
            .otherwise(F.array(_op(OP_DELETE, "before", 0, pair)))
        )
        self.condition = (F.col(SRC_DATABASE) == table_id.database) & (F.col(SRC_TABLE) == table_id.table)
        self.exploded = [
            F.col(c) for c in (SRC_DATABASE, SRC_TABLE, SRC_FILE, SRC_POS, SRC_ROW, SRC_GTID, SRC_TS, SRC_SEQ)
        ] + [F.explode(ops).alias("_x")]
        img = F.col("_x").getField("img")
        columns = [img.getField(mp.name).alias(mp.name) for mp in slot.mappings]
        meta = {
            META_OP: F.col("_x").getField("op"),
            META_DATABASE: F.col(SRC_DATABASE),
            META_TABLE: F.col(SRC_TABLE),
            META_FILE: F.col(SRC_FILE),
            META_POS: F.col(SRC_POS),
            META_ROW: F.col(SRC_ROW),
            META_GTID: F.col(SRC_GTID),
            META_TS: F.col(SRC_TS),
            META_SEQ: F.col(SRC_SEQ) * 2 + F.col("_x").getField("half"),
        }
        self.output = columns + [meta[n].cast(META_SPARK_FIELDS[n]).alias(n) for n in META_COLUMNS]

    def apply(self, source_rows: DataFrame) -> DataFrame:
        """The change rows of ``source_rows`` (which may hold many tables)."""
        return source_rows.filter(self.condition).select(*self.exploded).select(*self.output)


def typed_changes(source_rows: DataFrame, layout: SourceLayout, table_id: TableId) -> DataFrame:
    """One table's change rows from the stream's source rows (see ``ChangeProjection``)."""
    return ChangeProjection(layout, table_id).apply(source_rows)
