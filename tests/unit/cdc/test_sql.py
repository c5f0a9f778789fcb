"""Boundary literals and key-range predicates render safely and in index-friendly form."""

import datetime as dt
import decimal

import pytest

from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.sql import key_compare, range_predicate, sql_literal


def col(name="k", data_type="int", column_type=None, charset=None, collation=None, nullable=False):
    return Column(name, 1, data_type, column_type or data_type, nullable, charset, collation)


UTF8 = col("s", "varchar", "varchar(20)", "utf8mb4", "utf8mb4_general_ci")
LATIN1 = col("s", "varchar", "varchar(20)", "latin1", "latin1_swedish_ci")


def test_numbers_are_exact():
    assert sql_literal(42, col()) == "42"
    assert sql_literal(-9223372036854775808, col()) == "-9223372036854775808"
    assert sql_literal(18446744073709551615, col()) == "18446744073709551615"
    assert sql_literal(decimal.Decimal("1.10"), col(data_type="decimal")) == "1.10"
    assert sql_literal(decimal.Decimal("1E+30"), col(data_type="decimal")) == "1000000000000000000000000000000"
    assert sql_literal(0.1, col(data_type="double")) == "0.1"
    assert float(sql_literal(1 / 3, col(data_type="double"))) == 1 / 3
    assert sql_literal(True, col()) == "1"
    assert sql_literal(None, col()) == "NULL"
    assert sql_literal(b"\x05", col(data_type="bit")) == "5"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), decimal.Decimal("NaN")])
def test_non_finite_numbers_are_refused(bad):
    with pytest.raises(ValueError):
        sql_literal(bad, col(data_type="double"))


def test_strings_are_hex_in_the_column_charset():
    assert sql_literal("a'b\\", UTF8) == "_utf8mb4 X'6127625C'"
    assert sql_literal("é", UTF8) == "_utf8mb4 X'C3A9'"
    assert sql_literal("é", LATIN1) == "_latin1 X'E9'"
    assert sql_literal("€", LATIN1) == "_latin1 X'80'"  # MySQL latin1 is cp1252
    assert sql_literal("", UTF8) == "_utf8mb4 X''"


def test_unencodable_text_falls_back_to_a_server_conversion_with_the_column_collation():
    lit = sql_literal("😀", LATIN1)
    assert lit == "CONVERT(_utf8mb4 X'F09F9880' USING latin1) COLLATE latin1_swedish_ci"


def test_bytes_and_temporal_literals():
    assert sql_literal(b"\x00\xff", col(data_type="varbinary")) == "X'00FF'"
    assert sql_literal(dt.date(2024, 2, 29), col(data_type="date")) == "DATE'2024-02-29'"
    assert (
        sql_literal(dt.datetime(2024, 1, 1, 12, 0, 0, 5), col(data_type="datetime"))
        == "TIMESTAMP'2024-01-01 12:00:00.000005'"
    )
    aware = dt.datetime(2024, 1, 1, 14, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert sql_literal(aware, col(data_type="timestamp")) == "TIMESTAMP'2024-01-01 12:00:00.000000'"
    assert sql_literal(dt.timedelta(hours=-1, seconds=-1), col(data_type="time")) == "TIME'-01:00:01.000000'"
    assert (
        sql_literal(dt.timedelta(hours=838, minutes=59, seconds=59), col(data_type="time")) == "TIME'838:59:59.000000'"
    )


def test_single_column_range():
    c = [col("id")]
    assert range_predicate(c, (10,), (20,), False) == "(`id` >= 10) AND (`id` < 20)"
    assert range_predicate(c, None, (20,), False) == "(`id` < 20)"
    assert range_predicate(c, (10,), None, False) == "(`id` >= 10)"
    assert range_predicate(c, None, None, False) == "1=1"
    assert range_predicate(c, None, (20,), True) == "(((`id` < 20)) OR `id` IS NULL)"


def test_composite_range_is_expanded_row_value_order():
    cols = [col("a"), col("b"), col("c")]
    assert (
        key_compare(cols, (1, 2, 3), ">=") == "`a` > 1 OR (`a` = 1 AND `b` > 2) OR (`a` = 1 AND `b` = 2 AND `c` >= 3)"
    )
    assert (
        range_predicate(cols[:2], (1, 2), (3, 4))
        == "(`a` > 1 OR (`a` = 1 AND `b` >= 2)) AND (`a` < 3 OR (`a` = 3 AND `b` < 4))"
    )


def test_schema_and_column_sql_aliases():
    schema = TableSchema(TableId("d", "t"), (col("a"), col("b")), ("a", "b"), ("a", "b"), ("a", "b"))
    p = range_predicate(schema, (1, 2), None, column_sql={"a": "`__ck0`", "b": "`__ck1`"})
    assert p == "(`__ck0` > 1 OR (`__ck0` = 1 AND `__ck1` >= 2))"


def test_key_arity_is_checked():
    with pytest.raises(ValueError):
        range_predicate([col("a"), col("b")], (1,), None)
    with pytest.raises(ValueError):
        key_compare([col("a")], (1,), "!=")
