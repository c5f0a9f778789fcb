"""The consistency check reads a Delta table as of a micro-batch while the stream keeps committing:
the version before the first commit of a later micro-batch, found in the table's log.

delta-rs' ``history()`` lists the newest commits on storage but numbers them down from the version
the table object was loaded at; a commit that lands between loading the table and reading its
history shifts every number by one, and the check then read one micro-batch too early (the key
matrix saw it as "source 7 rows, sink 6" under load). These tests make that commit land there."""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.spark.sinks.base import META_OP
from airflow_provider_mysqlcdc.spark.sinks.delta.sink import DeltaSink

T = TableId("shop", "orders")
SCHEMA = TableSchema(
    T,
    (Column("id", 1, "bigint", "bigint", False), Column("s", 2, "varchar", "varchar(20)", True)),
    ("id",),
    ("id",),
    ("id",),
)


def _merge(sink: DeltaSink, batch_id: int, ops: list[tuple[int, str]]) -> None:
    rows = pa.table(
        {
            "id": pa.array([k for k, _ in ops], pa.int64()),
            "s": [f"b{batch_id}" for _ in ops],
            META_OP: [o for _, o in ops],
        }
    )
    sink._merge(sink.open_table(T), SCHEMA, sink._merge_source(SCHEMA, rows), batch_id=batch_id)


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def _sink_with_batches(tmp_path) -> DeltaSink:
    sink = DeltaSink(str(tmp_path))
    sink.prepare([SCHEMA])
    _merge(sink, 0, [(1, "+I"), (2, "+I"), (3, "+I")])
    _merge(sink, 4, [(4, "+I")])
    _merge(sink, 7, [(1, "-D")])
    return sink


def test_the_keys_as_of_a_micro_batch_skip_the_later_ones(tmp_path):
    sink = _sink_with_batches(tmp_path)
    _merge(sink, 9, [(2, "-D"), (5, "+I")])
    assert _ids(sink.consistency_keys(SCHEMA, 7)[0]) == [2, 3, 4]
    assert _ids(sink.consistency_keys(SCHEMA, 8)[0]) == [2, 3, 4]
    assert _ids(sink.consistency_keys(SCHEMA, 9)[0]) == [3, 4, 5]
    assert _ids(sink.consistency_keys(SCHEMA, 4)[0]) == [1, 2, 3, 4]


def test_a_commit_landing_while_the_check_reads_the_log_does_not_shift_the_version(tmp_path, monkeypatch):
    """Micro-batch 9 commits just after the check loaded the table (at micro-batch 7's version):
    the keys as of micro-batch 8 are still micro-batch 7's, not micro-batch 4's."""
    sink = _sink_with_batches(tmp_path)
    opened = DeltaSink.open_table

    def open_then_commit(self, table_id):
        table = opened(self, table_id)
        monkeypatch.setattr(DeltaSink, "open_table", opened)
        _merge(sink, 9, [(2, "-D"), (5, "+I")])  # the stream's next commit, after the load
        return table

    monkeypatch.setattr(DeltaSink, "open_table", open_then_commit)
    keys, applied = sink.consistency_keys(SCHEMA, 8)
    assert applied == 8
    assert _ids(keys) == [2, 3, 4]
