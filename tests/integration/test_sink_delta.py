"""DeltaSink on real Spark (and a real MariaDB batch for the snapshot path).

Snapshot: a batch read by the consistent reader lands in Delta equal to its rows; a rerun
replaces its files (one file set per batch); batches coexist; a missing file is caught
before the commit. Stream: inserts, updates, deletes and key changes merge to the expected
state; a replayed batch id is a no-op. A Delta table of another shape is refused.
"""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.spark.sinks.base import META_COLUMNS
from airflow_provider_mysqlcdc.spark.sinks.delta.sink import DeltaSink
from airflow_provider_mysqlcdc.spark.sinks.files.arrow import MissingFilesError
from airflow_provider_mysqlcdc.spark.snapshot.batch_reader import ConsistentBatchReader
from mysqlcdc_harness.pipeline import plan_table
from mysqlcdc_harness.tables import create_int_table
from mysqlcdc_harness.verify import collect, diff, rows_by_identity

pytestmark = [pytest.mark.integration, pytest.mark.spark]

UTC = dt.timezone.utc


def delta_rows(sink: DeltaSink, table_id: TableId, identity) -> dict[tuple, dict]:
    """Test-only: read the (small) Delta table back; TIMESTAMP columns as UTC-aware datetimes."""
    return rows_by_identity(sink.open_table(table_id).to_pyarrow_table().to_pylist(), identity)


def snapshot_files(sink: DeltaSink, table_id: TableId, batch_id: str) -> list[str]:
    adds = pa.table(sink.open_table(table_id).get_add_actions())
    prefix = sink.snapshot_prefix(batch_id)
    return sorted(p for p in adds.column("path").to_pylist() if p.startswith(prefix))


@pytest.fixture
def int_table(mariadb, fresh_db):
    create_int_table(mariadb, fresh_db, 4000)
    source = mariadb.source_config()
    plan = plan_table(source, TableId(fresh_db, "orders"), chunk_size=700, chunks_per_batch=3)
    assert len(plan.batches) >= 2
    return source, plan


def test_snapshot_batches_rerun_and_coexist(int_table, spark, tmp_dir):
    source, plan = int_table
    schema, t = plan.schema, plan.schema.table_id
    sink = DeltaSink(str(tmp_dir / "delta"))
    sink.prepare([schema])
    sink.prepare([schema])  # idempotent
    reader = ConsistentBatchReader(spark, source, {t: schema})
    first, second = plan.batches[0], plan.batches[1]

    got = reader.read(first)
    expected = collect(got.frame(t), schema.row_identity)
    res = sink.write_snapshot(schema, got.frame(t), first.ranges(), first.batch_id)
    assert res.rows_written == len(expected) > 0
    assert not diff(expected, delta_rows(sink, t, schema.row_identity))
    files_run1 = snapshot_files(sink, t, first.batch_id)
    assert files_run1

    # Same batch again: same rows, and only the new run's files are referenced.
    version = sink.open_table(t).version()
    res2 = sink.write_snapshot(schema, got.frame(t), first.ranges(), first.batch_id)
    got.unpersist()
    assert res2.details["files_removed"] == len(files_run1)
    assert not diff(expected, delta_rows(sink, t, schema.row_identity))
    files_run2 = snapshot_files(sink, t, first.batch_id)
    assert len(files_run2) == res2.details["files_added"] and not set(files_run1) & set(files_run2)
    assert len({p.rsplit("/", 1)[1].split("-")[1] for p in files_run2}) == 1, "one run's file set"
    assert sink.open_table(t).version() == version + 1, "the rerun is one transaction"

    # A second batch of the same table coexists with the first.
    got2 = reader.read(second)
    expected.update(collect(got2.frame(t), schema.row_identity))
    sink.write_snapshot(schema, got2.frame(t), second.ranges(), second.batch_id)
    got2.unpersist()
    assert not diff(expected, delta_rows(sink, t, schema.row_identity))
    assert snapshot_files(sink, t, first.batch_id) == files_run2


def test_missing_file_is_detected_before_commit(spark, tmp_dir):
    schema = small_schema()
    sink = DeltaSink(str(tmp_dir / "delta"))
    sink.prepare([schema])
    frame = spark.createDataFrame(
        [(i, Decimal("1.50"), None, None, None, None, f"s{i}") for i in range(100)], sink_struct(schema)
    ).repartition(3)
    records = sink.write_snapshot_files(schema, frame, "b#1")
    assert len(records) == 3 and sum(r.num_rows for r in records) == 100
    os.remove(os.path.join(sink.table_uri(schema.table_id), records[1].path))
    version = sink.open_table(schema.table_id).version()
    with pytest.raises(MissingFilesError, match=records[1].path):
        sink.commit_snapshot(schema, "b#1", records)
    assert sink.open_table(schema.table_id).version() == version
    assert sink.open_table(schema.table_id).to_pyarrow_table().num_rows == 0


# --- stream -------------------------------------------------------------------------------------


def small_schema(table: str = "items") -> TableSchema:
    def col(name, i, data_type, column_type, nullable=True, **kw):
        return Column(name=name, ordinal=i, data_type=data_type, column_type=column_type, nullable=nullable, **kw)

    cols = (
        col("id", 1, "bigint", "bigint(20)", nullable=False),
        col("amount", 2, "decimal", "decimal(12,2)", numeric_precision=12, numeric_scale=2),
        col("big", 3, "bigint", "bigint(20) unsigned"),
        col("wall", 4, "datetime", "datetime(6)", datetime_precision=6),
        col("at", 5, "timestamp", "timestamp(6)", datetime_precision=6),
        col("raw", 6, "varbinary", "varbinary(16)", charset=None),
        col("Name", 7, "varchar", "varchar(20)", charset="utf8mb4"),
    )
    return TableSchema(TableId("shop", table), cols, ("id",), ("id",), ("id",))


def sink_struct(schema: TableSchema):
    from airflow_provider_mysqlcdc.cdc.types import map_table
    from airflow_provider_mysqlcdc.spark.types import struct_type

    return struct_type(map_table(schema, "UTC"))


def change_struct(schema: TableSchema):
    from pyspark.sql.types import (
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    meta = {"_binlog_pos": LongType(), "_binlog_row": IntegerType(), "_event_time": TimestampType(), "_seq": LongType()}
    return StructType(
        list(sink_struct(schema).fields) + [StructField(m, meta.get(m, StringType()), True) for m in META_COLUMNS]
    )


def change_rows(schema: TableSchema, changes: list[tuple[str, tuple]], start_seq: int = 0) -> list[tuple]:
    """(op, row values) -> change rows with metadata, in the given (binlog) order."""
    out = []
    for i, (op, values) in enumerate(changes):
        seq = start_seq + i
        out.append(
            values
            + (
                op,
                schema.table_id.database,
                schema.table_id.table,
                "mariadb-bin.000001",
                4 + seq * 100,
                0,
                None,
                dt.datetime(2024, 1, 1, tzinfo=UTC),
                seq,
            )
        )
    return out


def row(i: int, name: str = "x", amount: str = "1.00"):
    return (
        i,
        Decimal(amount),
        Decimal(18446744073709551615),
        dt.datetime(1999, 12, 31, 23, 59, 59, 999999),
        dt.datetime(2038, 1, 19, 3, 14, 7, 123456, tzinfo=UTC),
        b"\x00\xff" + bytes([i % 256]),
        name,
    )


def as_dict(schema: TableSchema, values: tuple) -> dict:
    return dict(zip(schema.column_names, values))


def test_write_changes_merges_and_replay_is_noop(spark, tmp_dir):
    schema = small_schema()
    t = schema.table_id
    sink = DeltaSink(str(tmp_dir / "delta"))
    sink.prepare([schema])
    initial = [row(i) for i in range(1, 6)]
    sink.write_snapshot(schema, spark.createDataFrame(initial, sink_struct(schema)), (), "snap")

    changes = [
        ("+I", row(10, "new")),  # insert
        ("-U", row(2)),
        ("+U", row(2, "upd", "2.50")),  # update in place
        ("-D", row(3)),  # delete
        ("-U", row(4)),
        ("+U", row(40, "moved")),  # key change 4 -> 40
        ("+I", row(11)),
        ("-D", row(11)),  # inserted then deleted in one batch
        ("-U", row(5)),
        ("+U", row(5, "a")),
        ("-U", row(5, "a")),
        ("+U", row(5, "b", "9.99")),
        ("-U", row(10, "new")),
        ("+U", row(10, "newer")),  # update of a row inserted in the batch
    ]
    df = spark.createDataFrame(change_rows(schema, changes), change_struct(schema)).repartition(3)
    sink.write_changes(schema, df, 0)

    expected = {
        r[0]: as_dict(schema, r)
        for r in [row(1), row(2, "upd", "2.50"), row(40, "moved"), row(5, "b", "9.99"), row(10, "newer")]
    }
    got = {k[0]: v for k, v in delta_rows(sink, t, ("id",)).items()}
    assert got == expected
    table = sink.open_table(t)
    assert table.transaction_version("mysqlcdc") == 0
    version = table.version()

    # Replay of batch 0 (even with other content) changes nothing.
    replay = spark.createDataFrame(change_rows(schema, [("-D", row(1))]), change_struct(schema))
    sink.write_changes(schema, replay, 0)
    assert sink.open_table(t).version() == version
    assert {k[0]: v for k, v in delta_rows(sink, t, ("id",)).items()} == expected

    # The next batch applies; moving a key back onto a deleted one works too.
    nxt = [("-U", row(40, "moved")), ("+U", row(3, "back")), ("-D", row(1))]
    sink.write_changes(schema, spark.createDataFrame(change_rows(schema, nxt, 100), change_struct(schema)), 1)
    del expected[40], expected[1]
    expected[3] = as_dict(schema, row(3, "back"))
    assert {k[0]: v for k, v in delta_rows(sink, t, ("id",)).items()} == expected
    assert sink.open_table(t).transaction_version("mysqlcdc") == 1


def test_schema_mismatch_is_refused(tmp_dir):
    schema = small_schema()
    root = str(tmp_dir / "delta")
    DeltaSink(root).prepare([schema])
    cols = list(schema.columns)
    cols[1] = Column("amount", 2, "decimal", "decimal(14,4)", True, numeric_precision=14, numeric_scale=4)
    cols = cols[:-1] + [Column("extra", 8, "int", "int(11)", True)]
    changed = TableSchema(schema.table_id, tuple(cols), ("id",), ("id",), ("id",))
    with pytest.raises(ConfigError) as err:
        DeltaSink(root).prepare([changed])
    msg = str(err.value)
    assert "shop.items" in msg and "'amount'" in msg and "'extra'" in msg and "'Name'" in msg


def test_concurrent_reruns_of_different_batches_all_commit(tmp_dir):
    """Mapped snapshot tasks of one table commit at the same time; reruns carry removes."""
    import threading

    import pyarrow.parquet as pq

    from airflow_provider_mysqlcdc.spark.sinks.files.arrow import FileRecord, table_arrow_schema

    schema = small_schema()
    sink = DeltaSink(str(tmp_dir / "delta"))
    sink.prepare([schema])
    arrow = table_arrow_schema(schema)
    base = sink.table_uri(schema.table_id)

    def run(batch: int, attempt: int, errors: list) -> None:
        rel = f"{sink.snapshot_prefix(f'b{batch}')}part-run{attempt}.parquet"
        os.makedirs(os.path.dirname(os.path.join(base, rel)), exist_ok=True)
        pq.write_table(
            pa.Table.from_pylist([as_dict(schema, row(batch * 10 + attempt))], arrow), os.path.join(base, rel)
        )
        try:
            sink.commit_snapshot(schema, f"b{batch}", [FileRecord(rel, os.path.getsize(os.path.join(base, rel)), 1)])
        except Exception as e:  # reported below
            errors.append(e)

    for attempt in range(3):
        errors: list = []
        threads = [threading.Thread(target=run, args=(b, attempt, errors)) for b in range(5)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors, errors
    ids = sorted(r["id"] for r in sink.open_table(schema.table_id).to_pyarrow_table().to_pylist())
    assert ids == [b * 10 + 2 for b in range(5)]


def test_spark_written_snapshot_files_have_the_arrow_writers_stats_and_read_back_equal(spark, tmp_dir):
    """The Spark Parquet writer (rows written once on a local table path): per-file stats from the
    footers equal what the Arrow writer computes from the rows (a wrong max would prune files a
    query needs), timestamps are INT64 micros, not INT96, and the committed table reads back equal."""
    import json

    import pyarrow.parquet as pq

    from airflow_provider_mysqlcdc.spark.sinks.files.arrow import StatsCollector, table_arrow_schema

    schema = small_schema()
    t = schema.table_id
    sink = DeltaSink(str(tmp_dir / "delta"))
    sink.prepare([schema])
    long_name = "n" * 40  # longer than the exact-stat limit: no min/max for the column
    rows = [row(i, name=f"name-{i:03d}" if i != 7 else long_name) for i in range(60)]
    rows[5] = (5, None, None, None, None, None, None)
    old = dt.datetime(1000, 1, 1, 0, 0, 0, 1)  # before 1582: must not be rebased to the Julian calendar
    rows[9] = rows[9][:3] + (old, dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)) + rows[9][5:]
    frame = spark.createDataFrame(rows, sink_struct(schema)).repartition(3)
    records, per_partition = sink.write_chunk_files(schema, frame, "batch-0001", 2)
    assert sum(per_partition.values()) == 60 and len(records) == 3
    assert all(r.path.startswith(sink.snapshot_prefix("batch-0001")) for r in records)
    arrow_schema = table_arrow_schema(schema)
    base = sink.table_uri(t)
    for r in records:
        f = pq.ParquetFile(os.path.join(base, r.path))
        kinds = {f.schema.column(i).name: str(f.schema.column(i).logical_type) for i in range(len(f.schema))}
        assert "Timestamp" in kinds["at"] and "isAdjustedToUTC=true" in kinds["at"], kinds["at"]
        collector = StatsCollector(arrow_schema)
        for b in f.read().cast(arrow_schema).to_batches():
            collector.add(b)
        assert json.loads(r.stats) == json.loads(collector.to_json()), r.path
    # no Spark bookkeeping files beside the data
    listed = os.listdir(os.path.join(base, records[0].path.rsplit("/", 1)[0]))
    assert sorted(listed) == sorted(r.path.rsplit("/", 1)[1] for r in records)
    sink.commit_chunk_files(spark, schema, "batch-0001", records, None, [])
    got = delta_rows(sink, t, ("id",))
    assert len(got) == 60 and got[(7,)]["Name"] == long_name and got[(5,)]["amount"] is None
    assert got[(3,)]["at"] == dt.datetime(2038, 1, 19, 3, 14, 7, 123456, tzinfo=UTC)
    assert got[(3,)]["wall"] == dt.datetime(1999, 12, 31, 23, 59, 59, 999999)
    assert got[(9,)]["wall"] == old and got[(9,)]["at"] == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)


def test_spark_written_dates_before_1582_are_not_rebased(spark, tmp_dir):
    """Spark may rebase old dates to the hybrid Julian calendar when it writes Parquet; pyarrow and
    delta-rs read the proleptic Gregorian value as stored, so the writer must not rebase."""
    schema = TableSchema(
        TableId("shop", "days"),
        (
            Column(name="id", ordinal=1, data_type="int", column_type="int(11)", nullable=False),
            Column(name="d", ordinal=2, data_type="date", column_type="date", nullable=True),
        ),
        ("id",),
        ("id",),
        ("id",),
    )
    sink = DeltaSink(str(tmp_dir / "delta"))
    sink.prepare([schema])
    days = [dt.date(1000, 1, 1), dt.date(1582, 10, 4), dt.date(1582, 10, 15), dt.date(9999, 12, 31)]
    frame = spark.createDataFrame(list(enumerate(days)), sink_struct(schema)).coalesce(1)
    records, _ = sink.write_chunk_files(schema, frame, "batch-0000", 1)
    sink.commit_chunk_files(spark, schema, "batch-0000", records, None, [])
    got = delta_rows(sink, schema.table_id, ("id",))
    assert [got[(i,)]["d"] for i in range(len(days))] == days
