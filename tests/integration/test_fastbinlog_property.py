"""Property test: random schemas and rows, the fast reader against python-mysql-replication.

Hypothesis draws a table (random column types, sizes, character sets, nullability), rows
for it, and a mix of multi-row INSERTs, UPDATEs (some setting NULLs) and DELETEs; both
readers then read the binlog range and must agree change for change, value for value
(``assert_same`` of the differential test). Bounded: 25 examples (``FASTBINLOG_EXAMPLES``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import json
import os
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_mysqlcdc.cdc.events import RowChange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
from tests.integration.test_fastbinlog_differential import assert_same, fast_read, library_read, now

pytestmark = pytest.mark.integration

_names = itertools.count()

# characters every MySQL latin1 (= cp1252) column can hold: ASCII and the printable Latin-1 range
LATIN1_ALPHABET = st.characters(
    min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f", blacklist_categories=("Cc",)
)
UTF8_ALPHABET = st.characters(blacklist_categories=("Cs",), max_codepoint=0x10FFFF)


def hexlit(b: bytes) -> str:
    return f"X'{b.hex()}'" if b else "''"


def textlit(s: str) -> str:
    return f"_utf8mb4 X'{s.encode('utf-8').hex()}'" if s else "''"


@dataclass(frozen=True)
class ColType:
    """A column declaration and a strategy for SQL literals of its values."""

    ddl: str
    values: st.SearchStrategy[str]


def _int(name: str, bits: int) -> list[ColType]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return [
        ColType(name, st.integers(lo, hi).map(str)),
        ColType(f"{name} UNSIGNED", st.integers(0, (1 << bits) - 1).map(str)),
    ]


def _decimal(draw: Callable) -> ColType:
    p = draw(st.integers(1, 65))
    s = draw(st.integers(0, min(p, 30)))
    vals = st.integers(-(10**p - 1), 10**p - 1).map(
        lambda u: format(decimal.Decimal(u).scaleb(-s, decimal.Context(prec=100)), "f")
    )
    return ColType(f"DECIMAL({p},{s})", vals.map(lambda t: f"'{t}'"))


def _temporal(draw: Callable) -> ColType:
    fsp = draw(st.integers(0, 6))
    kind = draw(st.sampled_from(["TIME", "DATETIME", "TIMESTAMP", "DATE"]))
    unit = 10 ** (6 - fsp)

    def frac(us: int) -> str:
        return f".{us // unit * unit:06d}"[: fsp + 1] if fsp else ""

    if kind == "DATE":
        return ColType("DATE", st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31)).map(lambda d: f"'{d}'"))
    if kind == "TIME":
        limit = (838 * 3600 + 59 * 60 + 59) * 1_000_000 + 999_999

        def time_lit(us: int) -> str:
            sign = "-" if us < 0 else ""
            secs, rest = divmod(abs(us), 1_000_000)
            return f"'{sign}{secs // 3600}:{secs // 60 % 60:02d}:{secs % 60:02d}{frac(rest)}'"

        return ColType(f"TIME({fsp})", st.integers(-limit, limit).map(time_lit))
    lo, hi = (
        (dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59))
        if kind == "DATETIME"
        else (dt.datetime(1970, 1, 1, 0, 0, 1), dt.datetime(2038, 1, 19, 3, 14, 6))
    )
    vals = st.datetimes(lo, hi).map(lambda d: f"'{d:%Y-%m-%d %H:%M:%S}{frac(d.microsecond)}'")
    return ColType(f"{kind}({fsp})" + (" NULL" if kind == "TIMESTAMP" else ""), vals)


def _string(draw: Callable) -> ColType:
    kind = draw(
        st.sampled_from(["CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "BINARY", "VARBINARY", "BLOB", "JSON"])
    )
    if kind == "JSON":
        vals = st.recursive(
            st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(UTF8_ALPHABET, max_size=5),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
            max_leaves=5,
        )
        return ColType("JSON", vals.map(lambda v: textlit(json.dumps(v, ensure_ascii=False))))
    n = draw(st.integers(1, 300 if kind in ("VARCHAR", "VARBINARY") else 80))
    if kind in ("BINARY", "VARBINARY", "BLOB"):
        size = n if kind != "BLOB" else 300
        return ColType(f"{kind}({n})" if kind != "BLOB" else "BLOB", st.binary(max_size=size).map(hexlit))
    latin = draw(st.booleans())
    cs = " CHARACTER SET latin1" if latin else ""
    alphabet = LATIN1_ALPHABET if latin else UTF8_ALPHABET
    strings = st.text(alphabet, max_size=n if kind in ("CHAR", "VARCHAR") else 60)
    decl = f"{kind}({n}){cs}" if kind in ("CHAR", "VARCHAR") else f"{kind}{cs}"
    return ColType(decl, strings.map(textlit))


def _other(draw: Callable) -> ColType:
    kind = draw(st.sampled_from(["FLOAT", "DOUBLE", "BIT", "YEAR", "ENUM", "SET"]))
    if kind == "FLOAT":
        return ColType("FLOAT", st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr))
    if kind == "DOUBLE":
        return ColType("DOUBLE", st.floats(allow_nan=False, allow_infinity=False).map(repr))
    if kind == "BIT":
        n = draw(st.integers(1, 64))
        return ColType(f"BIT({n})", st.integers(0, (1 << n) - 1).map(str))
    if kind == "YEAR":
        return ColType("YEAR", st.just("0") | st.integers(1901, 2155).map(str))
    members = [f"m{i}" for i in range(draw(st.integers(1, 20)))]
    decl = f"{kind}(" + ",".join(f"'{m}'" for m in members) + ")"
    if kind == "ENUM":
        return ColType(decl, st.sampled_from(members).map(lambda m: f"'{m}'"))
    return ColType(decl, st.sets(st.sampled_from(members)).map(lambda s: "'" + ",".join(sorted(s)) + "'"))


@st.composite
def col_types(draw: Callable) -> ColType:
    group = draw(st.sampled_from(["int", "decimal", "temporal", "string", "other"]))
    if group == "int":
        name, bits = draw(
            st.sampled_from([("TINYINT", 8), ("SMALLINT", 16), ("MEDIUMINT", 24), ("INT", 32), ("BIGINT", 64)])
        )
        return draw(st.sampled_from(_int(name, bits)))
    return {"decimal": _decimal, "temporal": _temporal, "string": _string, "other": _other}[group](draw)


@st.composite
def scenarios(draw: Callable) -> dict[str, Any]:
    cols = draw(st.lists(col_types(), min_size=1, max_size=12))
    nullable = [draw(st.booleans()) for _ in cols]

    def row() -> st.SearchStrategy[list[str]]:
        return st.tuples(*[(c.values | st.just("NULL")) if n else c.values for c, n in zip(cols, nullable)]).map(list)

    rows = draw(st.lists(row(), min_size=1, max_size=12))
    updates = draw(st.lists(st.tuples(st.integers(0, 11), row()), max_size=6))
    deletes = draw(st.lists(st.integers(0, 11), max_size=4))
    multi = draw(st.booleans())
    return dict(cols=cols, nullable=nullable, rows=rows, updates=updates, deletes=deletes, multi=multi)


# FASTBINLOG_EXAMPLES=500 for a deeper hunt; 25 keeps the suite fast.
@settings(
    max_examples=int(os.environ.get("FASTBINLOG_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sc=scenarios())
def test_random_schemas_match_the_library(mariadb, fresh_db, sc):
    db = fresh_db
    name = f"p{next(_names)}"
    t = TableId(db, name)
    cols = [f"c{i} {c.ddl}{'' if n else ' NOT NULL'}" for i, (c, n) in enumerate(zip(sc["cols"], sc["nullable"]))]
    mariadb.execute(f"CREATE TABLE `{name}` (id INT PRIMARY KEY, {', '.join(cols)})", database=db)
    try:
        conn = mariadb.source_config().connect()
        try:
            schema = read_table_schema(conn, t)
        finally:
            conn.close()
        start = now(mariadb)
        values = [f"({i}, {', '.join(r)})" for i, r in enumerate(sc["rows"])]
        inserts = (
            [f"INSERT INTO `{name}` VALUES {', '.join(values)}"]
            if sc["multi"]
            else [f"INSERT INTO `{name}` VALUES {v}" for v in values]
        )
        updates = [
            f"UPDATE `{name}` SET " + ", ".join(f"c{j} = {v}" for j, v in enumerate(r)) + f" WHERE id = {i}"
            for i, r in sc["updates"]
        ]
        if sc["multi"]:
            updates.append(f"UPDATE `{name}` SET id = id + 100")
        deletes = [f"DELETE FROM `{name}` WHERE id IN ({i}, {i + 100})" for i in sc["deletes"]]
        mariadb.execute(*inserts, *updates, *deletes, database=db)
        stop = now(mariadb)
        ref = library_read(mariadb, [(start, {t: schema})], stop, [t])
        fast = fast_read(mariadb, start, stop, [t], columnar=False, bulk_min_events=0)
        assert_same(fast, ref)
        assert_same(fast_read(mariadb, start, stop, [t], columnar=True, bulk_min_events=1), ref)
        assert len([e for e in fast if isinstance(e, RowChange)]) >= len(sc["rows"])
    finally:
        mariadb.execute(f"DROP TABLE `{name}`", database=db)
