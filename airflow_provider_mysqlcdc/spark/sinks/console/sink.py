"""Console sink: prints every event, one per line, like Flink CDC's values sink.

    +I shop.orders {"id":1,"amount":"9.99","ts":"2024-01-01T00:00:00.000000"}
    -U shop.orders {"id":1,...}
    +U shop.orders {"id":1,...}

For debugging only: it brings every row it prints to the driver, so use it on small tables
or rate-limited streams. Values use the changelog sink's JSON encoding. Snapshot rows print
as +I; stream changes in binlog order, encoded by the source's tasks (``console/direct.py``),
with a schema change as ``SC db.t {"ddl": ..., "actions": [...]}`` in its place.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence, TextIO

import pyarrow as pa
from pyspark.sql import DataFrame

from ....cdc.chunks import KeyRange
from ....cdc.model import TableId, TableSchema
from ..base import META_OP, META_SEQ, Sink, SnapshotWrite
from ..files.arrow import spark_col
from ..json_values import data_dicts, dumps


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
            batch_ops = ops[n : n + batch.num_rows] if ops is not None else None
            for i, data in enumerate(data_dicts(batch, schema.column_names)):
                out.write(f"{batch_ops[i] if batch_ops else '+I'} {name} {dumps(data)}\n")
            n += batch.num_rows
        out.flush()
        return n

    def write_snapshot(
        self, schema: TableSchema, frame: DataFrame, ranges: Sequence[KeyRange], batch_id: str
    ) -> SnapshotWrite:
        table = frame.select(*[spark_col(c) for c in schema.column_names]).toArrow()
        return SnapshotWrite(self._print(schema, table, None), {"batch": batch_id})

    # --- stream: the source's tasks encode the lines (console/direct.py) -----------------------

    def direct_write(self) -> Any:
        from .direct import ConsoleLines

        return ConsoleLines()

    def schema_capabilities(self) -> frozenset[str]:
        from ....cdc.schema.behavior import ACTION_KINDS

        return frozenset(ACTION_KINDS)  # it prints what happened

    def publish_steps(self, table_id: TableId, steps: Sequence[Any], batch_id: int) -> int:
        """Print the table's changes and schema changes of the micro-batch in binlog order."""
        import json

        from ....cdc.schema.steps import RowsStep

        out = self.stream
        name = str(table_id)
        changes = 0
        for step in steps:
            if not isinstance(step, RowsStep):
                body = {"ddl": step.ddl, "actions": [a.describe() for a in step.actions]}
                out.write(f"SC {name} {json.dumps(body, ensure_ascii=False)}\n")
                continue
            for r in sorted(step.records, key=lambda r: r["first_seq"]):
                for line in bytes(r["payload"]).decode("utf-8").splitlines():
                    row = json.loads(line)
                    out.write(f"{row['op']} {name} {dumps(row['data'])}\n")
            changes += step.changes
        out.flush()
        return changes

    def write_changes(self, schema: TableSchema, changes: DataFrame, batch_id: int) -> None:
        table = (
            changes.select(*[spark_col(c) for c in schema.column_names], META_OP, META_SEQ).orderBy(META_SEQ).toArrow()
        )
        self._print(schema, table, table.column(META_OP).to_pylist())
