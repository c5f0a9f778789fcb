"""A partitioned Iceberg sink table on a real pyiceberg SQL catalog (SQLite) in a temporary
directory, no Spark: the spec a transform's partition_keys give it, micro-batches applied
copy-on-write against a plain reference while updates move rows between partitions, every data
file in one partition (its recorded value recomputed from its rows), a column added and a
column's type changed, a table partitioned otherwise refused, and a reset (forget_tables) that
takes a new spec."""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.transform.partitioning import parse_partition_keys
from airflow_provider_mysqlcdc.spark.sinks.base import META_OP

pytest.importorskip("pyiceberg")

from airflow_provider_mysqlcdc.spark.sinks.iceberg import partitioning as part  # noqa: E402
from airflow_provider_mysqlcdc.spark.sinks.iceberg.apply import STEP_KEY, apply_changes, with_op  # noqa: E402
from airflow_provider_mysqlcdc.spark.sinks.iceberg.sink import IcebergSink  # noqa: E402

T = TableId("shop", "events")
BASE = dt.datetime(2024, 3, 30, 22, 0, 0)


def _schema() -> TableSchema:
    cols = (
        Column("id", 1, "bigint", "bigint(20)", False),
        Column("region", 2, "varchar", "varchar(10)", True, charset="utf8mb4", char_max_length=10),
        Column("ts", 3, "timestamp", "timestamp(6)", True, datetime_precision=6),
        Column("n", 4, "int", "int(11)", True),
    )
    return TableSchema(T, cols, ("id",), ("id",), ("id",))


def _sink(tmp_path, keys: list[str]) -> IcebergSink:
    sink = IcebergSink(str(tmp_path / "wh"))
    sink.partition_tables({T: parse_partition_keys(keys)})
    sink.prepare([_schema()])
    return sink


def _change_rows(changes: list[tuple]) -> pa.Table:
    """(id, region, ts, n, op) tuples as change rows."""
    return pa.table(
        {
            "id": pa.array([c[0] for c in changes], pa.int64()),
            "region": pa.array([c[1] for c in changes], pa.string()),
            "ts": pa.array([c[2] for c in changes], pa.timestamp("us", tz="UTC")),
            "n": pa.array([c[3] for c in changes], pa.int32()),
            META_OP: pa.array([c[4] for c in changes]),
        }
    )


def _contents(sink: IcebergSink) -> dict[int, tuple]:
    got = sink.open_table(T).scan().to_arrow().to_pylist()
    out = {r["id"]: (r["region"], r["ts"].replace(tzinfo=None) if r["ts"] else None, r["n"]) for r in got}
    assert len(out) == len(got), "an identity is held twice"
    return out


def _files_in_one_partition(sink: IcebergSink) -> int:
    """Every data file's rows give one partition value, the one its manifest entry records."""
    table = sink.open_table(T)
    columns = part.PartitionColumns.of(table.spec(), table.schema())
    import pyarrow.parquet as pq

    files = [task.file for task in table.scan().plan_files()]
    for f in files:
        path = f.file_path[len("file://") :] if f.file_path.startswith("file://") else f.file_path
        values = set(columns.values(pq.read_table(path)))
        assert values == {tuple(f.partition)}, (f.file_path, values, f.partition)
    return len(files)


@pytest.mark.parametrize("keys", [["day(ts)"], ["bucket(4, id)", "region"], ["hour(ts)", "truncate(2, region)"]])
def test_micro_batches_moving_rows_between_partitions_equal_a_reference(tmp_path, keys):
    sink = _sink(tmp_path, keys)
    table = sink.open_table(T)
    assert part.describe_spec(table.spec(), table.schema()) == keys
    rng = random.Random(11)
    expected: dict[int, tuple] = {}
    regions = ["eu", "us", "apac", None]
    for batch in range(1, 10):
        changes = []
        for id_ in rng.sample(range(60), 25):
            if id_ in expected and rng.random() < 0.25:
                changes.append((id_, None, None, None, "-D"))
                del expected[id_]
                continue
            # a new region and a time up to 3 days on: updates move rows to other partitions
            row = (rng.choice(regions), BASE + dt.timedelta(hours=rng.randrange(72)), batch)
            changes.append((id_, *row, "+U" if id_ in expected else "+I"))
            expected[id_] = row
        t = sink.open_table(T)
        apply_changes(t, sink._schemas[T], with_op(t, _change_rows(changes)), {STEP_KEY: str(batch)})
        assert _contents(sink) == expected, f"after micro-batch {batch}"
    assert _files_in_one_partition(sink) > 1
    keys_read = sink.keys_in_sink(_schema())
    assert sorted(keys_read.column("id").to_pylist()) == sorted(expected)
    # the consistency check reads the keys as of the last micro-batch it names (steps are micro-batch 0 here)
    checked, _ = sink.consistency_keys(_schema(), 0)
    assert sorted(checked.column("id").to_pylist()) == sorted(expected)


def test_a_column_added_and_a_type_changed_keep_the_files_partitioned(tmp_path):
    from airflow_provider_mysqlcdc.cdc.schema import behavior as B

    sink = _sink(tmp_path, ["day(ts)", "region"])
    rows = [(i, ["eu", "us"][i % 2], BASE + dt.timedelta(hours=5 * i), i, "+I") for i in range(20)]
    t = sink.open_table(T)
    apply_changes(t, sink._schemas[T], with_op(t, _change_rows(rows)), {STEP_KEY: "1"})

    class Action:  # the parts of a schema action the sink reads
        kind = B.ADD_COLUMN
        column = Column("note", 5, "varchar", "varchar(5)", True, charset="utf8mb4", char_max_length=5)
        fill = "x"
        copy_from = None
        refill = False
        name = "note"

        def describe(self) -> str:
            return "add column note"

    class Step:
        sink_before = _schema()
        sink_after = TableSchema(T, (*_schema().columns, Action.column), ("id",), ("id",), ("id",))

    sink._apply_action(sink.open_table(T), Step(), Action(), {STEP_KEY: "2"})
    got = sink.open_table(T).scan().to_arrow()
    assert got.num_rows == 20 and set(got.column("note").to_pylist()) == {"x"}
    assert _files_in_one_partition(sink) >= 2

    with pytest.raises(ConfigError, match="partition column ts"):
        sink._change_type(sink.open_table(T), T, type("A", (), {"name": "ts"})(), pa.string(), {STEP_KEY: "3"})


def test_an_existing_table_partitioned_otherwise_is_refused_until_reset(tmp_path):
    _sink(tmp_path, ["day(ts)"])
    other = IcebergSink(str(tmp_path / "wh"))
    other.partition_tables({T: parse_partition_keys(["month(ts)"])})
    with pytest.raises(ConfigError, match=r"partitioned by \[day\(ts\)\].*reset=true.*drop partition_keys"):
        other.prepare([_schema()])
    plain = IcebergSink(str(tmp_path / "wh"))
    with pytest.raises(ConfigError, match=r"no partition_keys.*set partition_keys"):
        plain.prepare([_schema()])
    # a reset drops the table: prepared again, it takes the new spec
    assert other.forget_tables([T])
    other.prepare([_schema()])
    table = other.open_table(T)
    assert part.describe_spec(table.spec(), table.schema()) == ["month(ts)"]


@pytest.mark.parametrize(
    "keys,message",
    [
        (["bucket(4, nope)"], "nope, which the table does not have"),
        (["day(n)"], "no day over n's type int"),
    ],
)
def test_a_spec_the_table_cannot_take_is_refused_before_it_is_created(tmp_path, keys, message):
    sink = IcebergSink(str(tmp_path / "wh"))
    sink.partition_tables({T: parse_partition_keys(keys)})
    with pytest.raises(ConfigError, match=message):
        sink.prepare([_schema()])
    assert not sink.catalog.table_exists(("shop", "events"))


def test_a_sink_that_does_not_partition_refuses_partition_keys():
    from airflow_provider_mysqlcdc.spark.sinks.console.sink import ConsoleSink

    with pytest.raises(ConfigError, match="does not partition.*use the iceberg sink"):
        ConsoleSink().partition_tables({T: parse_partition_keys(["day(ts)"])})
    ConsoleSink().partition_tables({T: ()})


def test_compaction_keeps_each_file_in_one_partition(tmp_path):
    """Maintenance on a partitioned table: each partition's small files become one, every file
    still within one partition, the rows unchanged."""
    from airflow_provider_mysqlcdc.spark.sinks.iceberg.maintenance import MaintenancePolicy, maintain

    sink = _sink(tmp_path, ["day(ts)", "bucket(2, id)"])
    rng = random.Random(3)
    expected: dict[int, tuple] = {}
    for batch in range(1, 9):
        changes = []
        for id_ in rng.sample(range(40), 10):
            row = (None, BASE + dt.timedelta(hours=rng.randrange(48)), batch)
            changes.append((id_, *row, "+U" if id_ in expected else "+I"))
            expected[id_] = row
        t = sink.open_table(T)
        apply_changes(t, sink._schemas[T], with_op(t, _change_rows(changes)), {STEP_KEY: str(batch)})
    before = _files_in_one_partition(sink)
    partitions = {tuple(task.file.partition) for task in sink.open_table(T).scan().plan_files()}
    report = maintain(sink.open_table(T), MaintenancePolicy(min_files=2, snapshot_max_age_s=0, retain_last=1))
    after = _files_in_one_partition(sink)
    assert report.partitions_compacted >= 1 and after < before and after >= len(partitions)
    assert _contents(sink) == expected
