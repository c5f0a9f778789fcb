"""Table names in state files read back as the same table, whatever dots and backticks they hold;
and the table-list hint for a regex that names no database."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.chunks import Chunk, KeyRange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.source.discovery import _has_separator_dot


@pytest.mark.parametrize(
    "t",
    [
        TableId("shop", "orders"),
        TableId("shop.eu", "orders"),
        TableId("shop", "my.table"),
        TableId("a`b.c", "x.y"),
        TableId("`x", "y"),
        TableId("dé", "tä ble"),
    ],
)
def test_a_table_name_survives_state_files(t):
    assert TableId.parse(t.text) == t
    assert Chunk.from_dict(Chunk(t, 0, None, (5,)).to_dict()).table_id == t
    assert KeyRange.from_dict(KeyRange(t, (1,), None).to_dict()).table_id == t


def test_plain_names_keep_their_plain_form():
    assert TableId("shop", "my.table").text == "shop.my.table"  # split at the first dot: right
    assert TableId("shop.eu", "orders").text == "`shop.eu`.`orders`"


@pytest.mark.parametrize(
    "regex,separated",
    [
        ("order_.*", False),
        ("order_[0-9]+", False),
        ("shop.*", False),
        ("a.{2}b", False),
        ("shop\\.order_.*", True),
        ("shop.orders_\\d+", True),
        ("[.]x", True),
    ],
)
def test_a_regex_spells_the_database_separator_or_not(regex, separated):
    assert _has_separator_dot(regex) is separated
