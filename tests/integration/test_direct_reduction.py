"""The direct stream write of Delta and PostgreSQL (each binlog range reduced to the last
change per key by the task that decoded it) gives the same tables as Spark's reduction of
the change rows."""

from __future__ import annotations

import contextlib
import datetime as dt
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
from airflow_provider_mysqlcdc.spark.sinks.delta.sink import DeltaSink
from airflow_provider_mysqlcdc.spark.sinks.postgres.sink import PostgresSink
from airflow_provider_mysqlcdc.spark.stream.query import start_stream
from tests.integration.test_binlog_stream import _caught_up, _config, _head, _wait
from tests.integration.test_types_roundtrip import DDL, ROWS

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _workload(mariadb, db: str) -> None:
    """Every mapped type, NULLs, key changes, deletes and re-inserts, many updates of few rows
    (so ranges reduce), and a table without a key (its identity is every column, -0.0 in it)."""
    mariadb.execute(DDL, database=db)
    mariadb.execute("CREATE TABLE nokey (a INT, f DOUBLE, s VARCHAR(10))", database=db)
    stmts = ["SET SESSION sql_mode = ''"] + [f"INSERT INTO t VALUES {r}" for r in ROWS]
    stmts += ["INSERT INTO nokey VALUES (1, -0.0, 'a'), (2, 0.5, NULL), (3, NULL, 'c')"]
    for i in range(1200):  # ~5 MB of binlog: several catch-up micro-batches of two ranges
        stmts.append(
            f"UPDATE t SET tx = '{'x' * 2000}{i}', i = {i}, dt6 = '2026-01-01 00:00:00.{i:06d}' WHERE id = {3 + i % 2}"
        )
        if i == 400:
            stmts += [
                "UPDATE t SET id = 10 WHERE id = 1",
                "DELETE FROM t WHERE id = 2",
                "UPDATE nokey SET s = 'b' WHERE a = 1",
                "DELETE FROM nokey WHERE a = 2",
            ]
        if i == 800:
            stmts += [
                "INSERT INTO t (id, sn, v, j) VALUES (2, 'b', 'back', '[1]')",
                "UPDATE t SET id = 11 WHERE id = 10",
                "UPDATE nokey SET a = 4 WHERE a = 3",
            ]
    mariadb.execute(*stmts, database=db)


def _delta(root: Path, t: TableId) -> list[dict]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(root / t.database / t.table)).to_pyarrow_table()
    return rows.sort_by("id" if "id" in rows.column_names else "a").to_pylist()


def _postgres(pg, schema: str, t: TableId) -> list[dict]:
    name = f"{t.database}__{t.table}"
    cols = [
        r[0]
        for r in pg.query(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name = %s AND column_name <> '_mysqlcdc_batch' ORDER BY ordinal_position",
            (schema, name),
        )
    ]
    key = "id" if "id" in cols else "a"
    return [
        dict(zip(cols, r))
        for r in pg.query(
            f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols)} FROM "{schema}"."{name}" ORDER BY "{key}"'
        )
    ]


def _spy(publish, ranges_per_table: list[int]):
    """The real publish_steps, noting how many binlog ranges' records of table t each batch had."""

    def publish_steps(table_id, steps, batch_id):
        if table_id.table == "t":
            ranges_per_table.append(sum(len(s.records) for s in steps if hasattr(s, "records")))
        return publish(table_id, steps, batch_id)

    return publish_steps


@pytest.mark.parametrize("kind", ["delta", "postgres"])
def test_direct_reduction_equals_spark_reduction_for_every_type(
    mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, kind
):
    start = _head(mariadb)
    _workload(mariadb, fresh_db)
    head = _head(mariadb)
    cfg = _config(
        mariadb,
        fresh_db,
        tmp_dir,
        ["t", "nokey"],
        "specific-offset",
        {"file": start.file, "position": start.position},
        trigger_interval_s=0.0,
        catchup_min_bytes=1 << 16,
        catchup_batch_bytes=1 << 20,
        catchup_parallelism=2,
    )
    with contextlib.closing(cfg.source.connect()) as c:  # a table without a key needs a chunk key column
        schemas = [read_table_schema(c, TableId(fresh_db, "t")), read_table_schema(c, TableId(fresh_db, "nokey"), "a")]
    assert schemas[1].row_identity == ("a", "f", "s")
    ranges_per_table: list[int] = []
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    pg_schemas = {"direct": postgres.fresh_schema(), "rows": postgres.fresh_schema()}

    def table(name: str, t: TableId) -> list[dict]:
        return _delta(tmp_dir / name, t) if kind == "delta" else _postgres(postgres, pg_schemas[name], t)

    for name, direct in (("direct", True), ("rows", False)):
        sink = (
            DeltaSink(str(tmp_dir / name), direct_write=direct)
            if kind == "delta"
            else PostgresSink(postgres.dsn, schema=pg_schemas[name], direct_write=direct)
        )
        sink.prepare(schemas)
        assert (sink.direct_write() is not None) == direct
        if direct:
            sink.publish_steps = _spy(sink.publish_steps, ranges_per_table)
        query = start_stream(spark, cfg, sink, schemas, checkpoint_location=str(tmp_dir / f"ckpt-{name}"))
        try:
            _wait(_caught_up(query, head), 120, f"the {name} stream to reach the head", query)
        finally:
            query.stop()
            sink.close()
    assert max(ranges_per_table) == 2, f"parallel catch-up ranges met on the driver: {ranges_per_table}"

    for t in (TableId(fresh_db, "t"), TableId(fresh_db, "nokey")):
        direct, rows = table("direct", t), table("rows", t)
        assert direct and direct == rows, t

    # and both are the source (absolute values, so both paths being wrong alike still fails)
    got = {r["id"]: r for r in table("direct", TableId(fresh_db, "t"))}
    assert sorted(got) == sorted(r[0] for r in mariadb.query(f"SELECT id FROM {fresh_db}.t"))
    assert sorted(got) == [2, 3, 4, 11]
    assert got[3]["tx"] == "x" * 2000 + "1198" and got[4]["tx"] == "x" * 2000 + "1199" and got[4]["i"] == 1199
    assert got[4]["dt6"] == dt.datetime(2026, 1, 1, 0, 0, 0, 1199)
    assert got[11]["bu"] is not None and got[2]["v"] == "back" and got[2]["tx"] is None
    nokey = table("direct", TableId(fresh_db, "nokey"))
    assert [(r["a"], r["s"]) for r in nokey] == [(1, "b"), (4, "c")]
