"""The Iceberg sink's table protocol on a real pyiceberg SQL catalog (SQLite) and warehouse in a
temporary directory, no Spark: a micro-batch's copy-on-write commit against a plain reference
(a dict of rows), identity columns with NULLs and composite keys, BIGINT UNSIGNED keys at 2^63
and 2^64 - 1, the micro-batch record a replay is skipped by, the catalog options refused."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import random
import traceback

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.spark.sinks.base import META_OP

pytest.importorskip("pyiceberg")

from airflow_provider_mysqlcdc.spark.sinks.iceberg.apply import (  # noqa: E402
    BATCH_KEY,
    STEP_KEY,
    apply_changes,
    last_recorded,
    with_op,
)
from airflow_provider_mysqlcdc.spark.sinks.iceberg.sink import STEP_SCALE, IcebergSink  # noqa: E402

D = decimal.Decimal


def _schema(composite: bool = False, nullable_identity: bool = False) -> TableSchema:
    cols = [
        Column("id", 1, "bigint", "bigint(20) unsigned", nullable_identity, numeric_precision=20, numeric_scale=0),
        Column("k", 2, "varchar", "varchar(10)", nullable_identity, charset="utf8mb4", char_max_length=10),
        Column("a", 3, "tinyint", "tinyint(4)", True),
        Column("amount", 4, "decimal", "decimal(12,2)", True, numeric_precision=12, numeric_scale=2),
        Column("ts", 5, "datetime", "datetime(6)", True, datetime_precision=6),
    ]
    pk = ("id", "k") if composite else ("id",)
    if nullable_identity:  # a table without a primary key: every column is the row's identity
        return TableSchema(TableId("shop", "t"), tuple(cols), (), ("id",), ("id", "k"))
    return TableSchema(TableId("shop", "t"), tuple(cols), pk, ("id",), pk)


def _rows(changes: list[tuple]) -> pa.Table:
    """(id, k, a, op) tuples as change rows."""
    return pa.table(
        {
            "id": pa.array([None if c[0] is None else D(c[0]) for c in changes], pa.decimal128(20, 0)),
            "k": pa.array([c[1] for c in changes], pa.string()),
            "a": pa.array([c[2] for c in changes], pa.int8()),
            "amount": pa.array([D("1.25")] * len(changes), pa.decimal128(12, 2)),
            "ts": pa.array([dt.datetime(2024, 2, 29, 23, 59, 59, 999999)] * len(changes), pa.timestamp("us")),
            META_OP: pa.array([c[3] for c in changes]),
        }
    )


def _contents(sink: IcebergSink, schema: TableSchema) -> dict[tuple, int]:
    got = sink.open_table(schema.table_id).scan().to_arrow().to_pylist()
    ident = schema.row_identity
    out = {tuple(r[c] for c in ident): r["a"] for r in got}
    assert len(out) == len(got), "an identity is held twice"
    return out


@pytest.mark.parametrize("composite,nullable", [(False, False), (True, False), (False, True)])
def test_micro_batches_applied_copy_on_write_equal_a_reference(tmp_path, composite, nullable):
    schema = _schema(composite, nullable)
    sink = IcebergSink(str(tmp_path / "wh"))
    sink.prepare([schema])
    rng = random.Random(5)
    ids = [0, 1, 2, 3, 2**63 - 1, 2**63, 2**64 - 1] + ([None] if nullable else [])
    keys = ["x", "y"] + ([None] if nullable else [])
    expected: dict[tuple, int] = {}
    for batch in range(1, 9):
        last: dict[tuple, tuple] = {}
        for _ in range(rng.randint(1, 12)):  # reduced: the last change per identity
            ident = (rng.choice(ids), rng.choice(keys) if composite or nullable else "x")
            op = rng.choice(["+I", "+U", "-D", "-U"])
            last[ident] = (*ident, rng.randint(-128, 127), op)
        table = sink.open_table(schema.table_id)
        apply_changes(
            table,
            schema,
            with_op(table, _rows(list(last.values()))),
            {STEP_KEY: str(batch * STEP_SCALE), BATCH_KEY: str(batch)},
        )
        for (i, k), (_, _, a, op) in last.items():
            key = (None if i is None else D(i),) + ((k,) if composite or nullable else ())
            if op in ("+I", "+U"):
                expected[key] = a
            else:
                expected.pop(key, None)
        assert _contents(sink, schema) == expected, f"after micro-batch {batch}"
        assert last_recorded(sink.open_table(schema.table_id), BATCH_KEY) == batch


def test_a_replayed_micro_batch_is_skipped(tmp_path):
    schema = _schema()
    sink = IcebergSink(str(tmp_path / "wh"))
    sink.prepare([schema])
    table = sink.open_table(schema.table_id)
    apply_changes(table, schema, with_op(table, _rows([(1, "x", 1, "+I")])), sink._props(3, 3 * STEP_SCALE, True))
    assert sink._unapplied(schema.table_id, 3 * STEP_SCALE) is None
    assert sink._unapplied(schema.table_id, 2 * STEP_SCALE) is None
    assert sink._unapplied(schema.table_id, 4 * STEP_SCALE) is not None
    # the consistency check reads the table as it was up to a micro-batch
    apply_changes(
        table,
        schema,
        with_op(sink.open_table(schema.table_id), _rows([(2, "x", 1, "+I")])),
        sink._props(4, 4 * STEP_SCALE, True),
    )
    before, _ = sink.consistency_keys(schema, 3)
    after, _ = sink.consistency_keys(schema, 4)
    assert before.column("id").to_pylist() == [D(1)] and sorted(after.column("id").to_pylist()) == [D(1), D(2)]


def test_a_table_that_does_not_match_and_secrets_in_the_catalog_are_refused(tmp_path):
    sink = IcebergSink(str(tmp_path / "wh"))
    sink.prepare([_schema()])
    other = _schema()
    other = TableSchema(other.table_id, other.columns[:3], other.primary_key, other.chunk_key, other.row_identity)
    with pytest.raises(ConfigError, match="does not match the source table.*unexpected column 'amount'"):
        sink.prepare([other])
    assert sink.forget_tables([other.table_id]) and not sink.catalog.table_exists(("shop", "t"))


PG_CATALOG = {"type": "sql", "uri": "postgresql+psycopg://cdc@127.0.0.1:1/iceberg"}


@pytest.mark.parametrize(
    "root,catalog,message",
    [
        ("/wh", {"type": "sql", "uri": "postgresql+psycopg://u:pw@h/db"}, "catalog.uri: found a URI with a password"),
        ("/wh", {"uri": "postgresql://cdc:hunter2@h:5432/db"}, "catalog.uri: found a URI with a password"),
        ("s3://lake/wh", {**PG_CATALOG, "s3.secret-access-key": "x"}, "catalog.s3.secret-access-key: found a secret"),
        ("s3://lake/wh", {**PG_CATALOG, "s3.access-key-id": "AKIA"}, "catalog.s3.access-key-id: found a secret"),
        ("s3://lake/wh", {**PG_CATALOG, "token": "t"}, "catalog.token: found a secret"),
        ("s3://lake/wh", None, "catalog: found none for the warehouse s3://lake/wh, need a catalog every Spark"),
        ("s3://lake/wh", {}, "catalog: found none for the warehouse s3://lake/wh"),
        ("s3://lake/wh", {"type": "sql", "uri": "sqlite:////tmp/c.db"}, "catalog.uri: found a SQLite catalog"),
    ],
)
def test_catalog_options_that_would_store_a_secret_or_strand_the_catalog_are_refused(root, catalog, message):
    with pytest.raises(ConfigError, match=message) as e:
        IcebergSink(root, catalog=catalog)
    assert "Fix:" in str(e.value)
    assert "pw@" not in str(e.value) and "hunter2" not in str(e.value), "the error must not repeat the secret"


def test_an_s3_warehouse_takes_a_shared_catalog_and_its_keys_from_the_aws_connection_not_the_options(monkeypatch):
    from airflow_provider_mysqlcdc.spark.sinks.iceberg import catalog as cat

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    sink = IcebergSink("s3://lake/wh", catalog=PG_CATALOG)
    assert sink.catalog_props == {**PG_CATALOG, "warehouse": "s3://lake/wh"}, "nothing but the user's properties"
    assert cat.storage_properties(sink.root, None) == {}, "no credentials anywhere: the SDK's own chain"
    # the aws connection's credentials in the environment (spark-submit jobs, the stream) ...
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    assert cat.storage_properties(sink.root, None) == {
        "s3.access-key-id": "AKIAENV",
        "s3.secret-access-key": "env-secret",
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.region": "us-east-1",  # an S3-compatible endpoint: no asking AWS for the bucket's region
    }
    # ... or in memory (a Spark Connect server's workers), which then win over the environment
    options = {"AWS_ACCESS_KEY_ID": "AKIAMEM", "AWS_SECRET_ACCESS_KEY": "mem-secret", "AWS_REGION": "eu-west-1"}
    assert cat.storage_properties(sink.root, options) == {
        "s3.access-key-id": "AKIAMEM",
        "s3.secret-access-key": "mem-secret",
        "s3.region": "eu-west-1",
    }
    assert cat.storage_properties("/local/wh", options) == {}, "a local warehouse gets no S3 properties"
    built = IcebergSink("s3://lake/wh", catalog=PG_CATALOG, storage_options=options, password="pw")
    assert "mem-secret" not in json.dumps(built.catalog_props) and "pw" not in built.catalog_props.values()


def test_the_catalog_password_reaches_the_engine_but_no_message(monkeypatch):
    """A PostgreSQL catalog's password is handed in memory (or as $PGPASSWORD); the engine gets it in
    SQLAlchemy's URL object, so the connection error a wrong port gives, and the URL's printed form,
    do not show it."""
    from airflow_provider_mysqlcdc.spark.sinks.iceberg import catalog as cat

    monkeypatch.delenv("PGPASSWORD", raising=False)
    assert cat.catalog_password(None) is None
    monkeypatch.setenv("PGPASSWORD", "from-env-7")
    assert cat.catalog_password(None) == "from-env-7" and cat.catalog_password("given-8") == "given-8"
    assert cat.takes_password(PG_CATALOG) and not cat.takes_password({"type": "rest", "uri": "postgresql://x"})
    url = cat.catalog_uri(PG_CATALOG, "Pa55-in-memory")
    assert url.password == "Pa55-in-memory" and url.username == "cdc" and url.drivername == "postgresql+psycopg"
    assert "Pa55" not in str(url) and "Pa55" not in repr(url), "printed, the URL masks the password"
    assert cat.catalog_uri(PG_CATALOG, None) == PG_CATALOG["uri"]
    sink = IcebergSink("s3://lake/wh", catalog=PG_CATALOG, password="Pa55-in-memory")
    with pytest.raises(Exception) as e:  # nothing listens on port 1: the engine's first connect fails
        sink.catalog
    text = "".join(traceback.format_exception(e.value))
    assert "127.0.0.1" in text and "Pa55-in-memory" not in text


def test_a_batch_s_own_files_are_committed_once_and_the_uncommitted_ones_discarded(tmp_path):
    """The snapshot's file protocol without Spark: files written per ``snapshot_spec`` (as the Arrow
    reader's tasks write them, in the table's schema with its required key) are committed by
    ``commit_chunk_files``; a rerun replaces them; ``discard_uncommitted`` deletes what no commit took."""
    import pyarrow.parquet as pq

    from airflow_provider_mysqlcdc.spark.sinks.files.arrow import FileRecord

    schema = _schema()
    sink = IcebergSink(str(tmp_path / "lake"))
    sink.prepare([schema])
    assert sink.writes_snapshot_files()

    def write(batch: str, ids: list[int], name: str) -> FileRecord:
        spec = sink.arrow_snapshot_spec(schema, batch)
        assert not spec.schema.field("id").nullable  # the table's identifier field is required
        fs, prefix = spec.fs.open()
        rows = pa.table(
            {
                "id": pa.array([D(i) for i in ids], pa.decimal128(20, 0)),
                "k": pa.array([f"k{i}" for i in ids]),
                "a": pa.array([i % 100 for i in ids], pa.int32()),
                "amount": pa.array([D("1.25")] * len(ids), pa.decimal128(12, 2)),
                "ts": pa.array([dt.datetime(2024, 1, 1)] * len(ids), pa.timestamp("us")),
            }
        ).cast(spec.schema)
        rel = f"{spec.directory}/{name}.parquet"
        fs.create_dir(prefix + spec.directory, recursive=True)
        with fs.open_output_stream(prefix + rel) as out:
            pq.write_table(rows, out)
        return FileRecord(rel, fs.get_file_info(prefix + rel).size, len(ids), None)

    def ids() -> list[int]:
        return sorted(int(v) for v in sink.open_table(schema.table_id).scan().to_arrow().column("id").to_pylist())

    first = [write("b0", [1, 2, 3], "p0"), write("b1", [4, 5], "p1")]
    got = sink.commit_chunk_files(None, schema, "b0", first[:1], None, [])
    assert got.rows_written == 3
    sink.commit_chunk_files(None, schema, "b1", first[1:], None, [])
    assert ids() == [1, 2, 3, 4, 5]
    # a rerun of b0: a killed attempt's file, then the new run's, which replaces the first run's
    stray = write("b0", [9], "killed")
    assert sink.discard_uncommitted(schema, "b0") == 1  # the committed p0 stays
    fs, prefix = sink.snapshot_spec(schema, "b0").fs.open()
    assert fs.get_file_info(prefix + stray.path).type.name == "NotFound"
    sink.commit_chunk_files(None, schema, "b0", [write("b0", [1, 2], "p0-again")], None, [])
    assert ids() == [1, 2, 4, 5]
