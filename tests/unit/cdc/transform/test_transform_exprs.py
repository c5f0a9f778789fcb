"""Transform expressions (cdc/transform/transform_exprs.py, cdc/transform/transform_eval.py): every construct of the
subset with NULLs and edge values, the refusals and their messages, pickling, output_schema,
metadata columns. No Spark here: expected values are Spark SQL's (ANSI mode, Spark 4's default;
session time zone UTC). The values this file could not confirm in Spark's documentation are
collected in SPARK_CHECKED_CASES, with the page checked, for a later differential test against
real Spark."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import pickle
from typing import Any, Optional

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.transform.transform_exprs import (
    METADATA_COLUMNS,
    CompiledFilter,
    CompiledProjection,
    TransformError,
    TransformEvalError,
    compile_filter,
    compile_projection,
)

D = decimal.Decimal
UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        ("i", pa.int32()),
        ("b", pa.int64()),
        ("t", pa.int8()),
        ("sm", pa.int16()),
        ("s", pa.string()),
        ("s2", pa.string()),
        ("d", pa.decimal128(10, 2)),
        ("d2", pa.decimal128(38, 10)),
        ("f", pa.float64()),
        ("r", pa.float32()),
        ("dt", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("ok", pa.bool_()),
        ("bin", pa.binary()),
        ("big", pa.large_string()),
    ]
)
TABLE = "shop.orders"


def batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


def project(expr: str, rows: list[dict[str, Any]], op: Any = "+I") -> list[Any]:
    p = compile_projection(f"{expr} AS out", SCHEMA, TABLE)
    return p.evaluate(batch(rows), database="shop", table="orders", op=op).column(0).to_pylist()


def value(expr: str, row: Optional[dict[str, Any]] = None) -> Any:
    return project(expr, [row or {}])[0]


def out_type(expr: str) -> pa.DataType:
    return compile_projection(f"{expr} AS out", SCHEMA, TABLE).output_schema().field("out").type


def keep(expr: str, rows: list[dict[str, Any]], op: Any = "+I") -> list[bool]:
    f = compile_filter(expr, SCHEMA, TABLE)
    return f.evaluate(batch(rows), database="shop", table="orders", op=op).to_pylist()


def refused(expr: str, kind: str = "projection") -> str:
    with pytest.raises(TransformError) as e:
        if kind == "projection":
            compile_projection(expr, SCHEMA, TABLE)
        else:
            compile_filter(expr, SCHEMA, TABLE)
    return str(e.value)


def fails(expr: str, rows: list[dict[str, Any]], condition: str) -> str:
    with pytest.raises(TransformEvalError) as e:
        project(expr, rows)
    assert condition in str(e.value)
    assert "Fix: " in str(e.value)
    return str(e.value)


# --- Spark-checked cases ------------------------------------------------------------------------
# (expression, input rows, expected outputs per row): values derived from Spark's semantics, each
# naming the documentation page checked ("not found in the docs": taken from Spark's implementation
# as known). All confirmed against Spark 4.2 (ANSI mode, session time zone UTC) by
# tests/integration/test_transform_spark_differential.py, which runs them, and these types, in Spark.
SPARK_CHECKED_CASES: list[tuple[str, list[dict[str, Any]], list[Any]]] = [
    # https://spark.apache.org/docs/latest/api/sql/ (substr/substring examples, also
    # docs.databricks.com .../functions/substr.html): 1-based, negative from the end
    ("substring(s, 5)", [{"s": "Spark SQL"}], ["k SQL"]),
    ("substring(s, -3)", [{"s": "Spark SQL"}], ["SQL"]),
    ("substring(s, 5, 1)", [{"s": "Spark SQL"}], ["k"]),
    ("substring(s FROM -10 FOR 5)", [{"s": "Spark SQL"}], ["Spar"]),
    # not found in the docs: pos 0 counts as 1 (UTF8String.substringSQL)
    ("substring(s, 0, 2)", [{"s": "hello"}], ["he"]),
    # https://spark.apache.org/docs/latest/api/sql/ round; Databricks .../functions/round.html: HALF_UP
    ("round(CAST(2.5 AS DECIMAL(2,1)), 0)", [{}], [D("3")]),
    ("round(CAST(2.25 AS DECIMAL(3,2)), 1)", [{}], [D("2.3")]),
    ("round(CAST(13.5 AS DECIMAL(3,1)), -1)", [{}], [D("10")]),
    ("round(f, 0)", [{"f": 2.5}], [3.0]),  # pyspark.sql.functions.round example
    ("round(f, 2)", [{"f": 2.1267}], [2.13]),  # Databricks pyspark round example
    # not found in the docs: Spark rounds a DOUBLE through BigDecimal(Double.toString(d)), so
    # 0.285 (binary 0.28499999...) rounds up and 2.675 too
    ("round(f, 2)", [{"f": 0.285}, {"f": 2.675}, {"f": -2.5}], [0.29, 2.68, -2.5]),
    ("round(f, 0)", [{"f": -2.5}], [-3.0]),
    # https://spark.apache.org/docs/latest/api/sql/ "/": always floating point division
    ("i / b", [{"i": 3, "b": 2}, {"i": 2, "b": 2}], [1.5, 1.0]),
    # https://spark.apache.org/docs/latest/api/sql/ "div": integral part, as BIGINT
    ("i div b", [{"i": 3, "b": 2}], [1]),
    # not found in the docs: div and % truncate toward zero like Java (-7 div 2 = -3, -7 % 2 = -1)
    ("i div b", [{"i": -7, "b": 2}], [-3]),
    ("i % b", [{"i": -7, "b": 2}, {"i": 7, "b": -2}], [-1, 1]),
    # https://spark.apache.org/docs/4.3.0/api/sql/math-functions/ "%": SELECT 2 % 1.8 -> 0.2
    ("i % CAST(1.8 AS DECIMAL(2,1))", [{"i": 2}], [D("0.2")]),
    # Databricks .../functions/trim.html (Spark's trim forms)
    ("trim(s)", [{"s": "    SparkSQL   "}], ["SparkSQL"]),
    ("trim(BOTH 'SL' FROM s)", [{"s": "SSparkSQLS"}], ["parkSQ"]),
    ("trim(LEADING 'SL' FROM s)", [{"s": "SSparkSQLS"}], ["parkSQLS"]),
    ("trim(TRAILING 'SL' FROM s)", [{"s": "SSparkSQLS"}], ["SSparkSQ"]),
    # pyspark.sql.functions.like: _ one character, % any run
    ("s LIKE '_park'", [{"s": "Spark"}], [True]),
    # pyspark.sql.functions.length / Spark docs: "includes the trailing spaces"
    ("length(s)", [{"s": "Spark SQL "}], [10]),
    # pyspark.sql.functions.concat (its NULL example is for arrays; strings: not found in the docs)
    ("concat(s, s2)", [{"s": "abcd", "s2": "123"}, {"s": "a", "s2": None}], ["abcd123", None]),
    # SPARK-39749 (apache/spark pull 37160): a decimal cast to text is plain, never 0E-10
    ("CAST(d2 AS STRING)", [{"d2": D("0")}, {"d2": D("0.0000001")}], ["0.0000000000", "0.0000001000"]),
    # Spark 3.0 migration guide (SPARK-36081): text cast to int/boolean is trimmed of chars <= 32
    ("CAST(s AS INT)", [{"s": " 1\t"}], [1]),
    ("CAST(s AS BOOLEAN)", [{"s": " 1\t"}], [True]),
    # not found in the docs: a timestamp's text drops trailing zeros of the fraction
    (
        "CAST(ts AS STRING)",
        [
            {"ts": dt.datetime(2020, 1, 2, 3, 4, 5, 600, tzinfo=UTC)},
            {"ts": dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)},
        ],
        ["2020-01-02 03:04:05.0006", "2020-01-02 03:04:05"],
    ),
    # not found in the docs: a DOUBLE becomes a DECIMAL through its shortest text (HALF_UP)
    ("CAST(f AS DECIMAL(3,2))", [{"f": 2.675}], [D("2.68")]),
    # not found in the docs: case of one type per branch, int and decimal widen to decimal
    ("CASE WHEN i > 0 THEN 1 WHEN i < 0 THEN 2.0 ELSE 1.2 END", [{"i": 1}, {"i": 0}], [D("1.0"), D("1.2")]),
]


@pytest.mark.parametrize("expr, rows, expected", SPARK_CHECKED_CASES, ids=[c[0] for c in SPARK_CHECKED_CASES])
def test_spark_checked_cases(expr: str, rows: list[dict[str, Any]], expected: list[Any]) -> None:
    assert project(expr, rows) == expected


# Output types Spark gives (ANSI doc's typeof(coalesce(...)) examples: sql-ref-ansi-compliance.html),
# and decimal result types (not found in the docs: Spark's DecimalPrecision rules, precision loss
# allowed, integral literals at their own digits)
SPARK_CHECKED_TYPES = [
    ("coalesce(CAST(1 AS TINYINT), CAST(1 AS BIGINT), NULL)", pa.int64()),
    ("coalesce(1, CAST(1 AS FLOAT))", pa.float64()),
    ("coalesce(CAST(1 AS BIGINT), CAST(1 AS FLOAT))", pa.float64()),
    ("coalesce(CAST(1 AS DECIMAL(1,0)), CAST(1 AS FLOAT))", pa.float64()),
    ("d * 100", pa.decimal128(14, 2)),
    ("d * i", pa.decimal128(21, 2)),
    ("d + d2", pa.decimal128(38, 9)),
    ("d / d", pa.decimal128(23, 13)),
    ("d * d2", pa.decimal128(38, 6)),
    ("d % 3", pa.decimal128(3, 2)),
    ("round(d, 1)", pa.decimal128(10, 1)),
    ("round(d, -1)", pa.decimal128(9, 0)),
    ("1.5", pa.decimal128(2, 1)),
    ("0.001", pa.decimal128(3, 3)),
    ("5L", pa.int64()),
]


@pytest.mark.parametrize("expr, arrow_type", SPARK_CHECKED_TYPES, ids=[c[0] for c in SPARK_CHECKED_TYPES])
def test_spark_checked_types(expr: str, arrow_type: pa.DataType) -> None:
    assert out_type(expr) == arrow_type


# --- literals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr, arrow_type, expected",
    [
        ("1", pa.int32(), 1),
        ("2147483648", pa.int64(), 2147483648),
        ("-2147483648", pa.int32(), -2147483648),
        ("12345678901234567890", pa.decimal128(20, 0), D("12345678901234567890")),
        ("1.50", pa.decimal128(3, 2), D("1.50")),
        ("-0.5", pa.decimal128(1, 1), D("-0.5")),
        ("1.5e3", pa.float64(), 1500.0),
        ("1.5D", pa.float64(), 1.5),
        ("2Y", pa.int8(), 2),
        ("3S", pa.int16(), 3),
        ("5L", pa.int64(), 5),
        ("10BD", pa.decimal128(2, 0), D("10")),
        ("1.0F", pa.float32(), 1.0),
        ("'it' 's'", pa.string(), "its"),  # adjacent literals concatenate, as in Spark
        ('"dq"', pa.string(), "dq"),
        ("r'raw'", pa.string(), "raw"),
        ("TRUE", pa.bool_(), True),
        ("FALSE", pa.bool_(), False),
        ("DATE '2024-02-29'", pa.date32(), dt.date(2024, 2, 29)),
        (
            "TIMESTAMP '2024-02-29 10:11:12.5'",
            pa.timestamp("us", tz="UTC"),
            dt.datetime(2024, 2, 29, 10, 11, 12, 500000, tzinfo=UTC),
        ),
        ("CAST(NULL AS STRING)", pa.string(), None),
        ("CAST(NULL AS DECIMAL(5,1))", pa.decimal128(5, 1), None),
    ],
)
def test_literals(expr: str, arrow_type: pa.DataType, expected: Any) -> None:
    assert out_type(expr) == arrow_type
    got = value(expr)
    assert got == expected and (not isinstance(got, dt.datetime) or got.utcoffset() == dt.timedelta(0))


def test_a_doubled_quote_in_a_text_literal_is_refused() -> None:
    """Spark 4 reads 'it''s' as it's (checked against Spark 4.2); sqlglot reads two texts, 'it' 's'."""
    msg = refused("'it''s' AS x")
    assert "doubles its quote" in msg and msg.rstrip().split(". ")[-1].startswith("Fix:")


def test_invalid_typed_literal_is_refused() -> None:
    msg = refused("DATE '2024-02-30' AS x")
    assert "not a valid DATE" in msg and msg.rstrip().split(". ")[-1].startswith("Fix:")


def test_a_bare_null_output_is_refused() -> None:
    assert "CAST(NULL AS STRING)" in refused("NULL AS x")


# --- columns, star, names, metadata -----------------------------------------------------------


def test_star_expands_in_table_order_and_keeps_types() -> None:
    p = compile_projection("*, upper(s) AS s_uc", SCHEMA, TABLE)
    assert p.output_names == (*SCHEMA.names, "s_uc")
    schema = p.output_schema()
    assert [f.type for f in schema][: len(SCHEMA)] == SCHEMA.types  # large_string stays large_string
    out = p.evaluate(batch([{"i": 1, "s": "a", "big": "x"}]), database="shop", table="orders")
    assert out.schema == schema
    assert out.to_pylist()[0]["s_uc"] == "A" and out.to_pylist()[0]["big"] == "x"


def test_star_with_a_name_of_the_table_is_refused() -> None:
    assert "two output columns are named 's'" in refused("*, upper(s) AS s")
    assert "two output columns" in refused("i, I")


def test_names_resolve_case_insensitively_and_keep_the_tables_spelling() -> None:
    p = compile_projection("I, `S`, s AS MyName", SCHEMA, TABLE)
    assert p.output_names == ("i", "s", "MyName")


def test_unknown_column_names_the_column_and_the_tables_columns() -> None:
    msg = refused("nme AS x")
    assert "column 'nme' is not a column of shop.orders" in msg
    assert "i, b, t, sm, s, s2, d" in msg and "__table_name__" in msg and "Fix: " in msg
    assert "column 'zz'" in refused("zz > 1", "filter")


def test_qualified_columns_and_unnamed_expressions_are_refused() -> None:
    assert "qualified column" in refused("o.i AS x")
    assert "has no name" in refused("i + 1")


@pytest.mark.parametrize("expr", ["__namespace_name__", "__schema_name__"])
def test_metadata_database(expr: str) -> None:
    assert project(expr, [{}, {}]) == ["shop", "shop"]


def test_metadata_table_and_op() -> None:
    assert set(METADATA_COLUMNS) == {"__namespace_name__", "__schema_name__", "__table_name__", "__data_event_type__"}
    assert project("__table_name__", [{}]) == ["orders"]
    assert project("__data_event_type__", [{}, {}], op="r") == ["r", "r"]
    ops = pa.array(["+I", "-U", "+U", "-D"])
    assert project("__data_event_type__", [{}] * 4, op=ops) == ["+I", "-U", "+U", "-D"]
    assert keep("__data_event_type__ IN ('+I', '+U') AND __table_name__ = 'orders'", [{}] * 4, op=ops) == [
        True,
        False,
        True,
        False,
    ]
    assert keep("__schema_name__ = 'shop'", [{}]) == [True]


def test_metadata_op_missing_or_of_the_wrong_length() -> None:
    p = compile_projection("__data_event_type__ AS op", SCHEMA, TABLE)
    with pytest.raises(TransformEvalError, match="no op was given"):
        p.evaluate(batch([{}]), database="shop", table="orders")
    with pytest.raises(TransformEvalError, match="2 ops for 1 rows"):
        p.evaluate(batch([{}]), database="shop", table="orders", op=pa.array(["+I", "-D"]))


def test_a_source_column_wins_over_a_metadata_name() -> None:
    schema = pa.schema([("__table_name__", pa.string())])
    p = compile_projection("__table_name__", schema, TABLE)
    out = p.evaluate(
        pa.RecordBatch.from_pylist([{"__table_name__": "mine"}], schema=schema), database="shop", table="orders"
    )
    assert out.column(0).to_pylist() == ["mine"]


# --- arithmetic ---------------------------------------------------------------------------------


def test_integer_arithmetic_types_nulls_and_overflow() -> None:
    assert out_type("i + t") == pa.int32() and out_type("i + b") == pa.int64() and out_type("t + sm") == pa.int16()
    assert project("i + b", [{"i": 1, "b": 2}, {"i": None, "b": 2}, {"i": 1}]) == [3, None, None]
    assert project("i - b", [{"i": 1, "b": 2}]) == [-1]
    assert project("i * i", [{"i": 46340}]) == [2147395600]
    fails("i * i", [{"i": 46341}], "ARITHMETIC_OVERFLOW")
    fails("i + 1", [{"i": 2147483647}], "ARITHMETIC_OVERFLOW")  # the ANSI doc's own example
    fails("t + t", [{"t": 127}], "ARITHMETIC_OVERFLOW")  # TINYINT + TINYINT stays TINYINT
    fails("b - 1", [{"b": -(2**63)}], "ARITHMETIC_OVERFLOW")
    assert project("-i", [{"i": 5}, {"i": None}]) == [-5, None]
    fails("-i", [{"i": -(2**31)}], "ARITHMETIC_OVERFLOW")


def test_division_is_double_and_zero_fails() -> None:
    assert out_type("i / b") == pa.float64() and out_type("r / r") == pa.float64()
    assert project("i / b", [{"i": 7, "b": 2}, {"i": None, "b": 0}, {"i": 1}]) == [3.5, None, None]
    fails("i / b", [{"i": 1, "b": 0}], "DIVIDE_BY_ZERO")
    fails("f / f", [{"f": 1.0}, {"f": 0.0}], "DIVIDE_BY_ZERO")  # no Infinity in ANSI mode
    assert value("f * 10", {"f": 1e308}) == math.inf  # floating point overflow is not an error


def test_div_and_remainder() -> None:
    assert out_type("i div t") == pa.int64() and out_type("i % t") == pa.int32()
    assert project("i div b", [{"i": 7, "b": 2}, {"i": 7, "b": -1}, {"i": None, "b": 0}]) == [3, -7, None]
    assert project("b % i", [{"b": -(2**63), "i": -1}, {"b": 5, "i": 3}, {"b": None, "i": 0}]) == [0, 2, None]
    fails("i div b", [{"i": 1, "b": 0}], "DIVIDE_BY_ZERO")
    fails("b div i", [{"b": -(2**63), "i": -1}], "ARITHMETIC_OVERFLOW")
    fails("i % b", [{"i": 1, "b": 0}], "REMAINDER_BY_ZERO")  # Spark's name for % (checked against Spark 4.2)
    assert "div of decimals" in refused("d div 2 AS x")
    assert "% of FLOAT/DOUBLE" in refused("f % 2 AS x")


def test_double_and_float_arithmetic() -> None:
    assert value("f + 0.2", {"f": 0.1}) == 0.1 + 0.2  # 0.2 is DECIMAL, widened to DOUBLE
    # FLOAT with any other number, TINYINT included, is DOUBLE (checked against Spark 4.2)
    assert out_type("r + t") == pa.float64() and out_type("r + i") == pa.float64() and out_type("f + d") == pa.float64()
    assert out_type("r + r") == pa.float32()
    assert value("r * 2Y", {"r": 1.5}) == 3.0


def test_decimal_arithmetic_values() -> None:
    rows = [{"d": D("12.35"), "i": 3}, {"d": D("-0.05"), "i": 7}, {"d": None, "i": 1}]
    assert project("d + 1", rows) == [D("13.35"), D("0.95"), None]
    assert project("d - i", rows) == [D("9.35"), D("-7.05"), None]
    assert project("d * i", rows) == [D("37.05"), D("-0.35"), None]
    assert project("d / i", rows) == [D("4.1166666666667"), D("-0.0071428571429"), None]  # HALF_UP at 13
    assert project("d % i", rows) == [D("0.35"), D("-0.05"), None]
    assert value("d / 3", {"d": D("-2.00")}) == D("-0.666667")
    fails("d / 0", [{"d": D("1")}], "DIVIDE_BY_ZERO")
    fails("d % 0", [{"d": D("1")}], "REMAINDER_BY_ZERO")


def test_decimal_precision_loss_and_overflow() -> None:
    # DECIMAL(10,2) * DECIMAL(38,10) keeps scale 6: the product is rounded HALF_UP
    assert value("d * d2", {"d": D("1.05"), "d2": D("1.0000005")}) == D("1.050001")
    fails("d * d2", [{"d": D("99999999.99"), "d2": D("9" * 27 + ".0")}], "NUMERIC_VALUE_OUT_OF_RANGE")


def test_decimal_operations_needing_more_than_76_digits_are_refused() -> None:
    # Arrow sizes a product at p1 + p2 + 1 digits: 77 for two DECIMAL(38,s), one more than decimal256
    assert "needs more than 76 digits" in refused("d2 * d2 AS x")


def test_abs() -> None:
    assert project("abs(i)", [{"i": -3}, {"i": None}]) == [3, None]
    assert value("abs(d)", {"d": D("-1.50")}) == D("1.50") and value("abs(f)", {"f": -0.5}) == 0.5
    fails("abs(i)", [{"i": -(2**31)}], "ARITHMETIC_OVERFLOW")  # the ANSI doc's example


# --- comparisons and logic ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "op, expected",
    [
        ("=", [False, True, None]),
        ("==", [False, True, None]),
        ("<>", [True, False, None]),
        ("!=", [True, False, None]),
        ("<", [True, False, None]),
        ("<=", [True, True, None]),
        (">", [False, False, None]),
        (">=", [False, True, None]),
        ("<=>", [False, True, False]),
    ],
)
def test_comparisons_with_nulls(op: str, expected: list[Optional[bool]]) -> None:
    rows = [{"i": 1, "b": 2}, {"i": 2, "b": 2}, {"i": None, "b": 2}]
    assert project(f"i {op} b", rows) == expected


def test_null_safe_equality_of_two_nulls_and_is_not_distinct_from() -> None:
    assert project("i <=> b", [{}]) == [True]
    assert project("i IS NOT DISTINCT FROM b", [{}, {"i": 1}]) == [True, False]


def test_comparison_across_types() -> None:
    assert value("d = i", {"d": D("3.00"), "i": 3}) is True
    assert value("d > 1.005", {"d": D("1.01")}) is True
    assert value("s < s2", {"s": "B", "s2": "a"}) is True  # byte order, not collation
    assert value("s < s2", {"s": "z", "s2": "é"}) is True
    assert value("dt < ts", {"dt": dt.date(2020, 1, 2), "ts": dt.datetime(2020, 1, 2, 0, 0, 1, tzinfo=UTC)})
    assert value("dt = ts", {"dt": dt.date(2020, 1, 2), "ts": dt.datetime(2020, 1, 2, tzinfo=UTC)}) is True
    assert project(
        "ts >= '2020-01-02'",
        [{"ts": dt.datetime(2020, 1, 2, tzinfo=UTC)}, {"ts": dt.datetime(2020, 1, 1, 23, tzinfo=UTC)}],
    ) == [True, False]
    assert value("dt = '2020-01-02'", {"dt": dt.date(2020, 1, 2)}) is True
    assert value("ok = TRUE", {"ok": False}) is False
    assert "mixes" in refused("i = s AS x") and "mixes" in refused("s = 1 AS x")
    assert "not a valid DATE" in refused("dt = '2020-13-01' AS x")


def test_nan_compares_as_spark_does() -> None:
    rows = [{"f": math.nan, "r": math.nan}, {"f": math.nan, "r": 1.0}, {"f": 1.0, "r": math.nan}]
    assert project("f = r", rows) == [True, False, False]
    assert project("f > r", rows) == [False, True, False]
    assert project("f < r", rows) == [False, False, True]
    assert project("f <=> r", rows) == [True, False, False]


T, F, N = True, False, None


@pytest.mark.parametrize("a, b", [(x, y) for x in (T, F, N) for y in (T, F, N)])
def test_three_valued_logic(a: Optional[bool], b: Optional[bool]) -> None:
    def sql_and(x, y):
        return F if F in (x, y) else (N if N in (x, y) else T)

    def sql_or(x, y):
        return T if T in (x, y) else (N if N in (x, y) else F)

    schema = pa.schema([("a", pa.bool_()), ("b", pa.bool_())])
    data = pa.RecordBatch.from_pylist([{"a": a, "b": b}], schema=schema)
    p = compile_projection("a AND b AS x, a OR b AS y, NOT a AS z", schema, TABLE)
    assert p.evaluate(data, database="", table="").to_pylist() == [
        {"x": sql_and(a, b), "y": sql_or(a, b), "z": None if a is None else not a}
    ]
    f = compile_filter("a AND b", schema, TABLE)
    assert f.evaluate(data, database="", table="").to_pylist() == [sql_and(a, b) is True]


def test_and_or_case_if_coalesce_do_not_evaluate_where_spark_does_not() -> None:
    rows = [{"i": 0, "b": 5}, {"i": 2, "b": 5}, {"i": None, "b": 5}]
    assert project("i <> 0 AND b / i > 1", rows) == [False, True, None]
    assert project("i = 0 OR b / i > 1", rows) == [True, True, None]
    assert project("CASE WHEN i <> 0 THEN b div i END", rows) == [None, 2, None]
    assert project("CASE WHEN i = 0 THEN -1 WHEN b / i > 1 THEN 1 ELSE 0 END", rows) == [-1, 1, 0]
    assert project("if(i = 0, NULL, b % i)", rows) == [None, 1, None]
    assert project("coalesce(CAST(i AS BIGINT), b div 0)", [{"i": 1, "b": 1}]) == [1]
    fails("coalesce(CAST(i AS BIGINT), b div 0)", [{"b": 1}], "DIVIDE_BY_ZERO")
    fails("i <> 0 OR b / i > 1", [{"i": 0, "b": 1}], "DIVIDE_BY_ZERO")


def test_is_null_and_functions() -> None:
    rows = [{"s": "x"}, {}]
    assert project("s IS NULL", rows) == [False, True] and project("s IS NOT NULL", rows) == [True, False]
    assert project("isnull(s)", rows) == [False, True] and project("isnotnull(s)", rows) == [True, False]
    assert project("NOT s IS NULL", rows) == [True, False]


def test_in_three_valued() -> None:
    rows = [{"i": 1}, {"i": 3}, {}]
    assert project("i IN (1, 2)", rows) == [True, False, None]
    assert project("i IN (1, NULL)", rows) == [True, None, None]
    assert project("i NOT IN (1, NULL)", rows) == [False, None, None]
    assert project("i NOT IN (1, 2)", rows) == [False, True, None]
    assert value("d IN (1.5, 2)", {"d": D("2.00")}) is True
    assert value("s IN ('a', 'b')", {"s": "b"}) is True
    assert value("f IN (1.5)", {"f": 1.5}) is True
    assert "non-constant" in refused("i IN (b, 2) AS x")
    assert "subquery" in refused("i IN (SELECT 1) AS x")


def test_between() -> None:
    rows = [{"i": 1}, {"i": 5}, {"i": 11}, {}]
    assert project("i BETWEEN 1 AND 10", rows) == [True, True, False, None]
    assert project("i NOT BETWEEN 1 AND 10", rows) == [False, False, True, None]
    assert project("i BETWEEN b AND 10", [{"i": 11, "b": None}, {"i": 5, "b": None}]) == [False, None]
    assert "BETWEEN SYMMETRIC" in refused("i BETWEEN SYMMETRIC 1 AND 2 AS x")


def test_like() -> None:
    rows = [{"s": "abc"}, {"s": "a\nc"}, {"s": "añc"}, {"s": "a😀c"}, {"s": "ac"}, {"s": "ABC"}, {}]
    assert project("s LIKE 'a_c'", rows) == [True, True, True, True, False, False, None]
    assert project("s LIKE 'a%'", rows) == [True, True, True, True, True, False, None]
    assert project("s NOT LIKE '%c'", rows) == [False, False, False, False, False, True, None]
    assert project("s LIKE 'a.c'", rows) == [False] * 6 + [None]  # regex characters are literal
    assert "backslash" in refused(r"s LIKE 'a\%' AS x")
    assert "ESCAPE" in refused("s LIKE 'a#%' ESCAPE '#' AS x")
    assert "ILIKE" in refused("s ILIKE 'a' AS x")
    assert "not a text literal" in refused("s LIKE s2 AS x")
    assert "LIKE ANY" in refused("s LIKE ANY ('a', 'b') AS x")


# --- strings ------------------------------------------------------------------------------------


def test_concat_and_pipes() -> None:
    rows = [{"s": "a", "s2": "b"}, {"s": "a"}, {"s": "", "s2": ""}]
    assert project("s || s2", rows) == ["ab", None, ""]
    assert project("concat(s, '-', s2)", rows) == ["a-b", None, "-"]
    assert project("s || CAST(i AS STRING)", [{"s": "n", "i": 7}]) == ["n7"]
    assert "CAST the others AS STRING" in refused("s || i AS x")


def test_upper_lower() -> None:
    rows = [{"s": "Hello é"}, {"s": ""}, {}]
    assert project("upper(s)", rows) == ["HELLO É", "", None] and project("ucase(s)", rows)[0] == "HELLO É"
    assert project("lower(s)", [{"s": "ÀB"}]) == ["àb"] and project("lcase(s)", [{"s": "X"}]) == ["x"]
    # Java's full case mapping (Spark) turns ß into SS; refusing the row beats writing 'ẞ'
    fails("upper(s)", [{"s": "straße"}], "differs from the one-character mapping")
    fails("lower(s)", [{"s": "ΟΔΟΣ"}], "differs from the one-character mapping")
    assert project("CASE WHEN s = 'x' THEN upper(s) END", [{"s": "ß"}]) == [None]  # not evaluated there


def test_trim_variants() -> None:
    rows = [{"s": "  a b  "}, {"s": "\ta\t"}, {}]
    assert project("trim(s)", rows) == ["a b", "\ta\t", None]  # spaces only
    assert project("ltrim(s)", rows) == ["a b  ", "\ta\t", None]
    assert project("rtrim(s)", rows) == ["  a b", "\ta\t", None]
    assert project("trim(BOTH FROM s)", rows)[0] == "a b"
    assert project("trim('xy' FROM s)", [{"s": "xyaxy"}]) == ["a"]
    assert "not a text literal" in refused("trim(s2 FROM s) AS x")
    assert "of a constant" in refused("trim('x' FROM 'xax') AS x")


def test_two_argument_ltrim_is_characters_first_or_refused() -> None:
    """ltrim(trimStr, str) (Databricks .../functions/ltrim: "ltrim( [trimstr ,] str)"); sqlglot
    before 28 reads the two arguments the other way round, which the compiler then refuses."""
    try:
        got = project("ltrim('abc', s)", [{"s": "acbabSparkSQL "}, {}])
    except TransformError as e:
        assert "not a text literal" in str(e)
    else:
        assert got == ["SparkSQL ", None]


def test_length() -> None:
    assert project("length(s)", [{"s": "héllo"}, {"s": "a😀"}, {"s": ""}, {}]) == [5, 2, 0, None]
    assert project("char_length(s)", [{"s": "ab "}]) == [3] and project("character_length(s)", [{"s": "a"}]) == [1]
    assert project("length(bin)", [{"bin": b"\x00\xff"}]) == [2]
    assert out_type("length(s)") == pa.int32()


def spark_substring(s: str, pos: int, length: int = 2**31 - 1) -> str:
    """UTF8String.substringSQL (Spark 3.x/4.x), ported line by line as the oracle."""
    n = len(s)
    start = pos - 1 if pos > 0 else (n + pos if pos < 0 else 0)
    end = min(max(start + length, -(2**31)), 2**31 - 1)
    start = max(start, 0)
    return "" if start >= end else s[start:end]


@pytest.mark.parametrize("pos", [-7, -5, -4, -3, -1, 0, 1, 2, 4, 5, 6, 9])
@pytest.mark.parametrize("length", [None, -1, 0, 1, 2, 3, 10])
def test_substring_matches_spark(pos: int, length: Optional[int]) -> None:
    strings = ["hello", "héllo", "a😀b", "", "ab"]
    args = f"{pos}" if length is None else f"{pos}, {length}"
    got = project(f"substr(s, {args})", [{"s": x} for x in strings] + [{}])
    want = [spark_substring(x, pos) if length is None else spark_substring(x, pos, length) for x in strings]
    assert got == want + [None]


def test_substring_needs_constant_ints() -> None:
    assert "constant INT" in refused("substring(s, i) AS x")
    assert "constant INT" in refused("substring(s, 1L) AS x")


# --- CASE, IF, COALESCE -------------------------------------------------------------------------


def test_case_forms() -> None:
    rows = [{"i": 1}, {"i": 2}, {"i": 3}, {}]
    assert project("CASE WHEN i = 1 THEN 'one' WHEN i = 2 THEN 'two' ELSE 'many' END", rows) == [
        "one",
        "two",
        "many",
        "many",
    ]
    assert project("CASE i WHEN 1 THEN 'one' WHEN 2 THEN 'two' END", rows) == ["one", "two", None, None]
    assert project("CASE WHEN ok THEN 1 ELSE 0 END", [{"ok": True}, {"ok": None}, {"ok": False}]) == [1, 0, 0]
    assert out_type("CASE WHEN ok THEN i ELSE b END") == pa.int64()
    assert out_type("CASE WHEN ok THEN d ELSE 1.5 END") == pa.decimal128(10, 2)
    assert "mixes" in refused("CASE WHEN ok THEN 1 ELSE 'x' END AS x")
    assert "a condition" in refused("CASE WHEN i THEN 1 END AS x")


def test_if() -> None:
    assert project("if(ok, 'y', 'n')", [{"ok": True}, {"ok": False}, {}]) == ["y", "n", "n"]
    assert "three arguments" in refused("if(ok, 1) AS x")


def test_coalesce_nvl_ifnull() -> None:
    rows = [{"i": 1, "b": 2}, {"b": 2}, {}]
    assert project("coalesce(i, b, 0)", rows) == [1, 2, 0]
    assert project("nvl(i, 9)", rows) == [1, 9, 9] and project("ifnull(i, 9)", rows) == [1, 9, 9]
    assert out_type("coalesce(i, b)") == pa.int64() and out_type("coalesce(d, 1)") == pa.decimal128(12, 2)


# --- round --------------------------------------------------------------------------------------


def test_round_decimal() -> None:
    rows = [{"d": D("1.25")}, {"d": D("-1.25")}, {"d": D("99999999.99")}, {}]
    assert project("round(d, 1)", rows) == [D("1.3"), D("-1.3"), D("100000000.0"), None]
    assert project("round(d)", rows) == [D("1"), D("-1"), D("100000000"), None]
    assert project("round(d, -2)", [{"d": D("150.00")}, {"d": D("-149.99")}]) == [D("200"), D("-100")]
    assert project("round(d, 5)", [{"d": D("1.25")}]) == [D("1.25")] and out_type("round(d, 5)") == pa.decimal128(11, 2)


def test_round_double_and_float() -> None:
    rows = [{"f": 1.005}, {"f": -0.001}, {"f": 1e20}, {"f": math.inf}, {"f": 1.5e-40}, {"f": 123.456}, {}]
    got = project("round(f, 2)", rows)
    assert got[:3] == [1.01, 0.0, 1e20] and got[3] == math.inf and got[4:] == [0.0, 123.46, None]
    assert math.copysign(1, got[1]) == 1  # no -0.0: BigDecimal has none
    assert math.isnan(value("round(f, 1)", {"f": math.nan}))
    assert value("round(f, -2)", {"f": 1250.0}) == 1300.0
    assert value("round(r, 1)", {"r": 0.25}) == pytest.approx(0.3) and out_type("round(r, 1)") == pa.float32()
    assert value("round(f, 1)", {"f": 1e38}) == 1e38  # its digits end far above: unchanged, as in Spark
    fails("round(f, -30)", [{"f": 1e38}], "UNSUPPORTED_VALUE")


def test_round_integers() -> None:
    assert project("round(i, -1)", [{"i": 15}, {"i": -15}, {"i": 14}, {}]) == [20, -20, 10, None]
    assert project("round(i, 2)", [{"i": 15}]) == [15] and out_type("round(i, -1)") == pa.int32()
    fails("round(t, -1)", [{"t": 125}], "ARITHMETIC_OVERFLOW")
    assert "constant INT" in refused("round(d, i) AS x")
    assert "from -38 to 38" in refused("round(d, 40) AS x")


# --- casts --------------------------------------------------------------------------------------


def test_cast_to_string() -> None:
    assert project("CAST(i AS STRING)", [{"i": -5}, {}]) == ["-5", None]
    assert project("CAST(d AS STRING)", [{"d": D("1.20")}, {"d": D("-0.05")}, {"d": D("0")}]) == [
        "1.20",
        "-0.05",
        "0.00",
    ]
    assert value("CAST(ok AS STRING)", {"ok": True}) == "true"
    assert value("CAST(dt AS STRING)", {"dt": dt.date(2020, 1, 2)}) == "2020-01-02"
    assert value("CAST(ntz AS STRING)", {"ntz": dt.datetime(2020, 1, 2, 3, 4, 5, 120000)}) == "2020-01-02 03:04:05.12"
    assert (
        value("CAST(ts AS STRING)", {"ts": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)})
        == "1969-12-31 23:59:59.999999"
    )
    assert "CAST from DOUBLE to STRING" in refused("CAST(f AS STRING) AS x")
    assert "CHAR/VARCHAR" in refused("CAST(s AS VARCHAR(3)) AS x")


def test_cast_text_to_integers() -> None:
    rows = [{"s": "42"}, {"s": " -7 "}, {"s": "+3"}, {"s": "\n12\t"}, {}]
    assert project("CAST(s AS INT)", rows) == [42, -7, 3, 12, None]
    assert out_type("CAST(s AS BIGINT)") == pa.int64()
    for bad in ("1.5", "abc", "", "1e3", "1 2"):
        fails("CAST(s AS INT)", [{"s": bad}], "CAST_INVALID_INPUT")
    fails("CAST(s AS INT)", [{"s": "2147483648"}], "CAST_INVALID_INPUT")
    fails("CAST(s AS TINYINT)", [{"s": "128"}], "CAST_INVALID_INPUT")
    assert "fails: the value is not a valid INT" in refused("CAST('a' AS INT) AS x")  # the ANSI doc's example


def test_cast_numbers_to_integers() -> None:
    assert project("CAST(f AS INT)", [{"f": 2.9}, {"f": -2.9}, {}]) == [2, -2, None]
    assert project("CAST(d AS BIGINT)", [{"d": D("-7.99")}]) == [-7]
    assert project("CAST(ok AS INT)", [{"ok": True}, {"ok": False}]) == [1, 0]
    assert project("CAST(b AS INT)", [{"b": 2**31 - 1}]) == [2**31 - 1]
    fails("CAST(b AS INT)", [{"b": 2**31}], "CAST_OVERFLOW")  # the ANSI doc's example
    fails("CAST(f AS INT)", [{"f": 3e9}], "CAST_OVERFLOW")
    fails("CAST(f AS BIGINT)", [{"f": math.nan}], "CAST_OVERFLOW")
    fails("CAST(r AS SMALLINT)", [{"r": 40000.0}], "CAST_OVERFLOW")


def test_cast_to_double_and_float() -> None:
    assert project("CAST(d2 AS DOUBLE)", [{"d2": D("0.1000000000")}, {"d2": D("1234567890123456789.1234567891")}]) == [
        0.1,
        1.2345678901234568e18,
    ]
    assert project("CAST(s AS DOUBLE)", [{"s": "1.5e3"}, {"s": " -.5 "}, {"s": "1e400"}]) == [1500.0, -0.5, math.inf]
    fails("CAST(s AS DOUBLE)", [{"s": "1,5"}], "CAST_INVALID_INPUT")
    assert value("CAST(b AS DOUBLE)", {"b": 2**53 + 1}) == float(2**53)
    assert value("CAST(i AS FLOAT)", {"i": 3}) == 3.0 and out_type("CAST(d AS FLOAT)") == pa.float32()
    assert "CAST from DOUBLE to FLOAT" in refused("CAST(f AS FLOAT) AS x")


def test_cast_to_decimal() -> None:
    assert project("CAST(d AS DECIMAL(5,1))", [{"d": D("1.25")}, {"d": D("-1.25")}, {}]) == [D("1.3"), D("-1.3"), None]
    fails("CAST(d AS DECIMAL(3,1))", [{"d": D("99.99")}], "NUMERIC_VALUE_OUT_OF_RANGE")
    assert project("CAST(i AS DECIMAL(12,2))", [{"i": 7}]) == [D("7.00")]
    fails("CAST(i AS DECIMAL(3,0))", [{"i": 1000}], "NUMERIC_VALUE_OUT_OF_RANGE")
    assert project("CAST(f AS DECIMAL(10,3))", [{"f": 0.1}, {"f": 1e-45}, {"f": -1.0005}]) == [
        D("0.100"),
        D("0.000"),
        D("-1.001"),
    ]
    fails("CAST(f AS DECIMAL(5,2))", [{"f": 1000.0}], "NUMERIC_VALUE_OUT_OF_RANGE")
    # NaN and Infinity give NULL, even in ANSI mode (checked against Spark 4.2)
    assert project("CAST(f AS DECIMAL(5,2))", [{"f": math.inf}, {"f": math.nan}, {"f": -math.inf}]) == [None] * 3
    assert project("CAST(s AS DECIMAL(5,2))", [{"s": " 1.005 "}, {"s": "-0012.3"}, {"s": ".5"}, {"s": "7."}]) == [
        D("1.01"),
        D("-12.30"),
        D("0.50"),
        D("7.00"),
    ]
    fails("CAST(s AS DECIMAL(5,2))", [{"s": "1234"}], "NUMERIC_VALUE_OUT_OF_RANGE")
    fails("CAST(s AS DECIMAL(5,2))", [{"s": "1e2"}], "CAST_INVALID_INPUT")
    assert value("CAST(ok AS DECIMAL(2,1))", {"ok": True}) == D("1.0")
    assert out_type("CAST(i AS DECIMAL)") == pa.decimal128(10, 0) and out_type(
        "CAST(i AS DECIMAL(7))"
    ) == pa.decimal128(7, 0)
    assert "not a Spark decimal type" in refused("CAST(i AS DECIMAL(40,2)) AS x")


def test_cast_to_date_and_timestamp() -> None:
    assert project("CAST(s AS DATE)", [{"s": "2024-02-29"}, {"s": " 2020-01-01\t"}, {}]) == [
        dt.date(2024, 2, 29),
        dt.date(2020, 1, 1),
        None,
    ]
    fails("CAST(s AS DATE)", [{"s": "2023-02-29"}], "CAST_INVALID_INPUT")
    fails("CAST(s AS DATE)", [{"s": "2020-1-1"}], "CAST_INVALID_INPUT")  # Spark reads it; equal or error
    assert value("CAST(ts AS DATE)", {"ts": dt.datetime(1969, 12, 31, 12, tzinfo=UTC)}) == dt.date(1969, 12, 31)
    assert value("CAST(ntz AS DATE)", {"ntz": dt.datetime(2020, 5, 6, 23, 59)}) == dt.date(2020, 5, 6)
    assert project(
        "CAST(s AS TIMESTAMP)", [{"s": "2020-01-02 03:04:05.5"}, {"s": "2020-01-02T03:04:05"}, {"s": "2020-01-02"}]
    ) == [
        dt.datetime(2020, 1, 2, 3, 4, 5, 500000, tzinfo=UTC),
        dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC),
        dt.datetime(2020, 1, 2, tzinfo=UTC),
    ]
    fails("CAST(s AS TIMESTAMP)", [{"s": "2020-01-02 25:00:00"}], "CAST_INVALID_INPUT")
    assert value("CAST(dt AS TIMESTAMP)", {"dt": dt.date(2020, 1, 2)}) == dt.datetime(2020, 1, 2, tzinfo=UTC)
    assert value("CAST(ntz AS TIMESTAMP)", {"ntz": dt.datetime(2020, 1, 2, 3)}) == dt.datetime(
        2020, 1, 2, 3, tzinfo=UTC
    )
    assert "CAST from DATE to INT" in refused("CAST(dt AS INT) AS x")
    assert "CAST to TIMESTAMP_NTZ" in refused("CAST(ts AS TIMESTAMP_NTZ) AS x")


def test_cast_to_boolean() -> None:
    texts = ["t", "TRUE", " yes ", "Y", "1", "f", "False", "no", "N", "0"]
    assert project("CAST(s AS BOOLEAN)", [{"s": x} for x in texts] + [{}]) == [True] * 5 + [False] * 5 + [None]
    fails("CAST(s AS BOOLEAN)", [{"s": "maybe"}], "CAST_INVALID_INPUT")
    assert project("CAST(i AS BOOLEAN)", [{"i": 0}, {"i": -3}]) == [False, True]
    assert project("CAST(d AS BOOLEAN)", [{"d": D("0.00")}, {"d": D("0.01")}]) == [False, True]


def test_cast_errors_only_on_rows_spark_evaluates() -> None:
    rows = [{"s": "12", "ok": True}, {"s": "oops", "ok": False}]
    assert project("CASE WHEN ok THEN CAST(s AS INT) END", rows) == [12, None]
    assert keep("ok AND CAST(s AS INT) > 10", rows) == [True, False]


def test_try_cast_is_refused() -> None:
    assert "try_cast" in refused("try_cast(s AS INT) AS x")


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr, construct",
    [
        ("md5(s) AS x", "function md5()"),
        ("pmod(i, 2) AS x", "function pmod()"),
        ("i & 1 AS x", "&"),
        ("current_date() AS x", "function current_date()"),
        ("s RLIKE 'a' AS x", "RLIKE"),
        ("count(*) AS x", "function count()"),
        ("date_add(dt, 1) AS x", "function date_add()"),
        ("ok IS TRUE AS x", "IS TRUE"),
        ("INTERVAL 1 DAY AS x", "INTERVAL"),
        ("X'0A' AS x", "X'..'"),
        ("concat_ws(',', s) AS x", "function concat_ws()"),
        ("bround(d) AS x", "function bround()"),
    ],
)
def test_unsupported_constructs_are_refused_with_the_list_and_a_fix(expr: str, construct: str) -> None:
    msg = refused(expr)
    assert isinstance(TransformError(msg), ConfigError)
    assert construct in msg and repr(expr) in msg and "Supported: columns of the table" in msg
    fix = msg[msg.index("Fix: ") :]
    assert msg.index("Supported:") < msg.index("Fix: ") and ". " not in fix  # Fix: is the last sentence


def test_not_a_projection_or_not_a_condition() -> None:
    assert "more than a projection (a second statement)" in refused("i; SELECT 2")
    assert "more than a filter (group" in refused("i > 1 GROUP BY i", "filter")
    assert "not Spark SQL" in refused("i +")
    assert "empty item" in refused("i, , s")
    assert "not a condition" in refused("i + 1", "filter")
    assert "o.* is not supported here" in refused("o.*")
    assert "function count()" in refused("count(*) > 1", "filter")


def test_the_filter_counts_null_as_false() -> None:
    assert keep("i > 1", [{"i": 2}, {"i": 1}, {}]) == [True, False, False]
    assert "bare NULL" in refused("NULL", "filter")  # Spark: FILTER_NOT_BOOLEAN (checked against Spark 4.2)
    assert keep("CAST(NULL AS BOOLEAN)", [{}, {}]) == [False, False]
    assert keep("s LIKE 'a%' OR i IS NULL", [{"s": "ab", "i": 1}, {"s": "b", "i": 1}, {"s": None}]) == [
        True,
        False,
        True,
    ]


# --- compiled objects ---------------------------------------------------------------------------


def test_pickled_transforms_evaluate_the_same() -> None:
    rows = [{"i": 3, "s": "abc", "d": D("1.25"), "ts": dt.datetime(2020, 1, 1, tzinfo=UTC)}, {}]
    p = compile_projection("*, round(d, 1) AS rd, upper(s) || '!' AS loud, __table_name__ AS src", SCHEMA, TABLE)
    f = compile_filter("i > 1 AND s LIKE 'a%' AND __data_event_type__ <> '-D'", SCHEMA, TABLE)
    p2, f2 = pickle.loads(pickle.dumps(p)), pickle.loads(pickle.dumps(f))
    assert isinstance(p2, CompiledProjection) and isinstance(f2, CompiledFilter)
    kw = dict(database="shop", table="orders", op="+U")
    assert p2.evaluate(batch(rows), **kw).equals(p.evaluate(batch(rows), **kw))
    assert f2.evaluate(batch(rows), **kw).to_pylist() == f.evaluate(batch(rows), **kw).to_pylist() == [True, False]
    assert p2.output_schema() == p.output_schema()


def test_output_schema_before_any_row_and_for_a_changed_table() -> None:
    p = compile_projection("*, CAST(i AS STRING) AS si", pa.schema([("i", pa.int32())]), TABLE)
    assert p.output_schema() == pa.schema([("i", pa.int32()), ("si", pa.string())])
    wider = pa.schema([("i", pa.int64()), ("added", pa.date32())])
    assert p.output_schema(wider) == pa.schema([("i", pa.int64()), ("added", pa.date32()), ("si", pa.string())])
    assert all(f.nullable for f in p.output_schema())


def test_a_table_input_and_a_batch_of_another_schema() -> None:
    p = compile_projection("i + 1 AS j", SCHEMA, TABLE)
    table = pa.Table.from_batches([batch([{"i": 1}]), batch([{"i": 2}])])
    assert p.evaluate(table, database="shop", table="orders").column(0).to_pylist() == [2, 3]
    other = pa.RecordBatch.from_pylist([{"i": 1}], schema=pa.schema([("i", pa.int64())]))
    with pytest.raises(TransformError, match="compiled as int32"):
        p.evaluate(other, database="shop", table="orders")
    empty = compile_filter("i > 0", SCHEMA, TABLE).evaluate(batch([]), database="shop", table="orders")
    assert empty.to_pylist() == []


def test_eval_errors_name_the_expression_the_table_and_the_value() -> None:
    msg = fails("i / b", [{"i": 5, "b": 0}], "DIVIDE_BY_ZERO")
    assert "'i / b AS out'" in msg and "shop.orders" in msg and "found 5" in msg and "ANSI" in msg


# --- what Spark 4.2 does beyond its docs (found by tests/integration/test_transform_spark_differential.py)


def run(expr: str, schema: pa.Schema, rows: list[dict[str, Any]], kind: str = "projection") -> list[Any]:
    if kind == "filter":
        f = compile_filter(expr, schema, TABLE)
        return f.evaluate(pa.RecordBatch.from_pylist(rows, schema=schema), database="", table="").to_pylist()
    p = compile_projection(f"{expr} AS out", schema, TABLE)
    return p.evaluate(pa.RecordBatch.from_pylist(rows, schema=schema), database="", table="").column(0).to_pylist()


WIDE = pa.schema(
    [
        ("i", pa.int32()),
        ("b", pa.int64()),
        ("d4", pa.decimal128(4, 4)),
        ("d5", pa.decimal128(38, 0)),
        ("d2", pa.decimal128(38, 10)),
        ("d18", pa.decimal128(18, 17)),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("ok", pa.bool_()),
    ]
)


def test_spark_types_beyond_the_docs() -> None:
    def typed(expr: str) -> pa.DataType:
        return compile_projection(f"{expr} AS out", WIDE, TABLE).output_schema().field("out").type

    assert typed("d4 + 2Y") == pa.decimal128(8, 4)  # a TINYINT literal counts as DECIMAL(3,0), 3S as its digits
    assert typed("d4 + 3S") == pa.decimal128(6, 4)
    assert typed("NULL / d4") == pa.float64() and typed("d4 / NULL") == pa.decimal128(13, 9)
    # wider than 38 digits: the integer digits are kept, the scale cut (and the values rounded)
    assert typed("coalesce(d4, d5)") == pa.decimal128(38, 0)
    assert run("coalesce(d4, d5)", WIDE, [{"d4": D("0.5"), "d5": D(7)}, {"d4": D("-0.4999")}]) == [D(1), D(0)]
    assert run("d4 = d5", WIDE, [{"d4": D("0.5"), "d5": D(1)}]) == [True]


def test_spark_evaluates_lazily_where_its_code_does() -> None:
    rows = [{"i": 0, "b": 5}, {"i": 2, "b": 5}]
    # the second operand only where the first is not NULL; a divisor first
    assert run("if(i = 0, NULL, 1) + b div i", WIDE, rows) == [None, 3]
    assert run("(b div i) div if(i = 0, NULL, 1)", WIDE, [{"i": 2, "b": 5}, {"i": None, "b": 5}]) == [2, None]
    assert run("b div if(i = 0, NULL, i)", WIDE, rows) == [None, 2]
    assert run("concat(if(i = 0, NULL, 'x'), CAST(b div i AS STRING))", WIDE, rows) == [None, "x2"]
    with pytest.raises(TransformEvalError, match="DIVIDE_BY_ZERO"):
        run("b div i + if(i = 0, NULL, 1)", WIDE, rows)


def test_spark_optimizer_rewrites_that_change_a_result() -> None:
    rows = [{"i": 0, "b": 5, "ok": True}, {"i": 2147483647, "b": 1, "ok": False}]
    assert run("(i + 2147483647) + -2147483647", WIDE, rows) == [0, 2147483647]  # constants added first
    assert "Spark computes the constants" in refused("(i + 1) + 2147483647 AS x")
    for expr, want in [
        ("(b div i > 0) AND FALSE", [False] * 2),
        ("(b div i > 0) OR TRUE", [True] * 2),
        ("CASE WHEN b div i > 0 THEN 1 ELSE 1 END", [1, 1]),
        ("if(b div i > 0, 'a', 'a')", ["a"] * 2),
        ("(b div i) <=> (b div i)", [True] * 2),
        ("(i + b) <=> (b + i)", [True] * 2),
        ("b div i + NULL", [None] * 2),
        ("NULL < b div i", [None] * 2),
        ("b div i IN (NULL)", [None] * 2),
        ("(2147483647 + 1) IS NULL", [False] * 2),
        ("CASE WHEN NULL AND b div i > 0 THEN 1 ELSE 0 END", [0, 0]),
    ]:
        assert run(expr, WIDE, rows) == want, expr
    assert run("NULL AND b div i > 0", WIDE, rows, "filter") == [False, False]  # NULL is FALSE in a filter
    with pytest.raises(TransformEvalError):
        run("NULL AND b div i > 0", WIDE, rows)  # not in a projection
    # an integer compared with a decimal literal beyond BIGINT: decided without the value, NULL included
    assert run("b < 9223372036854775808", WIDE, [{"b": None}, {"b": 1}]) == [True, True]
    assert run("b BETWEEN 0 AND 9223372036854775808", WIDE, [{"b": None}]) == [None]  # not for BETWEEN
    # a constant part that fails fails Spark's planning, unless only some rows reach it
    assert "whatever the rows" in refused("i + (2147483647 + 1) AS x")
    assert run("CASE WHEN i > 100000 THEN 1 div 0 END", WIDE, [{"i": 5}]) == [None]


def test_what_spark_refuses_is_refused() -> None:
    assert "Spark requires a BOOLEAN" in refused("CASE WHEN NULL THEN 1 END AS x")
    assert "not Spark SQL" in refused("i IN (1, 2) IS NULL AS x")
    assert "not Spark SQL" in refused("i IS NULL = TRUE AS x")
    assert compile_projection("(i IN (1, 2)) IS NULL AS x", SCHEMA, TABLE).output_names == ("x",)
    assert "no select item" in refused("-- i") and "no select item" in refused("")


def test_spark_values_beyond_the_docs() -> None:
    # IN finds -0.0 among 0.0
    assert run("f IN (0.0, 2.5)", WIDE, [{"f": -0.0}]) == [True]
    # a decimal of more than 34 digits is negated through a Scala BigDecimal (34 digits, HALF_EVEN)
    fails_on = "9" * 28 + "." + "9" * 10
    with pytest.raises(TransformEvalError, match="NUMERIC_VALUE_OUT_OF_RANGE"):
        run("-d2", WIDE, [{"d2": D(fails_on)}])
    assert run("abs(d2)", WIDE, [{"d2": D(fails_on)}]) == [D(fails_on)]  # abs negates the negatives only
    assert run("-d5", WIDE, [{"d5": D(10**37 + 5)}]) == [D(-(10**37))]
    # a decimal of more than 18 digits goes to INT through a DOUBLE; a long-held one exactly
    assert run("CAST(d2 AS INT)", WIDE, [{"d2": D("123456789.9999999999")}]) == [123456790]
    assert run("CAST(d18 AS INT)", WIDE, [{"d18": D("1.99999999999999999")}]) == [1]
    with pytest.raises(TransformEvalError, match="UNSUPPORTED_VALUE"):  # held either way: not reproduced
        run("CAST(d18 * 1 AS INT)", WIDE, [{"d18": D("1.99999999999999999")}])
    with pytest.raises(TransformEvalError, match="CAST_OVERFLOW"):
        run("CAST(d2 AS INT)", WIDE, [{"d2": D("2147483647.9999999999")}])
    assert run("CAST(d4 AS INT)", WIDE, [{"d4": D("0.9999")}]) == [0] and run(
        "round(d4, -2)", WIDE, [{"d4": D("0.9999")}]
    ) == [D(0)]
    # the integer and boolean casts trim DEL too; DOUBLE and DECIMAL do not
    assert run("CAST(s AS INT)", WIDE, [{"s": "\x7f5\x7f"}]) == [5]
    with pytest.raises(TransformEvalError, match="CAST_INVALID_INPUT"):
        run("CAST(s AS DOUBLE)", WIDE, [{"s": "\x7f5"}])
    # Java 17 and Java 21 give different texts for some DOUBLEs from 2**53 to 2**63
    with pytest.raises(TransformEvalError, match="UNSUPPORTED_VALUE"):
        run("CAST(f AS DECIMAL(38,0))", WIDE, [{"f": 2.82879384806159e17}])
    assert run("CAST(f AS DECIMAL(38,0))", WIDE, [{"f": 1e17}]) == [D(10**17)]


# --- against a reference: Python's decimal with Spark's result types --------------------------


def reference(op: str, x: D, y: D, scale: int) -> D:
    with decimal.localcontext() as ctx:
        ctx.prec, ctx.rounding = 200, decimal.ROUND_DOWN
        exact = {"+": x + y, "-": x - y, "*": x * y, "/": x / y, "%": x % y}[op]  # % keeps the dividend's sign
        return exact.quantize(D(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "%"])
def test_decimal_operations_against_python_decimal(op: str) -> None:
    import random

    rng = random.Random(20240229 + ord(op))
    schema = pa.schema([("x", pa.decimal128(10, 2)), ("y", pa.decimal128(9, 4))])
    rows = []
    for _ in range(400):
        x = D(rng.randint(-(10**10) + 1, 10**10 - 1)).scaleb(-2)
        y = D(rng.choice([rng.randint(-(10**9) + 1, 10**9 - 1), rng.randint(-99, 99)]) or 7).scaleb(-4)
        rows.append({"x": x, "y": y})
    p = compile_projection(f"x {op} y AS z", schema, TABLE)
    scale = p.output_schema().field("z").type.scale
    got = p.evaluate(pa.RecordBatch.from_pylist(rows, schema=schema), database="", table="").column(0).to_pylist()
    assert got == [reference(op, r["x"], r["y"], scale) for r in rows]


def test_round_and_decimal_cast_of_doubles_follow_the_shortest_text() -> None:
    import random

    rng = random.Random(7)
    values = [rng.uniform(-1000, 1000) for _ in range(300)] + [
        rng.uniform(-1, 1) * 10 ** rng.randint(-20, 20) for _ in range(300)
    ]
    values += [0.125, 0.375, 2.675, 1.005, 1e15 + 0.5, 123456789012345.67, -0.0]
    rows = [{"f": v} for v in values]
    for digits in (0, 1, 2, 5):
        want = [float(D(repr(v)).quantize(D(1).scaleb(-digits), rounding=decimal.ROUND_HALF_UP)) for v in values]
        assert project(f"round(f, {digits})", rows) == want
    small = [v for v in values if abs(v) < 1e7]
    want = [D(repr(v)).quantize(D("0.001"), rounding=decimal.ROUND_HALF_UP) for v in small]
    assert project("CAST(f AS DECIMAL(12,3))", [{"f": v} for v in small]) == want
