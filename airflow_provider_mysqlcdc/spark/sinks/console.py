"""Console sink: prints every event, one per line, like Flink CDC's values sink.

    +I shop.orders {"id":1,"amount":"9.99","ts":"2024-01-01T00:00:00.000000"}
    -U shop.orders {"id":1,...}
    +U shop.orders {"id":1,...}

For debugging only: it brings every row it prints to the driver (``toArrow``), so use it
on small tables or rate-limited streams. Values use the changelog sink's JSON encoding.
Snapshot rows print as +I; change rows in binlog order (``_seq``).
"""

from __future__ import annotations

import sys
from typing import Sequence, TextIO

import pyarrow as pa
from pyspark.sql import DataFrame

from ...cdc.chunks import KeyRange
from ...cdc.model import TableId, TableSchema
from .arrow_files import spark_col
from .base import META_OP, META_SEQ, Sink, SnapshotWrite
from .changelog import data_dicts, dumps


class ConsoleSink(Sink):
    """Writes ``<op> <database>.<table> <row JSON>`` lines to ``stream`` (stdout by default)."""

    name = "console"

    def __init__(self, stream: TextIO | None = None) -> None:
        # Resolved at write time when not given, so pytest's capsys and redirections apply.
        self._stream = stream

    def forget_tables(self, table_ids: Sequence[TableId]) -> list[str]:
        return []  # nothing is kept

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    def prepare(self, schemas: Sequence[TableSchema]) -> None:
        """Nothing to create."""

    def _print(self, schema: TableSchema, table: pa.Table, ops: list[str] | None) -> int:
        name = str(schema.table_id)
        n = 0
        out = self.stream
        for batch in table.to_batches():
            batch_ops = ops[n:n + batch.num_rows] if ops is not None else None
            for i, data in enumerate(data_dicts(batch, schema.column_names)):
                out.write(f"{batch_ops[i] if batch_ops else '+I'} {name} {dumps(data)}\n")
            n += batch.num_rows
        out.flush()
        return n

    def write_snapshot(self, schema: TableSchema, frame: DataFrame, ranges: Sequence[KeyRange],
                       batch_id: str) -> SnapshotWrite:
        table = frame.select(*[spark_col(c) for c in schema.column_names]).toArrow()
        return SnapshotWrite(self._print(schema, table, None), {"batch": batch_id})

    def write_changes(self, schema: TableSchema, changes: DataFrame, batch_id: int) -> None:
        table = (changes.select(*[spark_col(c) for c in schema.column_names], META_OP, META_SEQ)
                 .orderBy(META_SEQ).toArrow())
        self._print(schema, table, table.column(META_OP).to_pylist())
