"""GTID sets of both flavors: parse what servers print, compare and merge them by value."""

import json

import pytest

from airflow_provider_mysqlcdc.cdc.source.gtid import (
    MariadbGtidSet,
    MysqlGtidSet,
    canonical_gtid,
    parse_gtid_set,
)

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "4c2d1a00-0000-11e1-9e33-c80aa9429562"


class TestMysql:
    def test_parse_and_canonical_text(self):
        s = parse_gtid_set(f"{U1}:1-5:7-9,{U2}:1-3", "mysql")
        assert isinstance(s, MysqlGtidSet)
        assert str(s) == f"{U1}:1-5:7-9,{U2}:1-3"

    def test_whitespace_newlines_case_and_order_do_not_matter(self):
        printed = f"{U2.upper()}:1-3,\n{U1}:7-9:1-5"
        assert str(parse_gtid_set(printed, "mysql")) == f"{U1}:1-5:7-9,{U2}:1-3"
        assert parse_gtid_set(printed, "mysql") == parse_gtid_set(f"{U1}:1-5:7-9,{U2}:1-3", "mysql")
        assert hash(parse_gtid_set(printed, "mysql")) == hash(parse_gtid_set(f"{U1}:1-5:7-9,{U2}:1-3", "mysql"))

    def test_adjacent_and_overlapping_intervals_merge(self):
        assert str(MysqlGtidSet.parse(f"{U1}:1-5:6-9:8-12:20")) == f"{U1}:1-12:20"

    def test_single_transaction_prints_without_range(self):
        assert str(MysqlGtidSet.parse(f"{U1}:7")) == f"{U1}:7"

    def test_empty(self):
        assert MysqlGtidSet.parse("").is_empty
        assert str(MysqlGtidSet.parse(None)) == ""
        assert canonical_gtid("", "mysql") is None
        assert canonical_gtid("  \n", "mysql") is None

    def test_union_and_add(self):
        a = MysqlGtidSet.parse(f"{U1}:1-5")
        b = MysqlGtidSet.parse(f"{U1}:7-9,{U2}:1-3")
        assert str(a.union(b)) == f"{U1}:1-5:7-9,{U2}:1-3"
        assert str(a.add(f"{U1}:6")) == f"{U1}:1-6"
        assert str(a.add(f"{U2}:1")) == f"{U1}:1-5,{U2}:1"
        assert str(a) == f"{U1}:1-5"  # values are immutable
        with pytest.raises(ValueError):
            a.add(f"{U1}:6-7")

    def test_contains_is_superset(self):
        big = MysqlGtidSet.parse(f"{U1}:1-9,{U2}:1-3")
        assert big.contains(MysqlGtidSet.parse(f"{U1}:2-4:6"))
        assert big.contains(big)
        assert big.contains(MysqlGtidSet.parse(""))
        assert not big.contains(MysqlGtidSet.parse(f"{U1}:9-10"))
        assert not big.contains(MysqlGtidSet.parse(f"{U1}:1-9,{U2}:1-3,{U1}:11"))
        assert not MysqlGtidSet.parse(f"{U1}:1-5:7-9").contains(MysqlGtidSet.parse(f"{U1}:5-7"))
        assert not MysqlGtidSet.parse(f"{U1}:1-9").contains(MysqlGtidSet.parse(f"{U2}:1"))

    def test_mysql_84_tags(self):
        s = MysqlGtidSet.parse(f"{U1}:mytag:1-2, {U1}:1-5:6")
        assert str(s) == f"{U1}:1-6:mytag:1-2"
        assert s.contains(MysqlGtidSet.parse(f"{U1}:mytag:2"))
        assert not s.contains(MysqlGtidSet.parse(f"{U1}:other:1"))

    @pytest.mark.parametrize("bad", [f"{U1}", f"{U1}:0", f"{U1}:5-3", "nope:1-2", f"{U1}:1-x"])
    def test_bad_text(self, bad):
        with pytest.raises(ValueError):
            MysqlGtidSet.parse(bad)


class TestMariadb:
    def test_parse_and_canonical_text(self):
        s = parse_gtid_set("1-2-5, 0-1-100\n", "mariadb")
        assert isinstance(s, MariadbGtidSet)
        assert str(s) == "0-1-100,1-2-5"

    def test_highest_sequence_per_domain_wins(self):
        # gtid_binlog_state lists one entry per (domain, server): the domain is at its max seq.
        assert str(MariadbGtidSet.parse("0-1-100,0-2-120,0-3-90")) == "0-2-120"

    def test_union_and_add(self):
        a = MariadbGtidSet.parse("0-1-100")
        assert str(a.union(MariadbGtidSet.parse("0-1-90,1-2-5"))) == "0-1-100,1-2-5"
        assert str(a.add("0-1-101")) == "0-1-101"
        assert str(a.add("2-7-1")) == "0-1-100,2-7-1"
        with pytest.raises(ValueError):
            a.add("0-1-1,1-1-1")

    def test_contains_compares_sequence_per_domain(self):
        pos = MariadbGtidSet.parse("0-1-100,1-2-5")
        assert pos.contains(MariadbGtidSet.parse("0-1-100"))
        assert pos.contains(MariadbGtidSet.parse("0-3-50,1-2-5"))
        assert not pos.contains(MariadbGtidSet.parse("0-1-101"))
        assert not pos.contains(MariadbGtidSet.parse("2-1-1"))
        assert not MariadbGtidSet.parse("0-1-100").contains(pos)

    def test_equality(self):
        assert MariadbGtidSet.parse("1-2-5,0-1-100") == MariadbGtidSet.parse("0-1-100,1-2-5")
        assert MariadbGtidSet.parse("0-1-100") != MariadbGtidSet.parse("0-1-101")

    @pytest.mark.parametrize("bad", ["0-1", "a-b-c", "0-1-2-3", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1"])
    def test_bad_text(self, bad):
        with pytest.raises(ValueError):
            MariadbGtidSet.parse(bad)


def test_flavors_do_not_mix():
    with pytest.raises(TypeError):
        MysqlGtidSet.parse(f"{U1}:1").contains(MariadbGtidSet.parse("0-1-1"))
    with pytest.raises(ValueError):
        parse_gtid_set("0-1-1", "postgres")


def test_json_safe_round_trip():
    for text, flavor in ((f"{U2}:1-3,{U1}:1-5", "mysql"), ("1-2-5,0-1-100", "mariadb")):
        s = parse_gtid_set(text, flavor)
        back = parse_gtid_set(json.loads(json.dumps(s.to_json())), flavor)
        assert back == s and str(back) == str(s)


def test_canonical_gtid_guesses_flavor():
    assert canonical_gtid(f"{U2}:1-3,\n{U1}:1-5") == f"{U1}:1-5,{U2}:1-3"
    assert canonical_gtid("1-2-5,0-1-100") == "0-1-100,1-2-5"
