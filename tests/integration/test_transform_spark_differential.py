"""Differential test: transform expressions (``cdc/transform/transform_exprs.py``, ``cdc/transform/transform_eval.py``)
against a real local Spark SQL, ANSI mode on and session time zone UTC.

The promise of those modules: for every expression they accept, the values and the output
column types equal what Spark SQL gives for the same rows; where Spark raises, the evaluator
raises TransformEvalError. Checked here for

* every entry of SPARK_CHECKED_CASES (their expected values are checked against Spark too) and
  SPARK_CHECKED_TYPES (``tests/unit/cdc/transform/test_transform_exprs.py``), and
* a generated corpus: each supported construct (``SUPPORTED``) over a small table of edge values
  (NULLs, 0, negatives, int8..int64 extremes, decimals of several precisions and scales, doubles
  and floats with NaN, +-Infinity and -0.0, empty and non-ASCII text, dates and timestamps at
  the limits), as projections (``SELECT id, <expr> FROM t``) and as filters
  (``SELECT ... FROM t WHERE <filter>``).

The same pyarrow Table feeds both sides: Spark gets it through ``createDataFrame`` (with the
metadata columns ``__table_name__`` ... as real columns), the evaluator gets the batch and the
metadata as arguments. Compared are the values row by row (a float's sign of zero, NaN, a
decimal's scale, a timestamp's zone) and the types (Spark's result type against the sink
type ``output_schema`` gives).

Spark runs the queries the way it runs them over a table: a small DataFrame is a LocalRelation,
which Spark computes in the optimizer's first batch, before the rules that rewrite expressions
(null propagation, boolean simplification, reordering of integer + and *, ...) -- and some of
those change a result (an error becomes a value). That shortcut is switched off here.

Errors: a query fails for the whole table if one row fails, so where the evaluator fails, its
rows are judged in groups: the rows it fails on, one query per error condition it names (Spark
must fail on each group by itself), and the rows it accepts (Spark must give the same values).
Where the evaluator fails on rows Spark accepts, that is a disagreement unless the evaluator
says the row's value is one it does not reproduce (``REPRODUCTION_LIMITS``: "equal or error",
never different). A refusal that claims Spark fails too (a parse error, a constant part that
fails when Spark plans the query) is checked against Spark as well.

Spark work is batched (one analysis for the types of many expressions, one query for many
expressions expected to succeed, split in halves only when it fails) and runs in a few threads.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import math
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.transform.transform_exprs import (
    TransformError,
    TransformEvalError,
    compile_filter,
    compile_projection,
)
from tests.unit.cdc.transform.test_transform_exprs import SCHEMA as UNIT_SCHEMA
from tests.unit.cdc.transform.test_transform_exprs import SPARK_CHECKED_CASES, SPARK_CHECKED_TYPES

pytestmark = [pytest.mark.integration, pytest.mark.spark]

D = decimal.Decimal
UTC = dt.timezone.utc
DATABASE, TABLE = "shop", "orders"
OPS = ["+I", "-U", "+U", "-D", "r"]
META = ["__namespace_name__", "__schema_name__", "__table_name__", "__data_event_type__"]
# Evaluator errors that say "Spark gives a value here that is not reproduced exactly" (the
# documented equal-or-error cases), as opposed to "Spark fails on this row".
REPRODUCTION_LIMITS = (
    "UNSUPPORTED_VALUE",
    "not reproduced here",
    "only the plain forms are read here",
    "differs from the one-character mapping",
)


# --- the edge table -----------------------------------------------------------------------------

N = 24


def _n(values: list[Any]) -> list[Any]:
    """``values`` cycled to N rows."""
    return [values[k % len(values)] for k in range(N)]


def _ts(*a: int, tz: Any = UTC) -> dt.datetime:
    return dt.datetime(*a, tzinfo=tz)


_TIMES = [
    (1, 1, 1),
    (9999, 12, 31, 23, 59, 59, 999999),
    (1969, 12, 31, 23, 59, 59, 999999),
    (1970, 1, 1),
    (2020, 1, 2, 3, 4, 5, 600),
    (2020, 1, 2),
    (1900, 1, 1, 12),
    (999, 12, 31, 23, 59, 59),
    (1000, 1, 1),
    (2024, 2, 29, 10, 11, 12, 500000),
    (1582, 10, 10),
    (2038, 1, 19, 3, 14, 7),
    (2020, 1, 1, 23),
    (1969, 12, 31, 12),
]
_DATES = [
    dt.date(1, 1, 1),
    dt.date(9999, 12, 31),
    dt.date(1970, 1, 1),
    dt.date(1969, 12, 31),
    dt.date(2024, 2, 29),
    dt.date(2020, 1, 2),
    dt.date(1582, 10, 4),
    dt.date(1582, 10, 15),
    dt.date(1900, 2, 28),
    dt.date(999, 12, 31),
    dt.date(1000, 1, 1),
    dt.date(2020, 1, 1),
]
# name, Arrow type, Spark DDL type, values (row k has id k). i, b, t, sm, d2, d5 hold values whose
# sums and products fit their types (so most expressions over them succeed: one batched query);
# ix, bx, tx, smx, d2x, d5x hold the extremes (each expression over them is a query of its own).
EDGE_COLUMNS: list[tuple[str, pa.DataType, str, list[Any]]] = [
    ("id", pa.int32(), "INT", list(range(N))),
    (
        "i",
        pa.int32(),
        "INT",
        [None, 0, 1, -1, 7, -7, 46340, -46340, 100, 3, -2, 15, -15, 14, 2, 5, 12, None, 10, -3, 1000, 125, 2, 4],
    ),
    (
        "b",
        pa.int64(),
        "BIGINT",
        [
            None,
            5,
            2,
            -1,
            2,
            3,
            3037000499,
            -3037000499,
            10**9,
            -5,
            7,
            2,
            -1,
            9,
            1,
            4,
            -2,
            3,
            None,
            6,
            2**31,
            -(2**31) - 1,
            1,
            8,
        ],
    ),
    ("t", pa.int8(), "TINYINT", _n([None, 4, 1, -1, 11, -11, 5, -5, 10, 2, 3, 7, -7, 9, 6, 1, 8, -9, 8, None, 9, -2])),
    ("sm", pa.int16(), "SMALLINT", _n([None, 6, 181, -181, 1, -1, 150, 2, -3, 100, 99, 5, 7, 10, 11, 12, None, -150])),
    ("ix", pa.int32(), "INT", _n([2**31 - 1, -(2**31), None, 0, 1, -1])),
    ("bx", pa.int64(), "BIGINT", _n([2**63 - 1, -(2**63), None, 0, 1, -1])),
    ("tx", pa.int8(), "TINYINT", _n([127, -128, None, 0, 1, -1])),
    ("smx", pa.int16(), "SMALLINT", _n([32767, -32768, None, 0, 1, -1])),
    (
        "s",
        pa.string(),
        "STRING",
        [
            None,
            "",
            " ",
            "abc",
            "h\u00e9llo",
            "a\U0001f600b",
            " 12 ",
            "-7",
            "1.5",
            "2024-02-29",
            "TRUE",
            "stra\u00dfe",
            "\u039f\u0394\u039f\u03a3",
            "1e3",
            "\t42\n",
            "Spark SQL",
            "+3",
            "0012.30",
            "\x0b5",
            "\x7f5\x7f",
            "2020-01-02 03:04:05.5",
            "NaN",
            "2147483648",
            "SSparkSQLS",
        ],
    ),
    (
        "s2",
        pa.string(),
        "STRING",
        [
            None,
            "abc",
            "",
            "x",
            "B",
            "a",
            "\u00e9",
            "z",
            None,
            "123",
            " ",
            "SQL",
            "ab",
            "c",
            "A",
            "b",
            "\U0001f600",
            "\x7f2020-01-02\x7f",
            "de",
            "-",
            "\x7ftrue",
            "\x7f1.5",
            "\x015",
            "\x7f2020-01-02 03:04:05",
        ],
    ),
    (
        "d",
        pa.decimal128(10, 2),
        "DECIMAL(10,2)",
        [
            None,
            D("0"),
            D("-0.05"),
            D("12.35"),
            D("99999999.99"),
            D("-99999999.99"),
            D("1.25"),
            D("-1.25"),
            D("2.50"),
            D("0.01"),
            D("-0.01"),
            D("1.05"),
            D("150.00"),
            D("-149.99"),
            D("7"),
            D("3.33"),
            D("2"),
            D("-2"),
            D("0.5"),
            None,
            D("1000"),
            D("-3"),
            D("33.33"),
            D("1.15"),
        ],
    ),
    (
        "d2",
        pa.decimal128(38, 10),
        "DECIMAL(38,10)",
        [
            None,
            D("123456789.9999999999"),
            D("1.0000005"),
            D("99999999999999999999.9999999999"),
            D("-99999999999999999999.9999999999"),
            D("0.0000000001"),
            D("-0.0000000001"),
            D("0.1"),
            D("12345678901234567890.1234567891"),
            D("0.0000001"),
            D("1"),
            D("-1"),
            D("2.5"),
            D("2147483647.9999999999"),
            None,
            D("7.7777777777"),
            D("-0.5"),
            D("-2147483648.9999999999"),
            D("0.3333333333"),
            D("1.5"),
            D("32767.9999999999"),
            D("-2"),
            D("100"),
            D("0.0000000005"),
        ],
    ),
    (
        "d3",
        pa.decimal128(5, 0),
        "DECIMAL(5,0)",
        [
            None,
            D(20),
            D(99999),
            D(-99999),
            D(1),
            D(-1),
            D(5),
            D(3),
            D(2),
            D(7),
            D(-7),
            D(10),
            D(100),
            None,
            D(12),
            D(50),
            D(-50),
            D(4),
            D(6),
            D(8),
            D(9),
            D(11),
            D(13),
            D(15),
        ],
    ),
    (
        "d4",
        pa.decimal128(4, 4),
        "DECIMAL(4,4)",
        [
            None,
            D("0.0005"),
            D("0.9999"),
            D("-0.9999"),
            D("0.5"),
            D("-0.5"),
            D("0.0001"),
            D("0.2850"),
            D("0.2500"),
            D("0.1"),
            None,
            D("0.3333"),
            D("-0.25"),
            D("0.05"),
            D("0.005"),
            D("0.75"),
            D("0.125"),
            D("0.01"),
            D("-0.01"),
            D("0.9"),
            D("0.2"),
            D("0.4"),
            D("0.6"),
            D("0.8"),
        ],
    ),
    (
        "d5",
        pa.decimal128(38, 0),
        "DECIMAL(38,0)",
        _n([None, D(10**20), D(-(10**20)), D(1), D(-1), D(7), D(3), D(2), D(5), D(100), D(-100), D(10**18), D(9)]),
    ),
    (
        "d18",
        pa.decimal128(18, 17),
        "DECIMAL(18,17)",
        _n([D("1.99999999999999999"), None, D("-1.99999999999999999"), D("0.5"), D("9.99999999999999999")]),
    ),
    (
        "d2x",
        pa.decimal128(38, 10),
        "DECIMAL(38,10)",
        _n(
            [
                D("9" * 28 + "." + "9" * 10),
                D("-" + "9" * 28 + "." + "9" * 10),
                None,
                D("0"),
                D("3003003003003003003003003003.0030650150"),
                D("300300300300300300300300300.3003515015"),
            ]
        ),
    ),
    (
        "d5x",
        pa.decimal128(38, 0),
        "DECIMAL(38,0)",
        _n([D(10**38 - 1), D(-(10**38) + 1), None, D(0), D(10**37 + 5), D(12345678901234567890123456789012345678)]),
    ),
    (
        "f",
        pa.float64(),
        "DOUBLE",
        [
            None,
            0.0,
            -0.0,
            math.nan,
            math.inf,
            -math.inf,
            1.7976931348623157e308,
            5e-324,
            2.5,
            -2.5,
            0.285,
            2.675,
            1e15 + 0.5,
            3e9,
            1e17,
            1.5,
            0.1,
            -0.001,
            1e-40,
            123.456,
            1.005,
            1e20,
            9.223372036854776e18,
            2.82879384806159e17,
        ],
    ),
    (
        "r",
        pa.float32(),
        "FLOAT",
        [
            None,
            0.0,
            -0.0,
            math.nan,
            math.inf,
            -math.inf,
            3.4028234663852886e38,
            1.401298464e-45,
            0.1,
            -2.5,
            40000.0,
            0.25,
            1.5,
            2.5,
            None,
            100.0,
            -1.0,
            3.0,
            7.0,
            0.5,
            1e10,
            -1e10,
            16777216.0,
            2.675,
        ],
    ),
    ("dt", pa.date32(), "DATE", _n([None] + _DATES)),
    ("ts", pa.timestamp("us", tz="UTC"), "TIMESTAMP", _n([None] + [_ts(*x) for x in _TIMES])),
    ("ntz", pa.timestamp("us"), "TIMESTAMP_NTZ", _n([None] + [_ts(*x, tz=None) for x in reversed(_TIMES)])),
    ("ok", pa.bool_(), "BOOLEAN", _n([None, True, False, True])),
    ("bin", pa.binary(), "BINARY", _n([None, b"", b"\x00\xff", b"abc", b"\x80"])),
    ("big", pa.large_string(), "STRING", _n([None, "x", "", "h\u00e9llo", "ab", "\u00df"])),
]
EDGE_OPS = _n(OPS)


def edge_table() -> pa.Table:
    assert all(len(values) == N for *_, values in EDGE_COLUMNS)
    return pa.table({name: pa.array(values, type=t) for name, t, _, values in EDGE_COLUMNS})


def checked_table() -> tuple[pa.Table, dict[int, tuple[int, ...]]]:
    """The rows of every SPARK_CHECKED_CASES entry, one after another (ids 0...), and each case's ids."""
    rows, ids = [], {}
    for k, (_, case_rows, _) in enumerate(SPARK_CHECKED_CASES):
        ids[k] = tuple(range(len(rows), len(rows) + len(case_rows)))
        rows.extend(case_rows)
    data = pa.Table.from_pylist(rows, schema=UNIT_SCHEMA)
    return data.add_column(0, "id", pa.array(range(len(rows)), pa.int32())), ids


_SPARK_DDL = {
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INT",
    pa.int64(): "BIGINT",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.string(): "STRING",
    pa.large_string(): "STRING",
    pa.binary(): "BINARY",
    pa.bool_(): "BOOLEAN",
    pa.date32(): "DATE",
    pa.timestamp("us", tz="UTC"): "TIMESTAMP",
    pa.timestamp("us"): "TIMESTAMP_NTZ",
}


def spark_type_name(t: pa.DataType) -> str:
    """The Spark type (as ``DataType.simpleString``) of a column of Arrow type ``t``."""
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    return _SPARK_DDL[t].lower()


# --- the corpus ---------------------------------------------------------------------------------

NUMERIC = ["i", "b", "t", "sm", "d", "d2", "d3", "d4", "d5", "f", "r"]
LITERALS = [
    "0",
    "1",
    "-1",
    "3",
    "2147483647",
    "-2147483648",
    "2147483648",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "12345678901234567890",
    "5L",
    "2Y",
    "3S",
    "-2Y",
    "1.5",
    "1.50",
    "0.001",
    "-0.5",
    ".5",
    "0.0",
    "-0.0",
    "1.5e3",
    "1E-3",
    "-0.0e0",
    "1.5D",
    "-1.5D",
    "10BD",
    "1.0F",
    "1e308",
    "'it''s'",
    "'h\u00e9llo'",
    "''",
    '"dq"',
    "r'raw'",
    "TRUE",
    "FALSE",
    "DATE '2024-02-29'",
    "DATE '0001-01-01'",
    "DATE '9999-12-31'",
    "TIMESTAMP '2024-02-29 10:11:12.5'",
    "TIMESTAMP '9999-12-31 23:59:59.999999'",
    "TIMESTAMP '1969-12-31 23:59:59.999999'",
    "CAST(NULL AS STRING)",
    "CAST(NULL AS DECIMAL(5,1))",
    "CAST(NULL AS INT)",
    "CAST(NULL AS DATE)",
    "99999999999999999999999999999999999999",
    "0.00000000000000000000000000000000000001",
]
# operands for the literal side of arithmetic and comparisons
OPERAND_LITERALS = [
    "0",
    "1",
    "-1",
    "3",
    "65536",
    "5L",
    "2Y",
    "3S",
    "1.5",
    "0.001",
    "1.5e3",
    "10BD",
    "1.0F",
    "NULL",
    "12345678901234567890",
]
ZERO_DIVISORS = {"i", "d", "f", "r", "0"}
CAST_TARGETS = [
    "STRING",
    "TINYINT",
    "SMALLINT",
    "INT",
    "BIGINT",
    "FLOAT",
    "DOUBLE",
    "DECIMAL",
    "DECIMAL(5,2)",
    "DECIMAL(38,10)",
    "DECIMAL(38,0)",
    "DECIMAL(3,3)",
    "DATE",
    "TIMESTAMP",
    "BOOLEAN",
]
CAST_SOURCES = [
    "i",
    "b",
    "t",
    "sm",
    "d",
    "d2",
    "d3",
    "d4",
    "d5",
    "f",
    "r",
    "s",
    "s2",
    "dt",
    "ts",
    "ntz",
    "ok",
    "bin",
    "NULL",
    "'2024-02-29'",
    "' 7 '",
    "1.5",
    "-0.5",
    "2147483648",
    "1e10",
    "TRUE",
]
EXTREME_CASTS = [
    f"CAST({x} AS {t})"
    for x in ("ix", "bx", "tx", "smx", "d2x", "d5x", "d18")
    for t in ("TINYINT", "SMALLINT", "INT", "BIGINT", "DOUBLE", "FLOAT", "DECIMAL(5,2)", "DECIMAL(38,0)", "STRING")
]
# the extremes: overflow at each type's bounds
EXTREMES = [
    f"{x} {op} {y}"
    for op in ("+", "-", "*")
    for x, y in (
        ("ix", "i"),
        ("ix", "1"),
        ("ix", "-1"),
        ("bx", "b"),
        ("bx", "1"),
        ("bx", "-1L"),
        ("tx", "t"),
        ("tx", "1Y"),
        ("smx", "sm"),
        ("smx", "1S"),
        ("d2x", "d"),
        ("d2x", "d2"),
        ("d5x", "d5"),
        ("d5x", "1"),
        ("ix", "ix"),
    )
] + [
    "-ix",
    "abs(ix)",
    "-bx",
    "abs(bx)",
    "-tx",
    "abs(tx)",
    "-smx",
    "abs(smx)",
    "-d2x",
    "abs(d2x)",
    "-d5x",
    "abs(d5x)",
    "ix div -1",
    "bx div -1",
    "bx % -1",
    "ix % -1",
    "tx % -1Y",
    "bx div 2",
    "ix / -1",
    "d5x / 3",
    "d2x / 7",
    "d5x % 7",
    "round(ix, -1)",
    "round(tx, -1)",
    "round(smx, -2)",
    "round(bx, -1)",
    "round(d5x, -1)",
    "round(d2x, 5)",
    "round(d2x, -30)",
    "ix + 0",
    "bx - 0",
    "ix < i",
    "bx = b",
    "bx IN (9223372036854775807)",
    "d5x > d2x",
    "coalesce(d5x, d4)",
    "CASE WHEN ok THEN d2x ELSE d4 END",
    "i + 2147483647",
    "(i + 2147483647) + -2147483647",
    "2147483647 + i + -2147483647",
    "i - 2147483647 + 2147483647",
    "(i * 2) * 1073741824",
    "i * 2 * 0",
    "(bx + 9223372036854775807) + -9223372036854775807",
    "(tx + 127Y) + -127Y",
    "(i + 2147483647) + (-2147483647 + i)",
    "(i + 1) + 2147483647",
    "CASE WHEN i > 100000 THEN (i + 1) + 2147483647 END",
    "CASE WHEN i > 100 THEN (i + 1) + 2147483647 END",
    "CASE WHEN i > 100000 THEN (i * 2) * 1073741824 END",
    "CASE WHEN i > 0 THEN 2147483647 + 1 END",
    "CASE WHEN i > 100000 THEN 2147483647 + 1 END",
    # products of 40 and 41 digits whose digits after the 6th decimal are 4999..: one HALF_UP rounding
    "CAST(3.33 AS DECIMAL(10,2)) * d2x",
    "d2x / CAST(3 AS DECIMAL(1,0))",
    "d18 * 1",
    "CAST(d18 * 1 AS INT)",
    "CAST(d18 + d18 AS INT)",
    "CAST(CAST(d18 AS DECIMAL(20,17)) AS INT)",
    "CAST(d18 AS DECIMAL(18,16))",
]
COMPARE_PAIRS = [
    ("i", "b"),
    ("i", "t"),
    ("i", "d"),
    ("d", "d2"),
    ("d4", "d5"),
    ("f", "r"),
    ("f", "i"),
    ("r", "t"),
    ("f", "d"),
    ("b", "d5"),
    ("s", "s2"),
    ("s", "big"),
    ("dt", "ts"),
    ("ts", "ntz"),
    ("dt", "ntz"),
    ("ok", "ok"),
    ("bin", "bin"),
    ("f", "0.0"),
    ("f", "1.5e3"),
    ("r", "0.1"),
    ("d", "1.005"),
    ("i", "NULL"),
    ("NULL", "s"),
    ("s", "'abc'"),
    ("s", "''"),
    ("dt", "'2024-02-29'"),
    ("ts", "'2020-01-02'"),
    ("ts", "'2020-01-02 03:04:05.0006'"),
    ("ntz", "'2020-01-02'"),
    ("dt", "DATE '1970-01-01'"),
    ("ts", "TIMESTAMP '1970-01-01 00:00:00'"),
    ("ok", "TRUE"),
    ("__data_event_type__", "'-D'"),
    ("__table_name__", "'orders'"),
    ("i", "2147483648"),
    ("b", "9223372036854775808"),
    ("t", "2Y"),
]
COMPARE_OPS = ["=", "==", "<>", "!=", "<", "<=", ">", ">=", "<=>"]
# conditions that fail on some rows of the edge table, for the laziness and optimizer probes
FAILING = {"int": "CAST(s AS INT)", "div0": "b div i", "ovf": "i + 2147483647"}


def projection_corpus() -> list[str]:
    out: list[str] = [name for name, *_ in EDGE_COLUMNS] + META + LITERALS
    for op in ("+", "-", "*", "/", "div", "%"):
        for k, x in enumerate(NUMERIC):
            for y in NUMERIC[k if op in ("+", "*") else 0 :] + OPERAND_LITERALS:  # + and * commute
                # i, d, f, r and 0 hold zeros: each division by zero is a query of its own, a few suffice
                if op in ("/", "div", "%") and y in ZERO_DIVISORS and x not in ("b", "d"):
                    continue
                out.append(f"{x} {op} {y}")
        for y in OPERAND_LITERALS:  # i, d and f hold zeros: the divisors here do not
            out += [f"{y} {op} {x}" for x in (("i", "d", "f") if op in ("+", "-", "*") else ("b", "d3", "r + 1e39"))]
    out += EXTREMES + EXTREME_CASTS
    out += [
        "1 / 0",
        "5 div 2",
        "-7 % 3",
        "2147483647 + 1",
        "1.5 * 1.5",
        "10BD / 3",
        "(i + b) * d",
        "i * 2 - b",
        "-(-i)",
        "- - i",
        "-d / 3",
        "f * 10",
        "f + f",
        "r * r",
        "r + 0.1",
        "d + 0.001",
        "d * d2",
        "d / d2",
        "d2 / d",
        "d2 + d5",
        "d4 * d4",
        "d4 / d4",
        "d5 % d4",
        "d % 3",
        "d * 100",
        "d * i",
        "d + d2",
        "d / d",
    ]
    for x in NUMERIC + ["1.5", "-2147483648", "5L", "0.0"]:  # not --x: -- starts a comment
        out += [f"-{x}" if not x.startswith("-") else f"-({x})", f"abs({x})"]
    for x in NUMERIC:
        out += [f"round({x})"] + [f"round({x}, {k})" for k in (-2, -1, 0, 1, 2, 5)]
    out += [
        "round(d, -5)",
        "round(d2, 20)",
        "round(f, -300)",
        "round(2.5)",
        "round(-2.5)",
        "round(f, 38)",
        "round(d5, -38)",
        "round(i, 10)",
    ]
    for x in CAST_SOURCES:
        for target in CAST_TARGETS:
            out.append(f"CAST({x} AS {target})")
    out += [
        "CAST(big AS STRING)",
        "CAST(big AS INT)",
        "CAST(f AS STRING)",  # (a large_string, like s)
        "CAST(CAST(f AS DECIMAL(38,10)) AS STRING)",
        "CAST(CAST(s AS DOUBLE) AS INT)",
        "CAST(d AS DOUBLE) * 3",
        "CAST(r AS DOUBLE)",
        "CAST(ts AS DATE) = dt",
        "CAST(CAST(dt AS TIMESTAMP) AS STRING)",
        "CAST(CAST(ntz AS TIMESTAMP) AS STRING)",
        "CAST(CAST(b AS STRING) AS BIGINT)",
        "CAST(5L AS DECIMAL)",
        "CAST(2Y AS DECIMAL(2,0))",
        "CAST(1.5D AS DECIMAL(2,1))",
        "CAST(10BD AS DECIMAL(1,0))",
    ]
    for x, y in COMPARE_PAIRS:
        for op in COMPARE_OPS:
            out.append(f"{x} {op} {y}")
    out += ["i IS NOT DISTINCT FROM b", "f = f", "f <> f", "f < 'x'", "f > 1e308", "r < f", "NOT f = f"]
    # logic, null tests
    bools = ["ok", "i > 0", "f = f", "s IS NULL", "NULL", "TRUE", "FALSE", "d < 0"]
    for k, a in enumerate(bools):
        out.append(f"NOT ({a})")
        for c in bools[k:]:
            out += [f"({a}) AND ({c})", f"({a}) OR ({c})"]
    for x in [name for name, *_ in EDGE_COLUMNS] + ["NULL", "i + 1", "s || s2"]:
        out += [f"{x} IS NULL", f"{x} IS NOT NULL", f"isnull({x})", f"isnotnull({x})"]
    out += ["NOT s IS NULL", "NOT (s IS NULL)"]
    # IN, BETWEEN, LIKE
    out += [
        "i IN (1, 2)",
        "i IN (1, NULL)",
        "i NOT IN (1, NULL)",
        "i NOT IN (1, 2)",
        "i IN (NULL)",
        "i IN (1.5, 7)",
        "i IN (2147483648, 0)",
        "b IN (-1, 2)",
        "t IN (127, -128)",
        "d IN (1.25, 2)",
        "d IN (0.001)",
        "d2 IN (1, 0.1)",
        "f IN (0.0, 2.5)",
        "f IN (1.5e3, 2.5D)",
        "f NOT IN (0.0)",
        "r IN (0.1, 2.5)",
        "r IN (1.0F)",
        "s IN ('abc', '')",
        "s IN ('abc', NULL)",
        "s NOT IN ('abc')",
        "dt IN (DATE '2024-02-29')",
        "dt IN ('2024-02-29', '1970-01-01')",
        "ts IN (TIMESTAMP '1970-01-01 00:00:00')",
        "ok IN (TRUE)",
        "ok IN (FALSE, NULL)",
        "NULL IN (1, 2)",
        "__data_event_type__ IN ('+I', '+U')",
        "big IN ('x', '')",
    ]
    out += [
        "i BETWEEN 1 AND 10",
        "i NOT BETWEEN 1 AND 10",
        "i BETWEEN b AND 10",
        "i BETWEEN -2147483648 AND 0",
        "d BETWEEN 0 AND 1.5",
        "d BETWEEN -1 AND d2",
        "f BETWEEN -1 AND 3",
        "f BETWEEN 0.0 AND 1e308",
        "r BETWEEN 0 AND 1",
        "s BETWEEN 'a' AND 'z'",
        "dt BETWEEN '2000-01-01' AND '2024-12-31'",
        "ts BETWEEN '1970-01-01' AND '2030-01-01'",
        "ts NOT BETWEEN dt AND ts",
        "i BETWEEN 10 AND 1",
        "ntz BETWEEN dt AND ntz",
        "b BETWEEN NULL AND 3",
    ]
    for pattern in [
        "a%",
        "%b",
        "_",
        "%",
        "",
        "a_c",
        "%\u00e9%",
        "a\U0001f600b",
        "%SQL",
        "S%L",
        "%a%b%",
        "_%_",
        "__",
        "%.%",
        "ab%_c",
        "%\n%",
        "%5",
    ]:
        out += [f"s LIKE '{pattern}'", f"s NOT LIKE '{pattern}'"]
    out += ["big LIKE 'h%'", "__table_name__ LIKE 'ord%'", "NULL LIKE 'a'", "s LIKE NULL"]
    # strings
    out += [
        "s || s2",
        "s || ''",
        "s || NULL",
        "concat(s, '-', s2)",
        "concat(s)",
        "concat(s, big)",
        "s || CAST(i AS STRING)",
        "concat(s2, s2, s2)",
        "'a' || 'b'",
        "concat('x', NULL)",
        "s || __table_name__",
        "concat(CAST(d AS STRING), CAST(ts AS STRING))",
    ]
    for x in ["s", "s2", "big", "__data_event_type__", "'abc'", "NULL"]:
        for fn in [
            "upper",
            "ucase",
            "lower",
            "lcase",
            "trim",
            "ltrim",
            "rtrim",
            "length",
            "char_length",
            "character_length",
        ]:
            out.append(f"{fn}({x})")
    out += [
        "length(bin)",
        "trim(BOTH FROM s)",
        "trim(LEADING FROM s)",
        "trim(TRAILING FROM s)",
        "trim(BOTH 'SL' FROM s)",
        "trim(LEADING 'SL' FROM s)",
        "trim(TRAILING 'SL' FROM s)",
        "trim('ab' FROM s)",
        "trim('' FROM s)",
        "trim('\u00e9' FROM big)",
        "ltrim('abc', s)",
        "rtrim('S', s)",
        "trim(s2 FROM s)",
    ]
    for pos in (-30, -3, -1, 0, 1, 2, 5, 30):
        out.append(f"substring(s, {pos})")
        for length in (-1, 0, 1, 3, 2147483647):
            out.append(f"substr(s, {pos}, {length})")
    out += [
        "substring(s FROM 2 FOR 3)",
        "substring(s FROM -10 FOR 5)",
        "substring(big, 2)",
        "substr(s, -2147483648, 3)",
        "substring(s, 2147483647, 2147483647)",
        "substring(NULL, 1, 2)",
        "substring('Spark SQL', 5)",
    ]
    # CASE, IF, COALESCE
    out += [
        "CASE WHEN i > 0 THEN 1 WHEN i < 0 THEN 2.0 ELSE 1.2 END",
        "CASE WHEN ok THEN d ELSE f END",
        "CASE WHEN ok THEN d ELSE d2 END",
        "CASE WHEN ok THEN d4 ELSE d5 END",
        "CASE WHEN ok THEN i ELSE b END",
        "CASE WHEN ok THEN t ELSE r END",
        "CASE WHEN ok THEN i ELSE r END",
        "CASE WHEN ok THEN dt ELSE ts END",
        "CASE WHEN ok THEN ntz ELSE ts END",
        "CASE WHEN ok THEN dt ELSE ntz END",
        "CASE WHEN ok THEN s END",
        "CASE i WHEN 1 THEN 'one' WHEN -1 THEN 'minus' ELSE 'other' END",
        "CASE i WHEN NULL THEN 1 ELSE 0 END",
        "CASE WHEN NULL THEN 1 ELSE 0 END",
        "CASE WHEN i > 0 THEN NULL ELSE d END",
        "CASE s WHEN '' THEN 'e' END",
        "CASE WHEN f > 0 THEN f WHEN f < 0 THEN -f END",
        "CASE WHEN ok THEN 1.5 ELSE 12345678901234567890 END",
        "CASE WHEN ok THEN 5L ELSE 1.5 END",
        "CASE WHEN ok THEN 2Y ELSE 3S END",
        "CASE WHEN ok THEN bin END",
        "if(ok, 'y', 'n')",
        "if(ok, i, b)",
        "if(i > 0, d, d2)",
        "if(ok, NULL, s)",
        "if(NULL, 1, 2)",
        "if(f = f, f, 0.0)",
        "if(ok, dt, '2020-01-01')",
    ]
    out += [
        "coalesce(i, b)",
        "coalesce(i, d)",
        "coalesce(f, d)",
        "coalesce(s, s2, 'z')",
        "nvl(dt, ts)",
        "ifnull(d, d2)",
        "coalesce(NULL, i)",
        "coalesce(r, t)",
        "coalesce(r, i)",
        "coalesce(i)",
        "coalesce(NULL, NULL, s)",
        "nvl(s, big)",
        "coalesce(d4, d5)",
        "coalesce(d5, 0.5)",
        "coalesce(ts, ntz)",
        "coalesce(bin, bin)",
        "coalesce(CAST(1 AS TINYINT), CAST(1 AS BIGINT), NULL)",
        "coalesce(ok, FALSE)",
        "coalesce(t, 2Y)",
    ]
    # laziness: a failing operand on rows Spark does not evaluate it for
    for fail in FAILING.values():
        out += [
            f"CASE WHEN s = '42' THEN {fail} END",
            f"if(i = 0, NULL, {fail})",
            f"coalesce(i, {fail})",
            f"i IS NULL OR {fail} > 0",
            f"ok AND {fail} > 0",
            f"NOT ok OR {fail} > 0",
        ]
    out += [
        "CASE WHEN i <> 0 THEN b div i END",
        "i <> 0 AND b / i > 1",
        "i = 0 OR b / i > 1",
        "CASE WHEN i = 0 THEN -1 WHEN b / i > 1 THEN 1 ELSE 0 END",
        "if(i = 0, NULL, b % i)",
        "CASE WHEN upper(s) = 'ABC' THEN 1 END",
        "CASE WHEN s = 'x' THEN upper(s) END",
    ]
    # optimizer probes: Spark's rewrites that drop the evaluation of a failing part
    for fail in FAILING.values():
        out += [
            f"{fail} + NULL",
            f"NULL * {fail}",
            f"{fail} = NULL",
            f"NULL < {fail}",
            f"{fail} <=> {fail}",
            f"{fail} = {fail}",
            f"({fail} > 0) AND FALSE",
            f"FALSE AND ({fail} > 0)",
            f"({fail} > 0) OR TRUE",
            f"CASE WHEN {fail} > 0 THEN 1 ELSE 1 END",
            f"if({fail} > 0, 'a', 'a')",
            f"({fail}) IS NULL",
            f"coalesce({fail}, 0)",
            f"{fail} IN (NULL)",
            f"CAST({fail} AS STRING) || NULL",
            f"abs({fail}) - NULL",
            f"{fail} BETWEEN NULL AND 1",
            f"({fail} > 0) AND NULL",
            f"-{fail} * 0",
            f"{fail} div NULL",
        ]
    out += [
        "(2147483647 + 1) IS NULL",
        "1 div 0 + NULL",
        "CAST('a' AS INT) IS NULL",
        "NULL AND CAST(s AS INT) > 0",
        "length(s) + NULL",
        "upper(s) || NULL",
        "NULL div (b div i)",
        "NULL % (b div i)",
        "NULL / (b div i)",
        "CAST(NULL AS BIGINT) div (b div i)",
        "NULL + (b div i)",
        "CAST(NULL AS INT) + (1 div 0)",
        "(1 div 0) + NULL",
        "NULL AND (1 div 0 > 0)",
        "(2147483647 + 1) IS NOT NULL",
        "isnull(2147483647 * 2)",
        "(1 div 0) IS NULL",
        "(1 / 0) IS NULL",
        "(5 % 0) IS NULL",
        "-(-2147483648) IS NULL",
        "abs(-2147483648) IS NULL",
        "round(-(-2147483648), 0) IS NULL",
        "CAST(-(-2147483648) AS STRING) IS NULL",
        "CAST(-(-2147483648) AS TINYINT) IS NULL",
        "CAST(CAST(-(-2147483648) AS STRING) AS INT) IS NULL",
        "upper(CAST(-(-2147483648) AS STRING)) IS NULL",
        "length(CAST(-(-2147483648) AS STRING)) IS NULL",
        "substring(CAST(-(-2147483648) AS STRING), 1, 2) IS NULL",
        "concat('a', CAST(-(-2147483648) AS STRING)) IS NULL",
        "(-(-2147483648) = 1) IS NULL",
        "if(TRUE, -(-2147483648), 1) IS NULL",
        "if(i > 0, -(-2147483648), 1) IS NULL",
        "coalesce(-(-2147483648), 1) IS NULL",
        "__table_name__ IS NULL",
        "CASE WHEN NULL AND b div i > 0 THEN 1 ELSE 0 END",
        "if(NULL AND b div i > 0, 1, 0)",
        "if(NULL OR b div i > 0, 1, 0)",
        "CASE WHEN ok THEN NULL AND b div i > 0 ELSE FALSE END",
        "b BETWEEN 0 AND 9223372036854775808",
        "b NOT BETWEEN 0 AND 9223372036854775808",
        "(1 div 0 > 0) AND FALSE",
        "FALSE AND (1 div 0 > 0)",
        "ok AND (1 div 0 > 0)",
        "ok OR (1 div 0 > 0)",
        "CASE WHEN ok THEN 1 div 0 END",
        "CASE WHEN length(s) > 100 THEN 1 div 0 END",
        "coalesce(i, 1 div 0)",
        "if(ok, 1 div 0, 0)",
        "CASE WHEN 1 div 0 > 0 THEN 0 END",
        "i + (2147483647 + 1)",
        "CASE WHEN i > 0 THEN 2147483647 + 1 ELSE 2147483647 + 1 END",
        "1 div 0 IN (NULL)",
        "(1 div 0) <=> (1 div 0)",
        "(i + b) <=> (b + i)",
        "(i + 1) <=> (1 + i)",
        "(b div i) * 0",
        "-(b div i) <=> -(b div i)",
        "b div i IN (NULL, NULL)",
        "b div i IN (1, NULL)",
        "b div i IN (1)",
        "NOT (b div i = NULL)",
        "(b div i > 0) AND (b div i > 0)",
        "if(ok, b div i, b div i)",
        "CASE WHEN b div i > 0 THEN 1 WHEN ok THEN 1 END",
        "CASE WHEN ok THEN 1 WHEN b div i > 0 THEN 1 ELSE 1 END",
        "CASE b div i WHEN 1 THEN 'x' ELSE 'x' END",
        "CASE WHEN TRUE THEN 1 ELSE b div i END",
        "coalesce(5, b div i)",
        "if(i = 0, NULL, 1) + b div i",
        "b div i + if(i = 0, NULL, 1)",
        "(b div i) div if(i = 0, NULL, 1)",
        "b div if(i = 0, NULL, i)",
        "if(i = 0, NULL, 1) < b div i",
        "concat(if(i = 0, NULL, 'x'), CAST(b div i AS STRING))",
        "if(i = 0, NULL, 'x') || CAST(b div i AS STRING)",
        "b = 9223372036854775808",
        "b <> 9223372036854775808",
        "b <=> 9223372036854775808",
        "9223372036854775808 > b",
        "b < -9223372036854775809",
        "i < 12345678901234567890",
        "i = 2147483648",
        "t < 1000",
        "t = 128",
        "t < 1.5",
        "b = 1.5",
        "i < 1.5",
        "i = 1.0",
        "sm > 40000",
        "d < 1e300",
        "d3 = 100000",
        "i IN (1, 1.5)",
        "d4 = 100",
        "d4 < 100",
        "coalesce(d4, 100)",
        "coalesce(d, 1)",
        "coalesce(d, 2Y)",
        "coalesce(d, 5L)",
        "CASE WHEN ok THEN d4 ELSE 100 END",
        "d4 + 100",
        "d2 < 5L",
        "f IN (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0)",
        "f IN (-0.0, 2.5)",
        "r IN (0.0, 2.5)",
        "round(r, 2)",
        "CAST(r AS DECIMAL(10,3))",
        "round(CAST(2.675 AS FLOAT), 2)",
        "CAST(CAST(2.675 AS FLOAT) AS DECIMAL(5,2))",
        "CAST(CAST(1.99999999999999999 AS DECIMAL(18,17)) AS INT)",
        "-(d2 + 0)",
        "CAST(d * 1.5 AS INT)",
        "i IN (1, 2) IS NULL",
    ]
    return list(dict.fromkeys(out))


def filter_corpus() -> list[str]:
    out = [
        "NULL",
        "TRUE",
        "FALSE",
        "ok",
        "NOT ok",
        "ok IS NULL",
        "i > 0",
        "i >= 0 AND i < 100",
        "b <> 0",
        "t < 0 OR sm > 0",
        "f > 0",
        "f = f",
        "f <> f",
        "f < 0",
        "r > 0.1",
        "f = 0",
        "f <=> -0.0",
        "f > 1e308",
        "r < f",
        "d > 0",
        "d BETWEEN -1 AND 1",
        "d2 < 0",
        "d4 = 0.5",
        "d5 > 1e20",
        "s LIKE 'a%'",
        "s NOT LIKE '%b'",
        "s = ''",
        "s < s2",
        "s IS NULL OR length(s) > 3",
        "upper(s) = 'ABC'",
        "trim(s) = '12'",
        "substring(s, 1, 2) = 'ab'",
        "big = 'x'",
        "i IN (1, 2, NULL)",
        "i NOT IN (1, NULL)",
        "i NOT IN (1, 2)",
        "dt = '2024-02-29'",
        "dt < '1970-01-01'",
        "ts >= '2020-01-02'",
        "ts < dt",
        "ntz > ts",
        "ts = TIMESTAMP '1970-01-01 00:00:00'",
        "dt BETWEEN '2000-01-01' AND '2024-12-31'",
        "__data_event_type__ IN ('+I', '+U')",
        "__data_event_type__ <> '-D'",
        "__table_name__ = 'orders'",
        "__schema_name__ = 'shop' AND __namespace_name__ = 'shop'",
        "coalesce(i, 0) > 0",
        "CASE WHEN ok THEN i > 0 ELSE f > 0 END",
        "if(ok, d > 0, s = 'abc')",
        "i <> 0 AND b / i > 1",
        "i = 0 OR b div i > 1",
        "CAST(s AS INT) > 10",
        "ok AND CAST(s AS INT) > 10",
        "CAST(d AS INT) = 1",
        "i + 1 > 0",
        "i * 2 > 0",
        "abs(i) > 5",
        "round(f, 1) = 2.5",
        "CAST(f AS DECIMAL(5,2)) > 0",
        "CAST(s AS DATE) > '2000-01-01'",
        "CAST(dt AS STRING) LIKE '19%'",
        "length(bin) > 0",
        "bin = bin",
        "s || s2 = 'abcabc'",
        "-i > 0",
        "i % 2 = 0",
        "d % 3 > 0",
        "f / 2 > 1",
        "d / 3 > 1",
    ]
    out += [
        "b BETWEEN NULL AND b div i",
        "(i > 0) AND (1 div 0 > 0) AND FALSE",
        "ok AND NULL AND b div i > 0",
        "(NULL OR ok) AND b div i > 0",
        "CASE WHEN b div i > 0 THEN NULL ELSE NULL END",
        "if(ok, NULL, NULL)",
        "NOT NULL",
        "ok AND NULL",
        "i IN (NULL) OR b div i > 0",
        "if(b div i > 0, NULL, FALSE)",
        "CASE WHEN ok THEN NULL ELSE b div i > 0 END",
        "if(ok, NULL, b div i > 0)",
        "coalesce(NULL, b div i > 0)",
        "(b div i > 0) OR NULL",
        "NULL OR (b div i > 0)",
        "b < 9223372036854775808",
        "ix > 0 AND i > 0",
        "bx + 1 > 0",
        "CAST(s2 AS BOOLEAN)",
        "CAST(s2 AS DATE) IS NULL",
        "s2 = ''",
    ]
    for fail in FAILING.values():
        out += [
            f"({fail} > 0) AND FALSE",
            f"FALSE AND {fail} > 0",
            f"NULL AND {fail} > 0",
            f"{fail} > 0 AND NULL",
            f"({fail} > 0) OR TRUE",
            f"{fail} = NULL",
            f"{fail} <=> {fail}",
            f"({fail}) IS NULL",
            f"CASE WHEN {fail} > 0 THEN TRUE ELSE TRUE END",
            f"if(NULL, {fail} > 0, FALSE)",
            f"CASE WHEN NULL THEN {fail} > 0 END",
            f"NOT ({fail} > 0 AND NULL)",
            f"{fail} IN (NULL)",
        ]
    return list(dict.fromkeys(out))


# --- cases --------------------------------------------------------------------------------------


@dataclass
class Case:
    kind: str  # "projection" or "filter"
    expr: str
    view: str  # "edge" or "checked"
    rows: Optional[tuple[int, ...]] = None  # the view's rows (ids); None: all
    expected: Optional[list[Any]] = None  # SPARK_CHECKED_CASES: the unit test's values
    expected_type: Optional[pa.DataType] = None  # SPARK_CHECKED_TYPES: the unit test's type
    compiled: Any = None

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.view}:{self.rows}:{self.expr}"


EDGE = edge_table()
CHECKED, CHECKED_IDS = checked_table()
_SCHEMAS = {"edge": EDGE.schema, "checked": CHECKED.schema}
REFUSED: list[tuple[str, str, str]] = []  # (kind, expression, message)


def _compile(kind: str, expr: str, view: str) -> Any:
    if kind == "projection":
        return compile_projection(f"{expr} AS c", _SCHEMAS[view], TABLE)
    return compile_filter(expr, _SCHEMAS[view], TABLE)


def build_cases() -> tuple[list[Case], list[Case], list[Case], list[Case]]:
    checked = [
        Case("projection", expr, "checked", CHECKED_IDS[k], expected=list(values))
        for k, (expr, _, values) in enumerate(SPARK_CHECKED_CASES)
    ]
    typed = [Case("projection", expr, "edge", expected_type=t) for expr, t in SPARK_CHECKED_TYPES]
    for c in checked + typed:  # these must compile: the unit tests say so
        c.compiled = _compile(c.kind, c.expr, c.view)
    corpus = []
    for kind, exprs in (("projection", projection_corpus()), ("filter", filter_corpus())):
        for expr in exprs:
            try:
                compiled = _compile(kind, expr, "edge")
            except TransformError as e:
                REFUSED.append((kind, expr, str(e)))
                continue
            corpus.append(Case(kind, expr, "edge", compiled=compiled))
    projections = [c for c in corpus if c.kind == "projection"]
    return checked, typed, projections, [c for c in corpus if c.kind == "filter"]


CHECKED_CASES, TYPED_CASES, PROJECTION_CASES, FILTER_CASES = build_cases()
ALL_CASES = CHECKED_CASES + TYPED_CASES + PROJECTION_CASES + FILTER_CASES


# --- comparing ----------------------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Equal as values of the same type: NaN equals NaN, 0.0 does not equal -0.0, a decimal's
    scale and a timestamp's zone count."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, decimal.Decimal):
        return a == b and a.as_tuple().exponent == b.as_tuple().exponent
    if isinstance(a, dt.datetime):
        return a == b and (a.utcoffset() is None) == (b.utcoffset() is None)
    return a == b


def differences(ids: list[int], got: list[Any], want: list[Any], limit: int = 5) -> list[str]:
    if not len(ids) == len(got) == len(want):
        return [f"{len(got)} values for {len(ids)} rows, Spark {len(want)}"]
    out = [f"id {i}: evaluator {g!r}, Spark {w!r}" for i, g, w in zip(ids, got, want) if not same(g, w)]
    return out[:limit] + ([f"... {len(out) - limit} more"] if len(out) > limit else [])


def is_limit(message: str) -> bool:
    return any(m in message for m in REPRODUCTION_LIMITS)


def spark_condition(e: BaseException) -> str:
    try:
        return str(e.getCondition() or type(e).__name__)  # type: ignore[attr-defined]
    except Exception:
        return type(e).__name__


def eval_condition(message: str) -> str:
    for cond in (
        "BINARY_ARITHMETIC_OVERFLOW",
        "ARITHMETIC_OVERFLOW",
        "DIVIDE_BY_ZERO",
        "REMAINDER_BY_ZERO",
        "NUMERIC_VALUE_OUT_OF_RANGE",
        "CAST_OVERFLOW",
        "CAST_INVALID_INPUT",
        "UNSUPPORTED_VALUE",
    ):
        if cond in message:
            return cond
    return "OTHER"


# --- the runner ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class EvalResult:
    ids: list[int]
    values: Optional[list[Any]] = None  # projection values, or for a filter the ids kept
    arrow_type: Optional[pa.DataType] = None
    error: Optional[str] = None


class Differential:
    BATCH = 60  # expressions per Spark query

    def __init__(self, spark: Any) -> None:
        from pyspark.errors.exceptions.captured import CapturedException

        self.spark = spark
        self.spark_errors = (CapturedException,)
        self.tables = {"edge": (EDGE, EDGE_OPS), "checked": (CHECKED, ["+I"] * CHECKED.num_rows)}
        self.outcomes: dict[str, Outcome] = defaultdict(Outcome)
        self.stats: dict[str, int] = defaultdict(int)
        self.lock = threading.Lock()
        for name, (table, ops) in self.tables.items():
            ddl = ", ".join(
                f"`{f.name}` {_SPARK_DDL[f.type] if not pa.types.is_decimal(f.type) else str(f.type)}".replace(
                    "decimal128", "DECIMAL"
                )
                for f in table.schema
            )
            ddl += ", " + ", ".join(f"`{m}` STRING" for m in META)
            meta = {
                "__namespace_name__": [DATABASE] * table.num_rows,
                "__schema_name__": [DATABASE] * table.num_rows,
                "__table_name__": [TABLE] * table.num_rows,
                "__data_event_type__": ops,
            }
            data = table
            for m in META:
                data = data.append_column(m, pa.array(meta[m], pa.string()))
            df = spark.createDataFrame(data, schema=ddl)
            df.createOrReplaceTempView(f"tx_{name}")

    # -- the evaluator side --

    def evaluate(self, case: Case, rows: Optional[list[int]] = None) -> EvalResult:
        table, ops = self.tables[case.view]
        ids = list(rows if rows is not None else (case.rows if case.rows is not None else range(table.num_rows)))
        data = table.take(pa.array(ids, pa.int64()))
        op = pa.array([ops[i] for i in ids], pa.string())
        try:
            out = case.compiled.evaluate(data, database=DATABASE, table=TABLE, op=op)
        except TransformEvalError as e:
            return EvalResult(ids, error=str(e))
        except Exception as e:  # anything else is a bug of the evaluator
            return EvalResult(ids, error=f"CRASH {type(e).__name__}: {e}")
        if case.kind == "filter":
            return EvalResult(ids, values=[i for i, keep in zip(ids, out.to_pylist()) if keep])
        return EvalResult(ids, values=out.column(0).to_pylist(), arrow_type=out.schema.field(0).type)

    def row_errors(self, case: Case, ids: list[int]) -> dict[int, Optional[str]]:
        """Each row's error with the evaluator, or None (found by halving: few rows fail)."""
        error = self.evaluate(case, ids).error
        if error is None or len(ids) == 1:
            return {i: error for i in ids}
        half = len(ids) // 2
        return {**self.row_errors(case, ids[:half]), **self.row_errors(case, ids[half:])}

    @staticmethod
    def failing_groups(errors: dict[int, Optional[str]]) -> dict[str, list[int]]:
        """The rows the evaluator fails on, by the condition it names (a limit of its own, or an error
        it says Spark raises too): Spark must fail on each group of the latter by itself."""
        groups: dict[str, list[int]] = defaultdict(list)
        for i, error in errors.items():
            if error is not None:
                groups["limit" if is_limit(error) else eval_condition(error)].append(i)
        return groups

    # -- the Spark side --

    def _select(self, view: str, exprs: list[str], ids: Optional[list[int]]) -> str:
        where = f" WHERE id IN ({', '.join(map(str, ids))})" if ids is not None else ""
        items = ", ".join(f"{e} AS c{k}" for k, e in enumerate(exprs))
        return f"SELECT id, {items} FROM tx_{view}{where}"

    def spark_types(self, view: str, exprs: list[str]) -> list[Any]:
        """Each expression's Spark type name, or the analysis error."""
        if len(exprs) > self.BATCH:
            return [
                t for k in range(0, len(exprs), self.BATCH) for t in self.spark_types(view, exprs[k : k + self.BATCH])
            ]
        if not exprs:
            return []
        try:
            self.count("spark analyses")
            schema = self.spark.sql(self._select(view, exprs, None)).schema
            return [f.dataType.simpleString() for f in schema.fields[1:]]
        except self.spark_errors as e:
            if len(exprs) == 1:
                return [e]
            half = len(exprs) // 2
            return self.spark_types(view, exprs[:half]) + self.spark_types(view, exprs[half:])

    def spark_values(self, view: str, exprs: list[str], ids: Optional[list[int]]) -> list[Any]:
        """Each expression's values over the rows (ordered by id), or Spark's error."""
        if not exprs:
            return []
        try:
            query = self.spark.sql(self._select(view, exprs, ids))
            self.count("spark queries")
            result = query.toArrow()
        except self.spark_errors as e:
            if len(exprs) == 1:
                return [e]
            half = len(exprs) // 2
            return self.spark_values(view, exprs[:half], ids) + self.spark_values(view, exprs[half:], ids)
        order = sorted(range(result.num_rows), key=lambda r: result.column(0)[r].as_py())
        result = result.take(pa.array(order, pa.int64()))
        return [result.column(k + 1).to_pylist() for k in range(len(exprs))]

    def spark_filter(self, expr: str, ids: Optional[list[int]]) -> Any:
        inner = "tx_edge" if ids is None else f"(SELECT * FROM tx_edge WHERE id IN ({', '.join(map(str, ids))}))"
        self.count("spark queries")
        try:
            return sorted(r[0] for r in self.spark.sql(f"SELECT * FROM {inner} WHERE {expr}").select("id").collect())
        except self.spark_errors as e:
            return e

    # -- the checks --

    def run(self, workers: int = 4) -> None:
        """Spark's side runs in a few threads: a query over 24 rows spends its time waiting on
        Spark's scheduler more than computing."""
        with ThreadPoolExecutor(workers) as pool:
            groups: dict[tuple[str, Optional[tuple[int, ...]]], list[Case]] = defaultdict(list)
            for case in ALL_CASES:
                if case.kind == "projection":
                    groups[(case.view, case.rows)].append(case)
            # 1. the types (an analysis of many expressions at once) and the evaluator over every row
            types = {
                key: pool.submit(self.spark_types, key[0], [c.expr for c in cases]) for key, cases in groups.items()
            }
            full = {c.key: self.evaluate(c) for c in ALL_CASES}
            # 2. Spark over every row where the evaluator succeeds (projections in batches); where it
            #    fails, the rows it fails on (one query per condition it names, which Spark must fail
            #    on) and the rows it accepts (in batches, as for the others)
            jobs: list[tuple[list[Case], Optional[list[int]], Any]] = []
            failing: list[tuple[Case, str, list[int], Any]] = []
            subsets: dict[tuple[str, tuple[int, ...]], list[Case]] = defaultdict(list)
            filters, filter_subsets = [], []
            for case in FILTER_CASES:
                ev = full[case.key]
                if ev.error is None:
                    filters.append((case, pool.submit(self.spark_filter, case.expr, None)))
                    continue
                errors = self.row_errors(case, ev.ids)
                for condition, bad in self.failing_groups(errors).items():
                    failing.append((case, condition, bad, pool.submit(self.spark_filter, case.expr, bad)))
                good = [i for i, error in errors.items() if error is None]
                if good:
                    filter_subsets.append((case, good, pool.submit(self.spark_filter, case.expr, good)))
            for (view, rows), cases in groups.items():
                refused = self.check_types(cases, types[(view, rows)].result())
                ids = list(rows) if rows is not None else None
                ok = [c for c in cases if c.key not in refused and full[c.key].error is None]
                for start in range(0, len(ok), self.BATCH):
                    chunk = ok[start : start + self.BATCH]
                    jobs.append((chunk, None, pool.submit(self.spark_values, view, [c.expr for c in chunk], ids)))
                for c in cases:
                    if c.key in refused or full[c.key].error is None:
                        continue
                    errors = self.row_errors(c, full[c.key].ids)
                    for condition, bad in self.failing_groups(errors).items():
                        failing.append((c, condition, bad, pool.submit(self.spark_values, view, [c.expr], bad)))
                    good = [i for i, error in errors.items() if error is None]
                    if good:
                        subsets[(view, tuple(good))].append(c)
                    if c.expected is not None:  # the unit test's values are for every row
                        jobs.append(([c], None, pool.submit(self.spark_values, view, [c.expr], ids)))
            for (view, good), cases in subsets.items():
                for start in range(0, len(cases), self.BATCH):
                    chunk = cases[start : start + self.BATCH]
                    jobs.append(
                        (chunk, list(good), pool.submit(self.spark_values, view, [c.expr for c in chunk], list(good)))
                    )
            # 3. the judgements
            for chunk, good, future in jobs:
                for case, spark in zip(chunk, future.result()):
                    if good is None:
                        self.judge_projection(case, full[case.key], spark)
                    else:
                        self.compare_values(case, self.evaluate(case, good), spark, subset=True)
            for case, future in filters:
                self.judge_filter(case, full[case.key], future.result())
            for case, good, future in filter_subsets:
                self.judge_filter_subset(case, good, future.result())
            for case, condition, bad, future in failing:
                spark = future.result()
                self.judge_failing(case, condition, bad, spark[0] if case.kind == "projection" else spark)

    def check_types(self, cases: list[Case], spark_types: list[Any]) -> set[str]:
        """The type checks; returns the cases Spark refuses (an analysis error)."""
        refused = set()
        for case, spark_type in zip(cases, spark_types):
            out = self.outcomes[case.key]
            if not isinstance(spark_type, str):
                refused.add(case.key)
                out.problems.append(
                    f"Spark refuses it ({spark_condition(spark_type)}: "
                    f"{str(spark_type).splitlines()[0]}), the compiler accepted it"
                )
                continue
            sink = case.compiled.output_schema().field(0).type
            if spark_type_name(sink) != spark_type:
                out.problems.append(f"type: evaluator {sink} ({spark_type_name(sink)}), Spark {spark_type}")
            if case.expected_type is not None and case.expected_type != sink:
                out.problems.append(f"type: the unit test expects {case.expected_type}, output_schema gives {sink}")
            if case.expected_type is not None and spark_type_name(case.expected_type) != spark_type:
                out.problems.append(f"type: the unit test expects {case.expected_type}, Spark gives {spark_type}")
        return refused

    def judge_projection(self, case: Case, ev: EvalResult, spark: Any) -> None:
        """Over every row: the values, or for a SPARK_CHECKED_CASES entry the evaluator's error against
        Spark and the unit test's values (the rows are judged one by one in ``judge_failing``)."""
        if ev.error is None:
            self.compare_values(case, ev, spark)
        elif isinstance(spark, BaseException):
            self.outcomes[case.key].problems.append(
                f"Spark raises ({spark_condition(spark)}), the unit test expects {case.expected}"
            )
        else:
            self.check_expected(case, ev.ids, spark)

    def judge_failing(self, case: Case, condition: str, bad: list[int], spark: Any) -> None:
        """The rows the evaluator fails on with one condition: Spark must fail on them too, unless the
        evaluator says it does not reproduce their values (equal or error)."""
        out = self.outcomes[case.key]
        self.count("failing row groups")
        if isinstance(spark, BaseException):
            if condition != "limit" and not spark_condition(spark).startswith(condition):
                self.count("both fail, with different error conditions")
                out.notes.append(f"both fail on ids {bad}: evaluator {condition}, Spark {spark_condition(spark)}")
        elif condition == "limit":
            self.count("rows the evaluator declines that Spark computes (equal or error)")
            out.notes.append(f"equal or error on ids {bad}: Spark gives {spark!r}")
        else:
            out.problems.append(f"the evaluator raises {condition} on ids {bad}, Spark gives {spark!r}")

    def compare_values(self, case: Case, ev: EvalResult, spark: Any, subset: bool = False) -> None:
        out = self.outcomes[case.key]
        self.count("value comparisons")
        where = " (on the rows the evaluator accepts)" if subset else ""
        if isinstance(spark, BaseException):
            if ev.error is not None:
                return
            out.problems.append(
                f"Spark raises{where} ({spark_condition(spark)}: {str(spark).splitlines()[0]}), "
                f"the evaluator gives {ev.values[:8]!r}"
            )
            return
        if ev.error is not None:
            out.problems.append(f"the evaluator raised{where} ({ev.error}), Spark gives {spark[:8]!r}")
            return
        diff = differences(ev.ids, ev.values, spark)
        if diff:
            out.problems.append(f"values differ{where}: " + "; ".join(diff))
        if case.expected is not None and not subset:
            self.check_expected(case, ev.ids, spark)

    def check_expected(self, case: Case, ids: list[int], spark: list[Any]) -> None:
        diff = differences(ids, case.expected or [], spark)
        if diff:
            self.outcomes[case.key].problems.append(
                "the unit test's expectation differs from Spark: "
                + "; ".join(d.replace("evaluator", "expected") for d in diff)
            )

    def judge_filter(self, case: Case, ev: EvalResult, spark: Any) -> None:
        """Over every row (where the evaluator fails, the rows are judged in ``judge_failing``)."""
        if ev.error is None:
            out = self.outcomes[case.key]
            if isinstance(spark, BaseException):
                out.problems.append(
                    f"Spark raises ({spark_condition(spark)}: {str(spark).splitlines()[0]}), the "
                    f"evaluator keeps ids {ev.values}"
                )
            elif ev.values != spark:
                out.problems.append(f"kept rows differ: evaluator {ev.values}, Spark {spark}")

    def judge_filter_subset(self, case: Case, good: list[int], spark: Any) -> None:
        out, ev = self.outcomes[case.key], self.evaluate(case, good)
        if isinstance(spark, BaseException):
            out.problems.append(
                f"Spark raises on the rows the evaluator accepts ({spark_condition(spark)}), the "
                f"evaluator keeps ids {ev.values}"
            )
        elif ev.error is not None or ev.values != spark:
            out.problems.append(f"on the rows the evaluator accepts: evaluator {ev.values or ev.error}, Spark {spark}")

    def count(self, what: str) -> None:
        with self.lock:
            self.stats[what] += 1


@pytest.fixture(scope="module")
def differential(spark):
    """Everything run once (batched), the outcome of each case kept for its own test."""
    # A small DataFrame from Arrow is a LocalRelation, and Spark computes a projection or a filter
    # over a LocalRelation in the optimizer's first batch, before the rules that rewrite expressions
    # run (constant folding, null propagation, boolean simplification, operator reordering...). Over
    # a real table every rule runs, and some change the result (an error becomes a value): the
    # conversion is switched off so that the queries here run the way they run on a table.
    conf = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "true",
        "spark.sql.optimizer.excludedRules": "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation",
        "spark.sql.leafNodeDefaultParallelism": "1",
    }  # one task per query: the table is 24 rows
    before = {k: spark.conf.get(k, None) for k in conf}
    loggers = [logging.getLogger(n) for n in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
    levels = [lg.level for lg in loggers]
    for k, v in conf.items():
        spark.conf.set(k, v)
    for lg in loggers:  # pyspark logs every failing query's stack; failing queries are expected here
        lg.setLevel(logging.CRITICAL + 1)
    started = time.monotonic()
    try:
        diff = Differential(spark)
        diff.run()
        diff.stats["seconds"] = int(time.monotonic() - started)
        yield diff
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _assert_agrees(differential: Differential, case: Case) -> None:
    outcome = differential.outcomes[case.key]
    assert not outcome.problems, f"{case.kind} {case.expr!r}:\n  " + "\n  ".join(outcome.problems)


@pytest.mark.parametrize("case", CHECKED_CASES, ids=[c.expr for c in CHECKED_CASES])
def test_spark_checked_cases(differential: Differential, case: Case) -> None:
    _assert_agrees(differential, case)


@pytest.mark.parametrize("case", TYPED_CASES, ids=[c.expr for c in TYPED_CASES])
def test_spark_checked_types(differential: Differential, case: Case) -> None:
    _assert_agrees(differential, case)


@pytest.mark.parametrize("case", PROJECTION_CASES, ids=[c.expr for c in PROJECTION_CASES])
def test_projection_corpus(differential: Differential, case: Case) -> None:
    _assert_agrees(differential, case)


@pytest.mark.parametrize("case", FILTER_CASES, ids=[c.expr for c in FILTER_CASES])
def test_filter_corpus(differential: Differential, case: Case) -> None:
    _assert_agrees(differential, case)


def test_the_corpus_covers_every_construct_and_refusals_say_how_to_fix() -> None:
    accepted = " ".join(c.expr.lower() for c in PROJECTION_CASES + FILTER_CASES)
    for construct in (
        "__namespace_name__",
        "__schema_name__",
        "__table_name__",
        "__data_event_type__",
        " div ",
        " % ",
        "<=>",
        " and ",
        " or ",
        "not ",
        "is not null",
        "isnull(",
        "isnotnull(",
        " not in (",
        " not between ",
        " not like ",
        "||",
        "case when",
        "case i when",
        "if(",
        "coalesce(",
        "nvl(",
        "ifnull(",
        "concat(",
        "upper(",
        "ucase(",
        "lower(",
        "lcase(",
        "trim(",
        "ltrim(",
        "rtrim(",
        "length(",
        "char_length(",
        "character_length(",
        "substring(",
        "substr(",
        "abs(",
        "round(",
        "as string)",
        "as tinyint)",
        "as smallint)",
        "as int)",
        "as bigint)",
        "as float)",
        "as double)",
        "as decimal(",
        "as date)",
        "as timestamp)",
        "as boolean)",
        "date '",
        "timestamp '",
        "1.5e3",
        "1.5d",
        "null",
        "true",
        "false",
    ):
        assert construct in accepted, construct
    assert len(PROJECTION_CASES) > 1000 and len(FILTER_CASES) > 80
    for kind, expr, message in REFUSED:
        assert message.rstrip().split(". ")[-1].startswith("Fix:") or "Fix: " in message, (kind, expr, message)


# What a refusal may claim about Spark, and the refused expressions that claim it: Spark must fail
# on them too, whatever the rows (here: none).
SPARK_FAILS_TOO = ("not Spark SQL", "Spark requires", "so Spark fails the query", "fails the query whatever the rows")
CLAIMS = [(kind, expr) for kind, expr, message in REFUSED if any(c in message for c in SPARK_FAILS_TOO)]


@pytest.mark.parametrize("kind, expr", CLAIMS, ids=[f"{k}:{e}" for k, e in CLAIMS])
def test_what_is_refused_as_failing_in_spark_fails_in_spark(differential: Differential, kind: str, expr: str) -> None:
    query = (
        f"SELECT id, {expr} AS c FROM tx_edge WHERE id < 0"
        if kind == "projection"
        else f"SELECT * FROM (SELECT * FROM tx_edge WHERE id < 0) WHERE {expr}"
    )
    with pytest.raises(differential.spark_errors):
        differential.spark.sql(query).collect()


def test_summary(differential: Differential) -> None:
    """Not a check: what ran (printed with -s or on failure)."""
    print({**differential.stats, "cases": len(ALL_CASES), "refused by the compiler": len(REFUSED)})
    notes = [(k, n) for k, o in differential.outcomes.items() for n in o.notes]
    for key, note in notes[:40]:
        print(key, "--", note[:300])
