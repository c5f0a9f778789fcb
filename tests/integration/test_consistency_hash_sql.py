"""The integer key hash computed by the server (full scans) equals the one Python and numpy compute
(the sink side and the binlog window), at every integer width's extremes."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.snapshot.consistency import int_hash, int_hash_sql

pytestmark = pytest.mark.integration

TYPES = {
    "TINYINT": (-128, 127),
    "TINYINT UNSIGNED": (0, 255),
    "SMALLINT": (-32768, 32767),
    "MEDIUMINT UNSIGNED": (0, 2**24 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "INT UNSIGNED": (0, 2**32 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "BIGINT UNSIGNED": (0, 2**64 - 1),
}


def test_the_server_hashes_every_integer_type_as_python_does(mariadb, fresh_db):
    for i, (ddl, (lo, hi)) in enumerate(TYPES.items()):
        values = sorted({lo, hi, 0, 1, lo + 1, hi - 1, *([-1] if lo < 0 else [2**31, 2**63] if hi >= 2**63 else [])})
        values = [v for v in values if lo <= v <= hi]
        mariadb.execute(
            f"CREATE TABLE t{i} (k {ddl} NOT NULL PRIMARY KEY)",
            f"INSERT INTO t{i} VALUES " + ", ".join(f"({v})" for v in values),
            database=fresh_db,
        )
        got = mariadb.query(f"SELECT k, {int_hash_sql('k')} FROM t{i} ORDER BY k", database=fresh_db)
        assert [(int(k), int(h)) for k, h in got] == [(v, int_hash(v)) for v in values], ddl
        (total,) = mariadb.query(f"SELECT SUM({int_hash_sql('k')}) FROM t{i}", database=fresh_db)[0]
        assert int(total) % 2**64 == sum(int_hash(v) for v in values) % 2**64, ddl
