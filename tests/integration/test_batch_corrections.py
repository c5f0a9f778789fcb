"""Corrections inside one batch's LW..HW window, on real MariaDB and Spark.

Writes are injected at a fixed moment of the batch read — right after LW (so the SELECTs
already see them) or right before HW (so the SELECTs missed them) — and the batch's rows
must be exact as of HW either way.
"""

from __future__ import annotations

import contextlib

import pytest

from airflow_provider_mysqlcdc.cdc.chunks import Batch
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.snapshot.splitter import ChunkSplitter
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
from airflow_provider_mysqlcdc.spark.snapshot.batch_reader import ConsistentBatchReader
from mysqlcdc_harness.verify import collect

pytestmark = [pytest.mark.integration, pytest.mark.spark]


class InjectingReader(ConsistentBatchReader):
    """Runs ``writes`` inside the window: after LW or just before HW."""

    def __init__(self, *a, writes, when, **kw):
        super().__init__(*a, **kw)
        self.writes, self.when = writes, when

    def _low_watermark(self, conn, version):
        lw = super()._low_watermark(conn, version)
        if self.when == "after_lw":
            self.writes()
        return lw

    def _high_watermark(self, conn, version):
        if self.when == "before_hw":
            self.writes()
        return super()._high_watermark(conn, version)


@pytest.fixture
def hundred(mariadb, fresh_db):
    mariadb.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        "INSERT INTO t SELECT seq, CONCAT('v', seq), 0 FROM seq_1_to_100",
        database=fresh_db,
    )
    source = mariadb.source_config()
    tid = TableId(fresh_db, "t")
    with contextlib.closing(source.connect()) as conn:
        schema = read_table_schema(conn, tid)
        chunks = ChunkSplitter(conn, SplitOptions(chunk_size=10)).split(schema)
    # The batch under test covers ids below 50; the rest is another batch.
    low = tuple(c for c in chunks if c.end is not None and c.end[0] <= 50)
    high = tuple(c for c in chunks if c not in low)
    assert low and high
    return source, schema, Batch("low", low), Batch("high", high)


def read(spark, source, schema, batch, writes, when):
    r = InjectingReader(spark, source, {schema.table_id: schema}, writes=writes, when=when)
    got = r.read(batch)
    try:
        if when != "never":
            assert got.high_watermark > got.low_watermark, "the writes must fall inside the window"
        return collect(got.frame(schema.table_id), ("id",)), got
    finally:
        got.unpersist()


@pytest.mark.parametrize("when", ["after_lw", "before_hw"])
def test_five_updates_give_the_row_once_with_the_last_value(mariadb, fresh_db, spark, hundred, when):
    source, schema, low, _ = hundred

    def writes():
        for i in range(1, 6):
            mariadb.execute(f"UPDATE t SET v = 'upd{i}', n = {i} WHERE id = 7", database=fresh_db)

    rows, got = read(spark, source, schema, low, writes, when)
    assert rows[(7,)] == {"id": 7, "v": "upd5", "n": 5}
    assert len([k for k in rows if k == (7,)]) == 1
    assert got.tables[schema.table_id].upserted_rows == 1


@pytest.mark.parametrize("when", ["after_lw", "before_hw"])
def test_insert_and_delete_in_the_window_give_nothing(mariadb, fresh_db, spark, hundred, when):
    source, schema, low, _ = hundred

    def writes():
        mariadb.execute(
            "INSERT INTO t VALUES (-5, 'ghost', 1)",
            "DELETE FROM t WHERE id = -5",
            "DELETE FROM t WHERE id = 3",
            database=fresh_db,
        )

    rows, _ = read(spark, source, schema, low, writes, when)
    assert (-5,) not in rows
    assert (3,) not in rows
    assert (4,) in rows and (2,) in rows


@pytest.mark.parametrize("when", ["after_lw", "before_hw"])
def test_key_moved_between_chunks_ends_in_the_right_place_only(mariadb, fresh_db, spark, hundred, when):
    source, schema, low, high = hundred

    def writes():
        mariadb.execute(
            "DELETE FROM t WHERE id = 75",
            "UPDATE t SET id = 75, v = 'moved-out' WHERE id = 5",  # low -> high
            "DELETE FROM t WHERE id = 15",
            "UPDATE t SET id = 15, v = 'moved-in' WHERE id = 80",  # high -> low
            "DELETE FROM t WHERE id = 16",
            "UPDATE t SET id = 16, v = 'moved-inside' WHERE id = 6",  # within low
            database=fresh_db,
        )

    rows, _ = read(spark, source, schema, low, writes, when)
    assert (5,) not in rows and (75,) not in rows and (80,) not in rows and (6,) not in rows
    assert rows[(15,)]["v"] == "moved-in"
    assert rows[(16,)]["v"] == "moved-inside"
    assert all(k[0] < 50 for k in rows)
    # The other batch, read afterwards, holds the moved-out row and not the moved-in one.
    high_rows, _ = read(spark, source, schema, high, lambda: None, "never")
    assert high_rows[(75,)]["v"] == "moved-out"
    assert (80,) not in high_rows
    combined = {**rows, **high_rows}
    expected = {
        (r[0],): {"id": r[0], "v": r[1], "n": r[2]} for r in mariadb.query("SELECT id, v, n FROM t", database=fresh_db)
    }
    assert combined == expected
