"""The key-type matrix: one table per type MySQL accepts in a PRIMARY KEY, at the type's extremes.

Each table is ``(<key columns>, v VARCHAR(20), n INT)`` with twelve keys ``K[0..11]`` laid out so
that the extremes and boundary values are the ones the workload moves and deletes. The workload
runs in three rounds, each a set of single-statement or small transactions:

* ``initial``: K0..K7 inserted before anything is planned;
* ``window``: inside a snapshot batch's window (after its SELECTs, before its high watermark):
  update a value (K0), move a key (K1 -> K8), delete (K2), delete and insert again in one
  transaction (K3), insert (K9);
* ``stream``: while the stream runs: the same kinds on K4..K7, K10, K11, and again on keys the
  window touched (K8 updated, K9 deleted, K0 moved onto K2, a key deleted earlier);
* ``late``: after a batch was read again while streaming: K2 updated, K10 deleted, K6 back, K3
  moved onto K9 (inserted in the window, deleted in the stream), K4 deleted and inserted again.

For string keys under case- or accent-insensitive and PAD SPACE collations the moves change only
case, accents or trailing spaces (K1 -> K8 is 'abc' -> 'ABC'), which the server treats as the same
key and every sink must still show with the new spelling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

# The order the workload's keys are given extremes in: the moved and deleted positions first.
_EXTREME_SLOTS = (1, 8, 2, 5, 10, 6, 9, 11, 3, 7, 0, 4)


@dataclass(frozen=True)
class KeyType:
    """One table of the matrix: its key columns' DDL and the twelve keys as SQL literals
    (a tuple of literals per key for a composite key)."""

    name: str
    columns: tuple[tuple[str, str], ...]  # (column name, type DDL)
    keys: tuple[tuple[str, ...], ...]

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.columns)

    def ddl(self) -> str:
        cols = ", ".join(f"`{c}` {t} NOT NULL" for c, t in self.columns)
        pk = ", ".join(f"`{c}`" for c in self.key_names)
        return f"CREATE TABLE `{self.name}` ({cols}, v VARCHAR(20), n INT, PRIMARY KEY ({pk})) ENGINE=InnoDB"


def _arranged(extremes: Sequence[str], fillers: Sequence[str]) -> tuple[str, ...]:
    keys: list[str | None] = [None] * 12
    for slot, value in zip(_EXTREME_SLOTS, extremes):
        keys[slot] = value
    rest = iter(fillers)
    out = tuple(k if k is not None else next(rest) for k in keys)
    assert len(set(out)) == 12, out
    return out


def _single(name: str, ddl: str, extremes: Sequence[str], fillers: Sequence[str]) -> KeyType:
    return KeyType(name, (("k", ddl),), tuple((k,) for k in _arranged(extremes, fillers)))


def _ints(lo: int, hi: int, more: Sequence[int]) -> tuple[list[str], list[str]]:
    ext = [lo, hi, *more]
    fill = [v for v in range(1, 40) if v not in ext][: 12 - len(ext)]
    return [str(v) for v in ext], [str(v) for v in fill]


def _s(*values: str) -> list[str]:
    return ["'" + v.replace("\\", "\\\\").replace("'", "''") + "'" for v in values]


S63, S64 = 2**63, 2**64
KEY_TYPES: tuple[KeyType, ...] = (
    _single("k_tinyint", "TINYINT", *_ints(-128, 127, [-1, 0, 126, -127])),
    _single("k_tinyint_u", "TINYINT UNSIGNED", *_ints(0, 255, [254, 128, 127])),
    _single("k_smallint", "SMALLINT", *_ints(-32768, 32767, [-1, 0, -32767])),
    _single("k_smallint_u", "SMALLINT UNSIGNED", *_ints(0, 65535, [32768, 32767, 65534])),
    _single("k_mediumint", "MEDIUMINT", *_ints(-8388608, 8388607, [-1, 0])),
    _single("k_mediumint_u", "MEDIUMINT UNSIGNED", *_ints(0, 16777215, [8388608, 8388607])),
    _single("k_int", "INT", *_ints(-(2**31), 2**31 - 1, [-1, 0, -(2**31) + 1])),
    _single("k_int_u", "INT UNSIGNED", *_ints(0, 2**32 - 1, [2**31, 2**31 - 1, 2**32 - 2])),
    _single("k_bigint", "BIGINT", *_ints(-S63, S63 - 1, [-1, 0, -S63 + 1, S63 - 2])),
    _single("k_bigint_u", "BIGINT UNSIGNED", *_ints(0, S64 - 1, [S63, S63 - 1, S64 - 2, S63 + 1, S64 - 3])),
    _single("k_dec10_0", "DECIMAL(10,0)", *_ints(-9999999999, 9999999999, [-1, 0, -9999999998])),
    _single(
        "k_dec12_3",
        "DECIMAL(12,3)",
        ["-999999999.999", "999999999.999", "-0.001", "0.000", "0.001", "-1.500"],
        ["1.000", "2.250", "-2.250", "3.125", "-3.125", "4.500"],
    ),
    _single("k_dec20_0", "DECIMAL(20,0)", *_ints(-(10**20 - 1), 10**20 - 1, [S63, -S63 - 1, 0, S64, S63 - 1])),
    _single(
        "k_dec38_10",
        "DECIMAL(38,10)",
        [
            "-9999999999999999999999999999.9999999999",
            "9999999999999999999999999999.9999999999",
            "0.0000000001",
            "-0.0000000001",
            "0.0000000000",
            "12345678901234.5678901234",
        ],
        ["1.5000000000", "-1.5000000000", "2.0000000000", "3.0000000000", "-4.0000000000", "5.0000000000"],
    ),
    _single(
        "k_dec65_30",
        "DECIMAL(65,30)",
        [
            "-" + "9" * 35 + "." + "9" * 30,
            "9" * 35 + "." + "9" * 30,
            "0." + "0" * 29 + "1",
            "-0." + "0" * 29 + "1",
            "0",
            "1.5",
        ],
        ["2", "-2", "3.25", "-3.25", "4", "5"],
    ),
    # binary collation, PAD SPACE: 'a' = 'a '; case and accents differ
    _single(
        "k_varchar_bin",
        "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        _s("", "A", "a", "\u00e9", "e", "\U0001f600", "Z", "\u00ff"),
        _s("k1", "k2", "k3", "k4"),
    ),
    # NO PAD: trailing spaces are distinct keys
    _single(
        "k_varchar_nopad",
        "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin",
        _s("", " ", "a", "a ", "a  ", "A", " a"),
        _s("k1", "k2", "k3", "k4", "k5"),
    ),
    _single(
        "k_char_bin",
        "CHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        _s("", "a", "A", " a", "a b", "\u00e9"),
        _s("k1", "k2", "k3", "k4", "k5", "k6"),
    ),
    # case-insensitive, PAD SPACE: K1 -> K8 and K5 -> K10 change only case / trailing spaces
    KeyType(
        "k_varchar_ci",
        (("k", "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"),),
        tuple((v,) for v in _s("m0", "abc", "", "zZ", "k4", "Mixed", "b", "C", "ABC", "y", "mIXED ", "\u00c5")),
    ),
    # accent-insensitive: K1 -> K8 and K5 -> K10 change only accents / case
    KeyType(
        "k_varchar_ai",
        (("k", "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"),),
        tuple(
            (v,)
            for v in _s("m0", "resume", "a", "zz", "k4", "e", "b", "c", "R\u00e9sum\u00e9", "y", "\u00c9", "\u00df")
        ),
    ),
    _single(
        "k_binary4",
        "BINARY(4)",
        [
            "x'00000000'",
            "x'FFFFFFFF'",
            "x'000000FF'",
            "x'FF000000'",
            "x'7FFFFFFF'",
            "x'80000000'",
            "x'0000FFFF'",
            "x'FFFF0000'",
        ],
        ["x'01000000'", "x'02000000'", "x'00000003'", "x'00000004'"],
    ),
    _single(
        "k_varbinary",
        "VARBINARY(8)",
        ["x''", "x'FFFFFFFFFFFFFFFF'", "x'00'", "x'0000'", "x'FF'", "x'00FF'", "x'FF00'"],
        ["x'01'", "x'02'", "x'03'", "x'04'", "x'05'"],
    ),
    _single(
        "k_date",
        "DATE",
        _s("1000-01-01", "9999-12-31", "1970-01-01", "1969-12-31", "2000-02-29", "2038-01-19"),
        _s("2001-01-01", "2002-01-01", "2003-01-01", "2004-01-01", "2005-01-01", "2006-01-01"),
    ),
    _single(
        "k_datetime6",
        "DATETIME(6)",
        _s(
            "1000-01-01 00:00:00.000000",
            "9999-12-31 23:59:59.999999",
            "1970-01-01 00:00:00.000000",
            "2026-03-08 02:30:00.000001",
            "1969-12-31 23:59:59.999999",
            "2000-01-01 00:00:00.000001",
        ),
        _s(*(f"2001-01-0{i} 00:00:00.5" for i in range(1, 7))),
    ),
    _single(
        "k_timestamp6",
        "TIMESTAMP(6)",
        _s(
            "1970-01-01 00:00:01.000000",
            "2038-01-19 03:14:07.999999",
            "2000-01-01 00:00:00.000001",
            "2026-11-01 05:30:00.500000",
            "1970-01-01 00:00:01.000001",
            "2038-01-19 03:14:07.999998",
        ),
        _s(*(f"2001-01-0{i} 00:00:00.25" for i in range(1, 7))),
    ),
    _single(
        "k_time6",
        "TIME(6)",
        _s(
            "-838:59:59.999999",
            "838:59:59.999999",
            "00:00:00.000000",
            "-00:00:00.000001",
            "00:00:00.000001",
            "-12:00:00.000001",
        ),
        _s("01:00:00", "02:00:00", "03:00:00", "-01:00:00", "-02:00:00", "04:00:00"),
    ),
    _single(
        "k_year",
        "YEAR",
        ["1901", "2155", "0", "2000", "1902", "2154"],
        ["2001", "2002", "2003", "2004", "2005", "2006"],
    ),
    # members out of alphabetical order: the server orders an ENUM by member index
    _single(
        "k_enum",
        "ENUM('m','b','z','a','y','c','x','d','w','e','v','f','u')",
        _s("m", "u", "a", "z", "b", "f"),
        _s("y", "c", "x", "d", "w", "e"),
    ),
    _single(
        "k_bit8",
        "BIT(8)",
        ["b'0'", "b'11111111'", "b'10000000'", "b'01111111'", "b'1'", "b'11111110'"],
        ["b'10'", "b'11'", "b'100'", "b'101'", "b'110'", "b'111'"],
    ),
    _single("k_bit64", "BIT(64)", *_ints(0, S64 - 1, [S63, S63 - 1, S64 - 2])),
    KeyType(
        "k_int_ci",
        (("a", "INT"), ("b", "VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")),
        (
            ("1", "'x'"),
            ("-2147483648", "'abc'"),
            ("1", "'y'"),
            ("2147483647", "''"),
            ("0", "'q'"),
            ("2", "'Mixed'"),
            ("0", "'Q2'"),
            ("3", "'r'"),
            ("-2147483648", "'ABC'"),
            ("1", "'z'"),
            ("2", "'MIXED'"),
            ("-1", "'s'"),
        ),
    ),
    KeyType(
        "k_u64_dt6",
        (("a", "BIGINT UNSIGNED"), ("b", "DATETIME(6)")),
        tuple(
            (a, f"'{b}'")
            for a, b in (
                ("1", "2001-01-01 00:00:00"),
                (str(S64 - 1), "9999-12-31 23:59:59.999999"),
                (str(S63), "1000-01-01 00:00:00"),
                (str(S63), "1000-01-01 00:00:00.000001"),
                ("2", "2001-01-01"),
                (str(S63 - 1), "2001-01-01 00:00:00"),
                (str(S64 - 1), "1000-01-01 00:00:00"),
                ("3", "2001-01-01"),
                (str(S64 - 1), "9999-12-31 23:59:59.999998"),
                ("4", "2001-01-01"),
                (str(S63 + 1), "2001-01-01 00:00:00"),
                ("0", "1000-01-01 00:00:00"),
            )
        ),
    ),
    KeyType(
        "k_bin_dec_enum",
        (("a", "BINARY(2)"), ("b", "DECIMAL(20,0)"), ("c", "ENUM('z','a')")),
        tuple(
            (a, b, f"'{c}'")
            for a, b, c in (
                ("x'0000'", "0", "z"),
                ("x'FFFF'", str(10**20 - 1), "a"),
                ("x'0000'", "0", "a"),
                ("x'00FF'", str(-(10**20 - 1)), "z"),
                ("x'0101'", "1", "z"),
                ("x'FF00'", str(S64), "a"),
                ("x'FFFF'", str(10**20 - 1), "z"),
                ("x'0202'", "2", "z"),
                ("x'FFFF'", str(10**20 - 2), "a"),
                ("x'0303'", "3", "a"),
                ("x'FF00'", str(S64), "z"),
                ("x'0404'", "4", "z"),
            )
        ),
    ),
)


# --- the workload ------------------------------------------------------------------------------


def _where(kt: KeyType, key: tuple[str, ...]) -> str:
    return " AND ".join(f"`{c}` = {v}" for c, v in zip(kt.key_names, key))


def _insert(kt: KeyType, i: int, tag: str) -> str:
    cols = ", ".join(f"`{c}`" for c in kt.key_names)
    return f"INSERT INTO `{kt.name}` ({cols}, v, n) VALUES ({', '.join(kt.keys[i])}, '{tag}{i}', {i})"


def _update(kt: KeyType, i: int, tag: str) -> str:
    return f"UPDATE `{kt.name}` SET v = '{tag}{i}', n = n + 100 WHERE {_where(kt, kt.keys[i])}"


def _move(kt: KeyType, i: int, j: int, tag: str) -> str:
    sets = ", ".join(f"`{c}` = {v}" for c, v in zip(kt.key_names, kt.keys[j]))
    return f"UPDATE `{kt.name}` SET {sets}, v = '{tag}{i}>{j}' WHERE {_where(kt, kt.keys[i])}"


def _delete(kt: KeyType, i: int) -> str:
    return f"DELETE FROM `{kt.name}` WHERE {_where(kt, kt.keys[i])}"


def _again(kt: KeyType, i: int, tag: str) -> list[str]:
    """Delete a key and insert it again with new values, in one transaction."""
    return ["START TRANSACTION", _delete(kt, i), _insert(kt, i, tag), "COMMIT"]


def initial(kt: KeyType) -> list[str]:
    return [kt.ddl(), *(_insert(kt, i, "i") for i in range(8))]


def window(kt: KeyType) -> list[str]:
    return [_update(kt, 0, "w"), _move(kt, 1, 8, "w"), _delete(kt, 2), *_again(kt, 3, "w"), _insert(kt, 9, "w")]


def stream(kt: KeyType) -> list[str]:
    return [
        _update(kt, 4, "s"),
        _move(kt, 5, 10, "s"),
        _delete(kt, 6),
        *_again(kt, 7, "s"),
        _insert(kt, 11, "s"),
        _update(kt, 8, "s"),
        _delete(kt, 9),
        _move(kt, 0, 2, "s"),
    ]


def late(kt: KeyType) -> list[list[str]]:
    """The late round as steps, each its own micro-batch when the caller waits for the stream between
    them: a MERGE whose changes are all one key's prunes the sink's files by that key alone, which is
    where wrong file statistics lose a change."""
    return [
        [_update(kt, 2, "l"), _delete(kt, 10)],  # K2 and K10 are extremes: a MERGE of them alone
        [_insert(kt, 6, "l"), _move(kt, 3, 9, "l"), *_again(kt, 4, "l")],
    ]


def final_keys(kt: KeyType, rounds: Sequence[str]) -> set[int]:
    """The key indexes present after the given rounds (what the source must hold: a check that each
    statement matched the row it was written for)."""
    present = set(range(8))
    steps = {
        "window": [("u", 0), ("m", 1, 8), ("d", 2), ("u", 3), ("i", 9)],
        "stream": [("u", 4), ("m", 5, 10), ("d", 6), ("u", 7), ("i", 11), ("u", 8), ("d", 9), ("m", 0, 2)],
        "late": [("u", 2), ("d", 10), ("i", 6), ("m", 3, 9), ("u", 4)],
    }
    for r in rounds:
        for op, *idx in steps[r]:
            if op == "m":
                present.discard(idx[0])
                present.add(idx[1])
            elif op == "d":
                present.discard(idx[0])
            elif op == "i":
                present.add(idx[0])
    return present
