"""TABLE_MAP parsing and generated row decoders of the fast binlog reader, on synthetic events."""

from __future__ import annotations

import datetime as dt
import decimal
import random
import struct

import numpy as np
import pyarrow as pa
import pytest
from pymysql import charset as pc

from airflow_provider_mysqlcdc.cdc.binlog.fast import constants as C
from airflow_provider_mysqlcdc.cdc.binlog.fast.columnar import columnar_reason, decode_events, gather_slices
from airflow_provider_mysqlcdc.cdc.binlog.fast.decoder import TableDecoder, Unsupported, plan_table
from airflow_provider_mysqlcdc.cdc.binlog.fast.tablemap import parse_table_map, table_map_names
from tests.unit.cdc.binlog.fast.test_fastbinlog_events import Col, event, table_map_body

CHARSETS = {}
for _i in range(1, 256):
    try:
        CHARSETS[_i] = pc.charset_by_id(_i).name
    except KeyError:
        pass
UTF8MB4, LATIN1, BINARY = 45, 8, 63


def tm_event(cols, **kw):
    return event(C.TABLE_MAP_EVENT, table_map_body(42, "db", "t", cols, **kw), 1000)


def plan(cols, **kw) -> TableDecoder | Unsupported:
    return plan_table(parse_table_map(tm_event(cols, **kw)), CHARSETS)


COLS = [
    Col(C.T_LONG, name="id", nullable=False),
    Col(C.T_LONGLONG, name="big", unsigned=True),
    Col(C.T_TINY, name="tiny"),
    Col(C.T_INT24, name="med"),
    Col(C.T_VARCHAR, struct.pack("<H", 400), name="v", collation=UTF8MB4),  # 2-byte length prefix
    Col(C.T_STRING, bytes([0xFE ^ ((600 & 0x300) >> 4), 600 & 0xFF]), name="ch", collation=UTF8MB4),
    Col(C.T_VARCHAR, struct.pack("<H", 20), name="l1", collation=LATIN1),
    Col(C.T_STRING, bytes([0xFE, 4]), name="bn", collation=BINARY),  # BINARY(4)
    Col(C.T_NEWDECIMAL, bytes([14, 4]), name="d"),
    Col(C.T_DATETIME2, bytes([3]), name="dt"),
    Col(C.T_STRING, bytes([C.T_ENUM, 1]), name="e", members=(b"x", b"y")),
    Col(C.T_STRING, bytes([C.T_SET, 1]), name="s", members=(b"a", b"b", b"c")),
    Col(C.T_BLOB, bytes([2]), name="tx", collation=UTF8MB4),
    Col(C.T_BIT, bytes([2, 1]), name="bits"),  # BIT(10)
    Col(C.T_YEAR, name="y"),
    Col(C.T_DOUBLE, bytes([8]), name="dbl"),
    Col(C.T_FLOAT, bytes([4]), name="flt"),
]


def test_table_map_parse():
    ev = tm_event(COLS)
    assert table_map_names(ev) == ("db", "t")
    tm = parse_table_map(ev)
    assert tm.table_id == 42 and (tm.database, tm.table) == ("db", "t")
    assert [c.name for c in tm.columns] == [c.name for c in COLS]
    byname = {c.name: c for c in tm.columns}
    assert byname["big"].unsigned and not byname["tiny"].unsigned
    assert not byname["id"].nullable and byname["big"].nullable
    assert byname["v"].length == 400 and byname["ch"].length == 600 and byname["ch"].type == C.T_STRING
    assert byname["e"].type == C.T_ENUM and tm.raw_member_bytes[byname["e"].index] == (b"x", b"y")
    assert byname["s"].type == C.T_SET and byname["s"].length == 1
    assert (byname["d"].precision, byname["d"].scale) == (14, 4)
    assert byname["bits"].bits == 10 and byname["bits"].length == 2
    assert byname["l1"].collation_id == LATIN1 and byname["bn"].collation_id == BINARY
    # the structure key excludes the table id: a reused or changed id cannot pick a stale decoder
    other_id = event(C.TABLE_MAP_EVENT, table_map_body(43, "db", "t", COLS), 2000)
    assert parse_table_map(other_id).key == tm.key
    changed = event(C.TABLE_MAP_EVENT, table_map_body(42, "db", "t", COLS[:-1]), 1000)
    assert parse_table_map(changed).key != tm.key


def test_synthesized_schema_has_information_schema_types():
    dec = plan(COLS)
    assert isinstance(dec, TableDecoder)
    types = {c.name: (c.data_type, c.column_type) for c in dec.schema.columns}
    assert types["big"] == ("bigint", "bigint unsigned")
    assert types["bn"][0] == "binary" and types["tx"][0] == "text" and types["ch"][0] == "char"
    assert types["e"] == ("enum", "enum('x','y')")
    arrow = {f.name: f.type for f in dec.image_type}
    assert arrow["big"] == pa.decimal128(20, 0) and arrow["tiny"] == pa.int8()
    assert arrow["dt"] == pa.timestamp("us") and arrow["d"] == pa.decimal128(14, 4)
    assert arrow["bits"] == pa.int64() and arrow["y"] == pa.int16() and arrow["flt"] == pa.float32()


def _image(values: dict, nulls: set[str] = frozenset()) -> bytes:
    bitmap = 0
    for i, c in enumerate(COLS):
        if c.name in nulls:
            bitmap |= 1 << i
    out = bitmap.to_bytes((len(COLS) + 7) // 8, "little")
    for c in COLS:
        if c.name not in nulls:
            out += values[c.name]
    return out


VALUES = {
    "id": struct.pack("<i", -5),
    "big": struct.pack("<Q", 2**64 - 1),
    "tiny": struct.pack("<b", -128),
    "med": (-8388608).to_bytes(3, "little", signed=True),
    "v": struct.pack("<H", 5) + "h\U0001f600".encode(),
    "ch": struct.pack("<H", 2) + b"ab",
    "l1": bytes([4]) + "caf\u00e9".encode("cp1252"),
    "bn": bytes([2]) + b"\x01\x02",
    "d": bytes.fromhex("7ef204c72dfb2d"),
    "dt": bytes.fromhex("8cb2420000000a"),
    "e": bytes([2]),
    "s": bytes([0b101]),
    "tx": struct.pack("<H", 3) + b"txt",
    "bits": bytes.fromhex("0201"),
    "y": bytes([0]),
    "dbl": struct.pack("<d", 0.1),
    "flt": struct.pack("<f", 1.1),
}

EXPECTED = {
    "id": -5,
    "big": decimal.Decimal(2**64 - 1),
    "tiny": -128,
    "med": -8388608,
    "v": "h\U0001f600",
    "ch": "ab",
    "l1": "caf\u00e9",
    "bn": b"\x01\x02\x00\x00",
    "d": decimal.Decimal("-1234567890.1234"),
    "dt": dt.datetime(1000, 1, 1, 0, 0, 0, 1000),
    "e": "y",
    "s": "a,c",
    "tx": "txt",
    "bits": 0b1000000001,
    "y": 0,
    "dbl": 0.1,
    "flt": struct.unpack("<f", struct.pack("<f", 1.1))[0],
}


def test_decode_fast_and_null_paths_agree():
    dec = plan(COLS)
    assert isinstance(dec, TableDecoder)
    no_nulls = _image(VALUES)
    with_nulls = _image(VALUES, {"tiny", "v", "tx", "y"})
    all_nulls = _image(VALUES, {c.name for c in COLS})
    buf = b"HDR" + no_nulls + with_nulls + all_nulls
    images, end = dec.decode_rows(buf, 3, len(buf))
    assert end == len(buf) and len(images) == 3
    rows = dec.image_struct(images).to_pylist()
    assert rows[0] == EXPECTED
    assert rows[1] == {**EXPECTED, "tiny": None, "v": None, "tx": None, "y": None}
    assert rows[2] == {c.name: None for c in COLS}
    # a missing image (insert's before) is a null struct
    assert dec.image_struct([None, images[0]]).to_pylist() == [None, EXPECTED]


def test_columnar_decoding_equals_row_decoding():
    """Several events, one or two images each, NULLs in places: both decoders, identical arrays."""
    dec = plan(COLS)
    assert columnar_reason(dec) is None
    variants = [
        _image(VALUES),
        _image(VALUES, {"tiny", "v", "tx", "y"}),
        _image(VALUES, {c.name for c in COLS}),
        _image(VALUES, {"d", "dt", "e", "s", "bn", "bits", "big", "l1"}),
    ]
    events = [variants[0], variants[1] + variants[2], variants[3], variants[2] + variants[0] + variants[3]]
    pad = b"HEAD"
    blob = b"".join(pad + e + b"TAIL" for e in events)
    starts, ends, pos = [], [], 0
    for e in events:
        starts.append(pos + 4)
        ends.append(pos + 4 + len(e))
        pos += len(e) + 8
    got = decode_events(dec, blob, np.array(starts), np.array(ends))
    expected_images = []
    for s_, e_ in zip(starts, ends):
        images, end = dec.decode_rows(blob, s_, e_)
        assert end == e_
        expected_images.extend(images)
    expected = dec.image_arrays(expected_images)
    for col, exp, cp in zip(got.columns, expected, dec.columns):
        assert col.to_pylist() == exp.to_pylist(), cp.name
        assert col.type == exp.type
    assert got.event.tolist() == [0, 1, 1, 2, 3, 3, 3] and got.image.tolist() == [0, 0, 1, 0, 0, 1, 2]


def test_columnar_long_multi_row_events_use_the_row_decoder_for_the_tail():
    dec = plan(COLS)
    images = [_image(VALUES, {"v"} if i % 3 else set()) for i in range(40)]
    blob = b"".join(images) + _image(VALUES)
    got = decode_events(
        dec, blob, np.array([0, len(blob) - len(images[0])]), np.array([len(blob) - len(images[0]), len(blob)])
    )
    assert got.event.tolist() == [0] * 40 + [1] and got.image.tolist() == list(range(40)) + [0]
    rows = pa.StructArray.from_arrays(got.columns, fields=list(dec.image_type)).to_pylist()
    assert rows[0] == EXPECTED and rows[1]["v"] is None and rows[40] == EXPECTED


def test_decimal_text_above_38_digits_and_bit64():
    cols = [Col(C.T_NEWDECIMAL, bytes([65, 30]), name="d"), Col(C.T_BIT, bytes([0, 8]), name="b")]
    dec = plan(cols)
    raw = bytes.fromhex("7f439eb1ca484078caf1cb3fd0f8a086f8a432eaff439eb1ca484078fc84")
    img = b"\x00" + raw + b"\xff" * 8
    images, _ = dec.decode_rows(img, 0, len(img))
    assert dec.image_struct(images).to_pylist() == [
        {"d": "-12345678901234567890123456789012345.123456789012345678901234567891", "b": decimal.Decimal(2**64 - 1)}
    ]


@pytest.mark.parametrize(
    "cols,kw,reason",
    [
        ([Col(C.T_LONG, name="a")], {"names": False}, "no column names"),
        ([Col(C.T_LONG, name="a")], {"signedness": False}, "no signedness"),
        ([Col(C.T_VARCHAR, struct.pack("<H", 10), name="a")], {"charsets": False}, "no character set"),
        ([Col(C.T_VARCHAR, struct.pack("<H", 10), name="a", collation=2000)], {}, "unknown collation id 2000"),
        ([Col(C.T_TIME, name="a")], {}, "pre-MySQL-5.6"),
        ([Col(C.T_DATETIME, name="a")], {}, "pre-MySQL-5.6"),
        ([Col(C.T_STRING, bytes([C.T_ENUM, 1]), name="a", members=None)], {}, "member strings"),
    ],
)
def test_unsupported_tables_say_why(cols, kw, reason):
    got = plan(cols, **kw)
    assert isinstance(got, Unsupported)
    assert reason in got.reason and str(got).startswith("db.t: ")


def test_geometry_is_bytes():
    dec = plan([Col(C.T_GEOMETRY, bytes([4]), name="g", collation=BINARY)])
    assert isinstance(dec, TableDecoder)
    img = b"\x00" + struct.pack("<I", 3) + b"\x01\x02\x03"
    images, _ = dec.decode_rows(img, 0, len(img))
    assert dec.image_struct(images).to_pylist() == [{"g": b"\x01\x02\x03"}]


def test_truncated_row_raises():
    dec = plan([Col(C.T_LONGLONG, name="a")])
    with pytest.raises(struct.error):
        dec.decode_rows(b"\x00\x01\x02", 0, 3)


def test_wide_decimals_are_not_columnar():
    assert "wider than 64 bits" in columnar_reason(plan([Col(C.T_NEWDECIMAL, bytes([19, 0]), name="d")]))
    assert columnar_reason(plan([Col(C.T_NEWDECIMAL, bytes([18, 9]), name="d")])) is None


def test_mysql_binary_json_column_in_both_decoders():
    from tests.unit.cdc.binlog.fast.test_fastbinlog_jsonb import document

    dec = plan([Col(C.T_LONG, name="id", nullable=False), Col(C.T_JSON, bytes([4]), name="j")])
    assert isinstance(dec, TableDecoder) and columnar_reason(dec) is None
    assert dec.image_type.field("j").type == pa.string()
    docs = [document({"a": [1, "x"], "b": None}), document([]), b""]
    images = [b"\x00" + struct.pack("<i", i) + struct.pack("<I", len(d)) + d for i, d in enumerate(docs)]
    images.append(b"\x02" + struct.pack("<i", 9))  # j NULL
    blob = b"".join(images)
    got_rows, _ = dec.decode_rows(blob, 0, len(blob))
    want = [
        {"id": 0, "j": '{"a": [1, "x"], "b": null}'},
        {"id": 1, "j": "[]"},
        {"id": 2, "j": None},
        {"id": 9, "j": None},
    ]
    assert dec.image_struct(got_rows).to_pylist() == want
    bounds = np.cumsum([0] + [len(i) for i in images])
    got = decode_events(dec, blob, bounds[:-1], bounds[1:])
    assert pa.StructArray.from_arrays(got.columns, fields=list(dec.image_type)).to_pylist() == want


@pytest.mark.parametrize("order", ["in order", "shuffled", "overlapping"])
@pytest.mark.parametrize("case", ["dense", "sparse", "adjacent", "empty-slices", "one", "many-short"])
def test_gather_slices_equals_slicing(case, order, monkeypatch):
    """Every way (Arrow's take over the slices in order, an index per byte, in chunks) gives
    exactly the slices' bytes."""
    monkeypatch.setattr("airflow_provider_mysqlcdc.cdc.binlog.fast.columnar._GATHER_CHUNK", 256)
    rng = random.Random(case)
    data = bytes(rng.randrange(256) for _ in range(5000))
    starts, lengths, at = [], [], 3
    while at < 4800:
        n = {
            "dense": rng.randint(20, 60),
            "sparse": rng.randint(1, 4),
            "adjacent": 7,
            "empty-slices": rng.choice([0, 0, 9]),
            "one": 4000,
            "many-short": rng.randint(1, 30),
        }[case]
        starts.append(at)
        lengths.append(n)
        gap = {
            "dense": rng.randint(1, 5),
            "sparse": rng.randint(30, 90),
            "adjacent": 0,
            "empty-slices": rng.randint(0, 3),
            "one": 5000,
            "many-short": rng.randint(0, 9),
        }[case]
        at += n + gap
    if order == "shuffled":
        pairs = list(zip(starts, lengths))
        rng.shuffle(pairs)
        starts, lengths = [s for s, _ in pairs], [n for _, n in pairs]
    elif order == "overlapping":
        starts = [max(0, s - 5) for s in starts]
    B = np.frombuffer(data, dtype=np.uint8)
    got = gather_slices(B, np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64))
    assert got.tobytes() == b"".join(data[s : s + n] for s, n in zip(starts, lengths))
