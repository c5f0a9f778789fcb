"""The chunk planner on a real server: every row lands in exactly one chunk, chunk sizes
are about chunk_size, predicates use an index range, and the edges (BIGINT max, NULLs,
collations, empty tables) hold."""

import collections
import contextlib
import time

import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.snapshot.splitter import ChunkSplitter
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
from airflow_provider_mysqlcdc.cdc.sql import range_predicate

pytestmark = pytest.mark.integration


@pytest.fixture
def db(mariadb, fresh_db):
    with contextlib.closing(mariadb.source_config().connect(database=fresh_db)) as conn:
        yield fresh_db, conn


def q(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def plan(conn, dbname, table, chunk_size, chunk_key=None, **opts):
    schema = read_table_schema(conn, TableId(dbname, table), chunk_key)
    chunks = ChunkSplitter(conn, SplitOptions(chunk_size=chunk_size, **opts)).split(schema)
    assert [c.chunk_id for c in chunks] == list(range(len(chunks)))
    assert chunks[0].start is None and chunks[-1].end is None
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
    return schema, chunks


def assert_exact_cover(conn, schema, chunks, row_id="id"):
    """Every row is selected by exactly one chunk predicate; returns rows per chunk."""
    seen = collections.Counter()
    sizes = []
    for c in chunks:
        rows = q(
            conn,
            f"SELECT `{row_id}` FROM {schema.table_id.quoted} "
            f"WHERE {range_predicate(schema, c.start, c.end, c.includes_null)}",
        )
        seen.update(r[0] for r in rows)
        sizes.append(len(rows))
    (total,) = q(conn, f"SELECT COUNT(*) FROM {schema.table_id.quoted}")[0]
    assert sum(sizes) == total
    assert len(seen) == total and set(seen.values()) <= {1}
    return sizes


def test_dense_ints_split_evenly(db):
    dbname, conn = db
    q(conn, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    q(conn, "INSERT INTO t SELECT seq, seq FROM seq_1_to_20000")
    schema, chunks = plan(conn, dbname, "t", 1000)
    assert 19 <= len(chunks) <= 21
    starts = [c.start[0] for c in chunks[1:]]
    assert len({b - a for a, b in zip(starts, starts[1:])}) == 1  # computed, evenly spaced
    sizes = assert_exact_cover(conn, schema, chunks)
    assert max(sizes) <= 1000


def test_sparse_ints_fall_back_to_uneven(db):
    dbname, conn = db
    q(conn, "CREATE TABLE t (id BIGINT PRIMARY KEY)")
    q(conn, "INSERT INTO t SELECT seq * seq * 1000 FROM seq_1_to_5000")  # factor far above 1000
    schema, chunks = plan(conn, dbname, "t", 500)
    sizes = assert_exact_cover(conn, schema, chunks)
    assert sizes == [500] * 10 + [0] or sizes == [500] * 10  # uneven: exactly chunk_size each


@pytest.mark.parametrize(
    "ddl,lo,hi",
    [
        ("BIGINT", 9223372036854775807 - 30000, 9223372036854775807),
        ("BIGINT", -9223372036854775808, -9223372036854775808 + 30000),
        ("BIGINT UNSIGNED", 18446744073709551615 - 30000, 18446744073709551615),
    ],
)
def test_bigint_edges_do_not_overflow(db, ddl, lo, hi):
    dbname, conn = db
    q(conn, f"CREATE TABLE t (id {ddl} PRIMARY KEY)")
    q(conn, f"INSERT INTO t SELECT {hi} - CAST(seq AS SIGNED) FROM seq_0_to_{hi - lo}")
    schema, chunks = plan(conn, dbname, "t", 1000)
    bounds = [c.start[0] for c in chunks[1:]]
    assert bounds == sorted(bounds) and all(lo < b <= hi for b in bounds)
    assert 28 <= len(chunks) <= 32
    assert_exact_cover(conn, schema, chunks)


def test_composite_key_splits_on_the_whole_key(db):
    dbname, conn = db
    q(conn, "CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, id INT NOT NULL, PRIMARY KEY (a, b))")
    q(conn, "INSERT INTO t SELECT seq % 3, seq, seq FROM seq_1_to_50000")
    schema, chunks = plan(conn, dbname, "t", 4000)
    sizes = assert_exact_cover(conn, schema, chunks)
    assert max(sizes) <= 4000 and len(chunks) == 13  # not one huge chunk per first-column value


def test_decimal_scale_zero_and_dates(db):
    dbname, conn = db
    q(conn, "CREATE TABLE d (id DECIMAL(30,0) PRIMARY KEY)")
    q(conn, "INSERT INTO d SELECT 100000000000000000000000 + seq FROM seq_1_to_3000")
    schema, chunks = plan(conn, dbname, "d", 1000)
    assert 3 <= len(chunks) <= 4
    assert_exact_cover(conn, schema, chunks)
    q(conn, "CREATE TABLE e (id INT NOT NULL, day DATETIME(6) PRIMARY KEY)")
    q(conn, "INSERT INTO e SELECT seq, TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq MICROSECOND FROM seq_1_to_3000")
    schema, chunks = plan(conn, dbname, "e", 700)
    assert len(chunks) == 5
    assert_exact_cover(conn, schema, chunks)


@pytest.mark.parametrize("collation", ["utf8mb4_general_ci", "utf8mb4_bin", "latin1_swedish_ci"])
def test_string_keys_follow_the_collation(db, collation):
    dbname, conn = db
    charset = collation.split("_")[0]
    q(
        conn,
        f"CREATE TABLE t (id INT NOT NULL UNIQUE, k VARCHAR(20) CHARACTER SET {charset} "
        f"COLLATE {collation} PRIMARY KEY)",
    )
    words = ["a", "A ", "b", "B", "é", "e", "ab", "a\t", "z", "Z ", "ä", "ss", "ß", "", " x", "x"]
    # keys differing only by case / trailing space collide in a _ci or PAD SPACE unique index:
    # insert the first of each such group (the server decides what collides).
    rows, nid = [], 0
    for i in range(40):
        for w in words:
            rows.append((nid, f"{w}{i:02d}{w}"))
            nid += 1
    with conn.cursor() as cur:
        for r in rows:
            cur.execute("INSERT IGNORE INTO t VALUES (%s, %s)", r)
    for size in (1, 7, 50, 1000):
        schema, chunks = plan(conn, dbname, "t", size)
        assert_exact_cover(conn, schema, chunks)


def test_nullable_non_unique_chunk_key(db):
    dbname, conn = db
    q(conn, "CREATE TABLE t (id INT, g VARCHAR(5) COLLATE utf8mb4_general_ci)")
    q(conn, "INSERT INTO t SELECT seq, IF(seq % 10 = 0, NULL, IF(seq % 2, 'a', 'A ')) FROM seq_1_to_3000")
    q(conn, "INSERT INTO t SELECT 3000 + seq, CONCAT('k', seq % 50) FROM seq_1_to_3000")
    schema, chunks = plan(conn, dbname, "t", 100, chunk_key="g")
    assert chunks[0].includes_null and not any(c.includes_null for c in chunks[1:])
    sizes = assert_exact_cover(conn, schema, chunks)
    assert len(chunks) > 20 and sizes[0] > 0
    # an integer configured key with NULLs, split evenly
    q(conn, "UPDATE t SET id = NULL WHERE id % 7 = 0")
    schema, chunks = plan(conn, dbname, "t", 100, chunk_key="id")
    counts = [
        q(conn, f"SELECT COUNT(*), COUNT(id) FROM t WHERE {range_predicate(schema, c.start, c.end, c.includes_null)}")[
            0
        ]
        for c in chunks
    ]
    assert sum(n for n, _ in counts) == 6000
    assert counts[0][0] - counts[0][1] == 6000 // 7  # every NULL key is in the first chunk


def test_empty_and_one_row_tables(db):
    dbname, conn = db
    q(conn, "CREATE TABLE e (id INT PRIMARY KEY)")
    q(conn, "CREATE TABLE s (k VARCHAR(5) PRIMARY KEY)")
    for t in ("e", "s"):
        _, chunks = plan(conn, dbname, t, 10)
        assert [(c.start, c.end) for c in chunks] == [(None, None)]
        q(conn, f"INSERT INTO {t} VALUES (1)")
        _, chunks = plan(conn, dbname, t, 10)
        assert [(c.start, c.end) for c in chunks] == [(None, None)]


def test_an_enum_chunk_key_makes_the_table_one_chunk_and_says_how_to_read_it_in_parallel(db, caplog):
    """ENUM sorts by member number in ORDER BY but compares as text in WHERE: no boundary would
    delimit a range, so the table is one chunk (an ENUM primary key is legal and must be captured)."""
    dbname, conn = db
    q(conn, "CREATE TABLE t (k ENUM('b','a','c') PRIMARY KEY)")
    q(conn, "INSERT INTO t VALUES ('b'), ('a'), ('c')")
    with caplog.at_level("WARNING"):
        _schema, chunks = plan(conn, dbname, "t", 1)
    assert [(c.start, c.end) for c in chunks] == [(None, None)]
    assert "chunk_key_columns" in caplog.text and "one chunk" in caplog.text


def test_predicates_use_an_index_range(db):
    dbname, conn = db
    q(conn, "CREATE TABLE one (id INT PRIMARY KEY, pad CHAR(100))")
    q(conn, "INSERT INTO one SELECT seq, 'x' FROM seq_1_to_20000")
    q(conn, "CREATE TABLE two (a VARCHAR(10) NOT NULL, b INT NOT NULL, pad CHAR(100), PRIMARY KEY (a, b))")
    q(conn, "INSERT INTO two SELECT CONCAT('g', seq % 4), seq, 'x' FROM seq_1_to_20000")
    q(conn, "ANALYZE TABLE one, two")
    for t in ("one", "two"):
        schema, chunks = plan(conn, dbname, t, 2000)
        c = chunks[len(chunks) // 2]
        (plan_row,) = q(conn, f"EXPLAIN SELECT * FROM {t} WHERE {range_predicate(schema, c.start, c.end)}")
        assert plan_row[3] == "range" and plan_row[5] == "PRIMARY", plan_row


def test_boundary_queries_are_throttled(db):
    dbname, conn = db
    q(conn, "CREATE TABLE t (k VARCHAR(10) PRIMARY KEY)")
    q(conn, "INSERT INTO t SELECT CONCAT('k', seq) FROM seq_1_to_100")
    t0 = time.monotonic()
    _, chunks = plan(conn, dbname, "t", 20, boundary_query_pause_s=0.05)
    assert len(chunks) == 5 and time.monotonic() - t0 >= 0.2
