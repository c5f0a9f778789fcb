"""KeyOrder agrees with the server: ``sorted(key=sort_key)`` matches ``ORDER BY`` (equal-weight
values compared as groups) and ``contains`` matches the server evaluating the chunk predicate."""

import contextlib
import itertools
import pickle
import random

import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.snapshot.keyorder import key_order_for
from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
from airflow_provider_mysqlcdc.cdc.sql import range_predicate

pytestmark = pytest.mark.integration

ALPHABET = ["a", "A", "b", "B", "é", "e", "É", "ä", "ß", "s", "😀", "🙂", " ", "\t", "z", "_"]
COLLATIONS = [
    "utf8mb4_general_ci",
    "utf8mb4_bin",
    "latin1_swedish_ci",
    "utf8mb4_unicode_ci",
    "utf8mb4_general_nopad_ci",
    "utf8mb4_nopad_bin",
    "utf8mb4_uca1400_as_cs",
]


def random_strings(n, seed, latin1):
    rnd = random.Random(seed)
    alphabet = [c for c in ALPHABET if not latin1 or ord(c) < 256]
    out = set()
    while len(out) < n:
        out.add("".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 5))))
    return sorted(out)


@pytest.fixture
def conn(mariadb, fresh_db):
    with contextlib.closing(mariadb.source_config().connect(database=fresh_db)) as c:
        yield fresh_db, c


def load(conn, dbname, collation, n=400):
    charset = collation.split("_")[0]
    values = random_strings(n, sum(map(ord, collation)), charset == "latin1")
    with conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR(20) CHARACTER SET {charset} COLLATE {collation}, KEY (k))"
        )
        cur.executemany("INSERT INTO t VALUES (%s, %s)", list(enumerate(values)))
        cur.execute("SELECT id, k, DENSE_RANK() OVER (ORDER BY k) FROM t")
        rows = cur.fetchall()
    return read_table_schema(conn, TableId(dbname, "t"), "k"), rows


@pytest.mark.parametrize("collation", COLLATIONS)
def test_sort_key_matches_order_by(conn, mariadb, collation):
    dbname, c = conn
    schema, rows = load(c, dbname, collation)
    ko = pickle.loads(pickle.dumps(key_order_for(schema, mariadb.source_config())))  # as on an executor
    keys = ko.sort_keys([(k,) for _id, k, _r in rows])
    rank = {k: r for _id, k, r in rows}
    # the server's groups of equal values, in order, equal Python's groups in sorted order
    ordered = sorted(zip(keys, (k for _i, k, _r in rows)), key=lambda x: x[0])
    py_groups = [sorted(v for _, v in g) for _, g in itertools.groupby(ordered, key=lambda x: x[0])]
    srv_groups = [
        sorted(v for _, v in g) for _, g in itertools.groupby(sorted(((r, k) for _i, k, r in rows)), key=lambda x: x[0])
    ]
    assert py_groups == srv_groups
    assert [rank[g[0]] for g in py_groups] == list(range(1, len(srv_groups) + 1))
    ko.close()


@pytest.mark.parametrize("collation", ["utf8mb4_general_ci", "utf8mb4_bin", "latin1_swedish_ci"])
def test_contains_matches_the_server_predicate(conn, mariadb, collation):
    dbname, c = conn
    schema, rows = load(c, dbname, collation, n=200)
    ko = key_order_for(schema, mariadb.source_config())
    values = [k for _i, k, _r in rows]
    rnd = random.Random(7)
    for _ in range(15):
        start, end = (None if rnd.random() < 0.2 else (rnd.choice(values),) for _ in range(2))
        includes_null = start is None
        with c.cursor() as cur:
            cur.execute(f"SELECT id FROM t WHERE {range_predicate(schema, start, end, includes_null)}")
            server = {r[0] for r in cur.fetchall()}
        python = {i for i, k, _r in rows if ko.contains(start, end, includes_null, (k,))}
        assert python == server, (start, end)
    ko.close()


def test_composite_key_with_a_ci_string(conn, mariadb):
    dbname, c = conn
    with c.cursor() as cur:
        cur.execute(
            "CREATE TABLE t (s VARCHAR(5) COLLATE utf8mb4_general_ci NOT NULL, n INT NOT NULL, PRIMARY KEY (s, n))"
        )
        cur.execute("INSERT INTO t VALUES ('a', 1), ('B', 1), ('b ', 2), ('é', 3), ('e', 4), ('a\t', 5)")
    schema = read_table_schema(c, TableId(dbname, "t"))
    ko = key_order_for(schema, mariadb.source_config())
    with c.cursor() as cur:
        cur.execute("SELECT s, n FROM t ORDER BY s, n")
        server = [tuple(r) for r in cur.fetchall()]
    assert sorted(server, key=ko.sort_key) == server
    assert ko.contains(("A ", 1), ("b", 2), False, ("a", 5))
    assert not ko.contains(("A ", 1), ("b", 2), False, ("a\t", 5))
    assert ko.locate([("b", 1), ("E", 0)], ("é", 3)) == 2
    ko.close()
