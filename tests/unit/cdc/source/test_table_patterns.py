"""Table-list entries: one parser for every door (form, operators, pipeline files)."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.source.table_patterns import TablePattern, qualify


@pytest.mark.parametrize(
    "entry, canonical, matches, not_matches",
    [
        ("shop.orders", "shop.orders", ["shop.orders"], ["shopX.orders", "shop.orders2", "Shop.orders"]),
        ("orders", "shop.orders", ["shop.orders"], ["other.orders"]),
        (r"shop\.orders", r"shop\.orders", ["shop.orders"], ["shop.shop.orders", "shop.orders2"]),
        (r"shop\.order_.*", r"shop\.order_.*", ["shop.order_1", "shop.order_"], ["shop.orders", "x.order_1"]),
        ("`shop`.`orders`", "shop.orders", ["shop.orders"], []),
        ('"shop"."orders"', "shop.orders", ["shop.orders"], []),
        ("`my db`.`my table`", "my db.my table", ["my db.my table"], []),
        ("`a.b`.`t$1`", r"a\.b\.t\$1", ["a.b.t$1"], ["aXb.t$1"]),
        ("`odd``name`", "shop.odd`name", ["shop.odd`name"], []),
        ("  shop.orders  ", "shop.orders", ["shop.orders"], []),
        ("shop.bestellungen_ä", "shop.bestellungen_ä", ["shop.bestellungen_ä"], []),
        ("`shop`.`注文`", "shop.注文", ["shop.注文"], []),
        ("shop.`orders`", "shop.orders", ["shop.orders"], []),
    ],
)
def test_entries_mean_the_tables_a_user_expects(entry, canonical, matches, not_matches):
    got = qualify(entry, "shop")
    assert got == canonical
    p = TablePattern(got)
    for name in matches:
        assert p.matches(_tid(name)), (entry, name)
    for name in not_matches:
        assert not p.matches(_tid(name)), (entry, name)


def _tid(name: str) -> TableId:
    # test names whose database holds a dot are written 'a.b.t$1' with the table last
    if name.count(".") > 1:
        db, _, t = name.rpartition(".")
        return TableId(db, t)
    return TableId.parse(name)


@pytest.mark.parametrize(
    "entry, message",
    [
        ("(((", "not a valid regular expression"),
        ("`shop.orders", "never closed"),
        ("`a`.`b`.`c`", "is not `db`.`table`"),
        ("`a`x", "expected a dot"),
        ("", "empty entry"),
    ],
)
def test_bad_entries_fail_with_a_fix(entry, message):
    with pytest.raises(ConfigError, match=message) as e:
        qualify(entry, "shop")
    assert "Fix:" in str(e.value)


def test_a_regex_is_never_given_a_database():
    assert qualify(r"order_.*", "shop") == r"order_.*"
    with pytest.raises(ConfigError, match="has no database"):
        qualify("orders", None)
