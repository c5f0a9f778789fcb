"""KeyOrder for the types Python compares on its own (no server)."""

import datetime as dt
import decimal
import pickle

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import Column
from airflow_provider_mysqlcdc.cdc.snapshot.keyorder import KeyOrder, PadKey


def col(name, data_type, charset=None, collation=None, length=None, nullable=False):
    return Column(name, 1, data_type, data_type, nullable, charset, collation, length)


def test_numbers_mix_int_decimal_float():
    ko = KeyOrder([col("k", "decimal")])
    assert ko.sort_key((1,)) == ko.sort_key((decimal.Decimal("1.0"),))
    assert ko.sort_key((decimal.Decimal("1.5"),)) < ko.sort_key((2,)) < ko.sort_key((2.5,))
    assert ko.sort_key((2**64 - 1,)) > ko.sort_key((decimal.Decimal(2**64 - 2),))


def test_null_sorts_first():
    ko = KeyOrder([col("k", "int", nullable=True)])
    assert ko.sort_key((None,)) < ko.sort_key((-(2**63),))


def test_datetimes_naive_aware_and_dates():
    ko = KeyOrder([col("k", "datetime")])
    naive = dt.datetime(2024, 1, 1, 12)
    aware = dt.datetime(2024, 1, 1, 14, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert ko.sort_key((naive,)) == ko.sort_key((aware,))
    assert ko.sort_key((dt.date(2024, 1, 1),)) < ko.sort_key((naive,))
    assert KeyOrder([col("t", "time")]).sort_key((dt.time(1),)) == (((1, dt.timedelta(hours=1))),)


def test_binary_pads_with_zero_bytes_and_compares_bytewise():
    ko = KeyOrder([col("k", "binary", "binary", "binary", length=4)])
    assert ko.sort_key((b"ab",)) == ko.sort_key((b"ab\x00\x00",))
    vb = KeyOrder([col("k", "varbinary", "binary", "binary", length=4)])
    assert vb.sort_key((b"a",)) < vb.sort_key((b"a\x00",)) < vb.sort_key((b"a ",)) < vb.sort_key((b"\xff",))


def test_utf8mb4_bin_is_code_point_order_with_pad_space():
    ko = KeyOrder([col("k", "varchar", "utf8mb4", "utf8mb4_bin")])
    k = lambda s: ko.sort_key((s,))  # noqa: E731
    assert k("a") == k("a  ")
    assert k("a\t") < k("a") < k("ab")
    assert k("A") < k("a") < k("é") < k("😀")
    assert not ko.needs_server


def test_nopad_bin_counts_trailing_spaces():
    ko = KeyOrder([col("k", "varchar", "utf8mb4", "utf8mb4_nopad_bin")])
    assert ko.sort_key(("a",)) < ko.sort_key(("a ",)) and ko.sort_key(("a\t",)) > ko.sort_key(("a",))


def test_padkey():
    sp = b"\x00\x20"
    a, a_sp, a_tab, ab = (PadKey(w, sp) for w in (b"\x00A", b"\x00A\x00\x20", b"\x00A\x00\x09", b"\x00A\x00B"))
    assert a == a_sp and hash(a) == hash(a_sp)
    assert a_tab < a < ab and sorted([ab, a, a_tab]) == [a_tab, a, ab]
    assert pickle.loads(pickle.dumps(a)) == a


def test_contains_and_locate_composite():
    ko = KeyOrder([col("a", "int"), col("b", "varchar", "utf8mb4", "utf8mb4_bin")])
    assert ko.contains((1, "b"), (2, "a"), False, (1, "c"))
    assert ko.contains((1, "b"), (2, "a"), False, (1, "b "))  # PAD SPACE: equal to the start
    assert not ko.contains((1, "b"), (2, "a"), False, (2, "a"))
    assert not ko.contains((1, "b"), (2, "a"), False, (1, "a\t"))
    assert ko.contains(None, None, False, (5, "x"))
    bounds = [(1, "m"), (2, "a"), (3, "")]
    assert [ko.locate(bounds, k) for k in [(0, "z"), (1, "m"), (1, "z"), (2, "a"), (3, ""), (9, "")]] == [
        0,
        1,
        1,
        2,
        3,
        3,
    ]


def test_null_keys_only_in_the_null_chunk():
    ko = KeyOrder([col("k", "int", nullable=True)])
    assert ko.contains(None, (5,), True, (None,))
    assert not ko.contains(None, (5,), False, (None,))
    assert not ko.contains((5,), None, False, (None,))
    assert ko.locate([(5,)], (None,)) == 0


def test_picklable_and_server_collations_need_a_source():
    ko = KeyOrder([col("k", "varchar", "utf8mb4", "utf8mb4_general_ci")])
    ko2 = pickle.loads(pickle.dumps(ko))
    assert ko2.needs_server
    with pytest.raises(ConfigError, match="key_order_for"):
        ko2.sort_key(("a",))
