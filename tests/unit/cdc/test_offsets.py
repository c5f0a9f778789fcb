"""Binlog offsets order by (file index, position, row), never as strings, and serialize stably."""

import json

import pytest

from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset, split_binlog_file


def test_file_index_beats_string_order():
    assert BinlogOffset("mysql-bin.000010", 4) > BinlogOffset("mysql-bin.000009", 999_999)
    # One more digit: as strings "mysql-bin.1000000" < "mysql-bin.999999".
    assert BinlogOffset("mysql-bin.1000000", 4) > BinlogOffset("mysql-bin.999999", 4)
    assert "mysql-bin.1000000" < "mysql-bin.999999"


def test_position_is_numeric():
    assert BinlogOffset("mysql-bin.000001", 1000) > BinlogOffset("mysql-bin.000001", 999)
    assert "mysql-bin.000001.1000" < "mysql-bin.000001.999"


def test_row_orders_inside_one_event_and_gtid_does_not_take_part():
    a = BinlogOffset("mysql-bin.000001", 500, row=0)
    b = BinlogOffset("mysql-bin.000001", 500, row=3)
    assert a < b
    assert BinlogOffset("mysql-bin.000001", 500, gtid="0-1-5") == BinlogOffset("mysql-bin.000001", 500)


def test_sorting_a_mixed_list():
    offs = [
        BinlogOffset("mysql-bin.000010", 4),
        BinlogOffset("mysql-bin.000002", 900),
        BinlogOffset("mysql-bin.000009", 120),
        BinlogOffset("mysql-bin.000002", 1200),
    ]
    assert [str(o) for o in sorted(offs)] == [
        "mysql-bin.000002:900",
        "mysql-bin.000002:1200",
        "mysql-bin.000009:120",
        "mysql-bin.000010:4",
    ]
    assert min(offs) == BinlogOffset("mysql-bin.000002", 900)
    assert max(offs) == BinlogOffset("mysql-bin.000010", 4)


def test_json_round_trip_with_stable_key_order():
    o = BinlogOffset("mysql-bin.000123", 4567, gtid="0-1-100", row=2)
    text = o.to_json()
    assert text == '{"file":"mysql-bin.000123","gtid":"0-1-100","position":4567,"row":2}'
    back = BinlogOffset.from_json(text)
    assert (back.file, back.position, back.gtid, back.row) == (o.file, o.position, o.gtid, o.row)
    # Equal offsets serialize identically (Spark compares serialized offsets as text).
    assert BinlogOffset.from_dict(json.loads(text)).to_json() == text
    assert BinlogOffset("mysql-bin.000001", 4).to_json() == '{"file":"mysql-bin.000001","position":4}'


def test_bad_offsets():
    with pytest.raises(ValueError):
        BinlogOffset("mysql-bin", 4)
    with pytest.raises(ValueError):
        BinlogOffset("mysql-bin.000001", -1)
    assert split_binlog_file("my.host-bin.000123") == ("my.host-bin", 123)
