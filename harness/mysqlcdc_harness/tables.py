"""Test tables used by the consistency tests, the demo and the benchmarks.

Each variant creates and fills a table quickly (MariaDB's SEQUENCE engine) and describes
how the concurrent writer makes new keys and keys near a given one.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
import string

from mysqlcdc_harness.writer import TableSpec


def _values(rng: random.Random):
    return (
        rng.randint(-(2**31), 2**31 - 1),
        "".join(rng.choices(string.ascii_letters + "éü€😀 ", k=rng.randint(0, 20))),
        decimal.Decimal(rng.randint(-(10**9), 10**9)) / 100,
        dt.datetime(2020, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**14) // 1000 * 1000),
    )


VALUE_COLS = ("a", "s", "amount", "ts")
VALUE_DDL = "a INT, s VARCHAR(64), amount DECIMAL(12,2), ts DATETIME(3)"
VALUE_FILL = ("seq * 7 % 1000003", "CONCAT('row-', seq)", "seq / 100", "'2024-01-01' + INTERVAL seq SECOND")


def create_int_table(server, db: str, rows: int, table: str = "orders") -> TableSpec:
    server.execute(
        f"CREATE TABLE `{table}` (id BIGINT NOT NULL PRIMARY KEY, {VALUE_DDL}) ENGINE=InnoDB",
        f"INSERT INTO `{table}` SELECT seq * 2, {', '.join(VALUE_FILL)} FROM seq_1_to_{rows}",
        f"ANALYZE TABLE `{table}`",
        database=db,
    )
    top = rows * 2 + 1000

    return TableSpec(
        db,
        table,
        ("id",),
        VALUE_COLS,
        new_key=lambda rng: (rng.randint(1, top),),
        values=_values,
        near=lambda k, rng: (max(1, k[0] + rng.randint(-3, 3)),),
    )


def create_composite_table(server, db: str, rows: int, table: str = "tenant_items") -> TableSpec:
    tenants = 4
    per = rows // tenants
    server.execute(
        f"CREATE TABLE `{table}` (tenant INT NOT NULL, id INT NOT NULL, {VALUE_DDL}, "
        f"PRIMARY KEY (tenant, id)) ENGINE=InnoDB",
        f"INSERT INTO `{table}` SELECT (seq - 1) DIV {per} + 1, (seq - 1) MOD {per} + 1, "
        f"{', '.join(VALUE_FILL)} FROM seq_1_to_{per * tenants}",
        f"ANALYZE TABLE `{table}`",
        database=db,
    )
    return TableSpec(
        db,
        table,
        ("tenant", "id"),
        VALUE_COLS,
        new_key=lambda rng: (rng.randint(1, tenants + 1), rng.randint(1, per + 500)),
        values=_values,
        near=lambda k, rng: (k[0], max(1, k[1] + rng.randint(-3, 3))),
    )


U64_MAX = 2**64 - 1


def create_unsigned_edge_table(server, db: str, rows: int, table: str = "u_edges") -> TableSpec:
    """BIGINT UNSIGNED keys, half just above 0 and half just below 2^64 - 1 (where a cast to a
    signed 64-bit type turns keys >= 2^63 negative): the writer inserts, deletes and moves keys
    at both ends."""
    half = rows // 2
    server.execute(
        f"CREATE TABLE `{table}` (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, {VALUE_DDL}) ENGINE=InnoDB",
        f"INSERT INTO `{table}` SELECT seq * 3, {', '.join(VALUE_FILL)} FROM seq_1_to_{half}",
        f"INSERT INTO `{table}` SELECT {U64_MAX} - seq * 3, {', '.join(VALUE_FILL)} FROM seq_1_to_{rows - half}",
        f"ANALYZE TABLE `{table}`",
        database=db,
    )
    span = rows * 3 + 1000

    def new_key(rng: random.Random) -> tuple[int]:
        k = rng.randint(0, span)
        return (k if rng.random() < 0.5 else U64_MAX - k,)

    return TableSpec(
        db,
        table,
        ("id",),
        VALUE_COLS,
        new_key=new_key,
        values=_values,
        near=lambda k, rng: (min(U64_MAX, max(0, k[0] + rng.randint(-3, 3))),),
    )


def _flip_case(s: str, rng: random.Random) -> str:
    return "".join(ch.upper() if rng.random() < 0.5 else ch.lower() for ch in s)


def create_string_table(server, db: str, rows: int, table: str = "codes") -> TableSpec:
    """A case-insensitive string primary key; keys differ from their neighbours only by case."""
    server.execute(
        f"CREATE TABLE `{table}` (code VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci "
        f"NOT NULL PRIMARY KEY, {VALUE_DDL}) ENGINE=InnoDB",
        # Mixed case keys: every third one upper-case, so ORDER BY (ci) != binary order.
        f"INSERT INTO `{table}` SELECT IF(seq % 3 = 0, CONCAT('K', LPAD(seq, 7, '0'), 'X'), "
        f"CONCAT('k', LPAD(seq, 7, '0'), 'x')), {', '.join(VALUE_FILL)} FROM seq_1_to_{rows}",
        f"ANALYZE TABLE `{table}`",
        database=db,
    )

    def new_key(rng: random.Random):
        return (_flip_case(f"k{rng.randint(1, rows + 500):07d}" + rng.choice(["", "x", "a", "Z", "é"]), rng),)

    def near(k, rng: random.Random):
        base = k[0] if k[0] is not None else "k0000001"
        return (_flip_case(base, rng) + rng.choice(["", "", "0", "~", " z"]),)

    return TableSpec(db, table, ("code",), VALUE_COLS, new_key=new_key, values=_values, near=near)


VARIANTS = {
    "int": create_int_table,
    "composite": create_composite_table,
    "string": create_string_table,
}
