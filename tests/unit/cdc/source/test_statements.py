"""Statement-logged data changes in QUERY events: recognised, attributed to captured tables."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.source.statements import (
    NOT_EXACT_MARKER,
    StatementGuard,
    StatementLoggedChangeError,
    is_data_change,
)

ORDERS = TableId("shop", "orders")


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE orders SET a = a + 1 WHERE id = 5",
        "/* app */ insert into shop.orders (id) values (1)",
        "DELETE o FROM shop.orders o JOIN x.y t ON o.id = t.id",
        "REPLACE INTO `orders` VALUES (1)",
        "LOAD DATA INFILE '/tmp/x' INTO TABLE orders",
        "UPDATE LOW_PRIORITY IGNORE `shop`.`Orders` SET note = 'x'",
        "WITH c AS (SELECT 1) UPDATE orders SET a = 1",
    ],
)
def test_data_changes_on_a_captured_table_stop_the_reader(sql):
    assert is_data_change(sql)
    with pytest.raises(StatementLoggedChangeError) as e:
        StatementGuard([ORDERS]).check(sql, "shop", "mysql-bin.000001:4711")
    text = str(e.value)
    assert "mysql-bin.000001:4711" in text and "shop.orders" in text and NOT_EXACT_MARKER in text
    assert "Fix: SET GLOBAL binlog_format = 'ROW'" in text


@pytest.mark.parametrize(
    "sql",
    [
        "ALTER TABLE orders ADD COLUMN x INT",
        "COMMIT",
        "XA START 'x'",
        "SAVEPOINT a",
        "ROLLBACK",
        "CREATE TABLE t2 (id INT)",
        "GRANT SELECT ON shop.* TO u",
        "FLUSH PRIVILEGES",
    ],
)
def test_ddl_and_transaction_control_are_not_data_changes(sql):
    assert not is_data_change(sql)
    StatementGuard([ORDERS]).check(sql, "shop", "f:4")


def test_changes_of_other_tables_pass_and_a_literal_is_not_a_name():
    guard = StatementGuard([ORDERS])
    guard.check("UPDATE items SET note = 'orders' WHERE id = 1", "shop", "f:4")
    guard.check("INSERT INTO logs VALUES ('orders')", "shop", "f:4")
    with pytest.raises(StatementLoggedChangeError):
        StatementGuard(None).check("UPDATE anything SET a = 1", "db", "f:4")  # every table captured


def test_the_statement_is_shortened_in_the_message():
    sql = "UPDATE orders SET note = '" + "x" * 500 + "'"
    with pytest.raises(StatementLoggedChangeError) as e:
        StatementGuard([ORDERS]).check(sql, "shop", "f:4")
    assert len(str(e.value)) < 900 and "..." in str(e.value)
