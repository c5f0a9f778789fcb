"""Synthetic binlog events for the fast reader's unit tests (built from the format, not by the reader)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from airflow_provider_mysqlcdc.cdc.binlog.fast import constants as C


def lenenc(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def event(
    typ: int,
    body: bytes,
    log_pos: int,
    *,
    flags: int = 0,
    server_id: int = 1,
    ts: int = 1_700_000_000,
    crc: bool = True,
) -> bytes:
    size = 19 + len(body) + (4 if crc else 0)
    ev = struct.pack("<IBIIIH", ts, typ, server_id, size, log_pos, flags) + body
    return ev + struct.pack("<I", zlib.crc32(ev)) if crc else ev


@dataclass
class Col:
    type: int
    meta: bytes = b""
    name: str = "c"
    nullable: bool = True
    unsigned: bool = False
    collation: int | None = None  # character columns
    members: tuple[bytes, ...] | None = None


NUMERIC = {
    C.T_TINY,
    C.T_SHORT,
    C.T_INT24,
    C.T_LONG,
    C.T_LONGLONG,
    C.T_NEWDECIMAL,
    C.T_FLOAT,
    C.T_DOUBLE,
    C.T_YEAR,
}  # YEAR has a signedness bit (MariaDB 10.11 writes one)


def real_type(c: Col) -> int:
    return c.meta[0] | 0x30 if c.type == C.T_STRING and c.meta else c.type


def table_map_body(
    table_id: int,
    db: str,
    table: str,
    cols: list[Col],
    *,
    names: bool = True,
    signedness: bool = True,
    charsets: bool = True,
    extra_tlv: bytes = b"",
) -> bytes:
    body = table_id.to_bytes(6, "little") + b"\x01\x00"
    body += bytes([len(db)]) + db.encode() + b"\x00" + bytes([len(table)]) + table.encode() + b"\x00"
    body += lenenc(len(cols)) + bytes(c.type for c in cols)
    meta = b"".join(c.meta for c in cols)
    body += lenenc(len(meta)) + meta
    nulls = bytearray((len(cols) + 7) // 8)
    for i, c in enumerate(cols):
        if c.nullable:
            nulls[i >> 3] |= 1 << (i & 7)
    body += bytes(nulls)
    tlv = b""
    numeric = [c for c in cols if c.type in NUMERIC]
    if signedness and numeric:
        bits = bytearray((len(numeric) + 7) // 8)
        for i, c in enumerate(numeric):
            if c.unsigned:
                bits[i >> 3] |= 0x80 >> (i & 7)
        tlv += bytes([C.OM_SIGNEDNESS]) + lenenc(len(bits)) + bytes(bits)
    chars = [c for c in cols if real_type(c) in (C.T_STRING, C.T_VARCHAR, C.T_BLOB)]
    if charsets and chars:
        data = b"".join(lenenc(c.collation or 45) for c in chars)
        tlv += bytes([C.OM_COLUMN_CHARSET]) + lenenc(len(data)) + data
    es = [c for c in cols if real_type(c) in (C.T_ENUM, C.T_SET)]
    if charsets and es:
        data = b"".join(lenenc(c.collation or 45) for c in es)
        tlv += bytes([C.OM_ENUM_AND_SET_COLUMN_CHARSET]) + lenenc(len(data)) + data
    if names:
        data = b"".join(lenenc(len(c.name.encode())) + c.name.encode() for c in cols)
        tlv += bytes([C.OM_COLUMN_NAME]) + lenenc(len(data)) + data
    for kind, rt in ((C.OM_SET_STR_VALUE, C.T_SET), (C.OM_ENUM_STR_VALUE, C.T_ENUM)):
        lists = [c.members for c in cols if real_type(c) == rt and c.members is not None]
        if lists:
            data = b"".join(lenenc(len(ms)) + b"".join(lenenc(len(m)) + m for m in ms) for ms in lists)
            tlv += bytes([kind]) + lenenc(len(data)) + data
    return body + tlv + extra_tlv


def rows_body(
    table_id: int,
    ncols: int,
    images: list[bytes],
    *,
    update: bool = False,
    version: int = 1,
    present: bytes | None = None,
) -> bytes:
    body = table_id.to_bytes(6, "little") + b"\x01\x00"
    if version == 2:
        body += b"\x02\x00"
    nb = (ncols + 7) // 8
    full = bytearray(b"\xff" * nb)
    if ncols % 8:
        full[-1] = (1 << (ncols % 8)) - 1
    bitmap = present if present is not None else bytes(full)
    body += lenenc(ncols) + bitmap + (bitmap if update else b"")
    return body + b"".join(images)


def fde_body(checksum: int = C.CHECKSUM_CRC32) -> bytes:
    post = bytearray(171)
    post[C.TABLE_MAP_EVENT - 1] = 8
    for t in (C.WRITE_ROWS_EVENT_V1, C.UPDATE_ROWS_EVENT_V1, C.DELETE_ROWS_EVENT_V1):
        post[t - 1] = 8
    return (
        struct.pack("<H", 4)
        + b"10.11.0-MariaDB-test".ljust(50, b"\x00")
        + struct.pack("<I", 0)
        + bytes([19])
        + bytes(post)
        + bytes([checksum])
    )


def rotate_body(file: str, position: int = 4) -> bytes:
    return struct.pack("<Q", position) + file.encode()


def gtid_body(seq_no: int, domain: int = 0, flags: int = 0) -> bytes:
    return struct.pack("<QIB", seq_no, domain, flags) + b"\x00" * 6


def query_body(sql: str, db: str = "") -> bytes:
    status = b""
    return struct.pack("<IIBHH", 1, 0, len(db), 0, len(status)) + status + db.encode() + b"\x00" + sql.encode()


@dataclass
class Binlog:
    """Appends events with consistent positions, per file, as a server would write them."""

    file: str = "mysql-bin.000001"
    pos: int = 4
    events: list[bytes] = field(default_factory=list)

    def add(self, typ: int, body: bytes, **kw) -> int:
        """Append an event; returns where it starts."""
        start = self.pos
        size = 19 + len(body) + (0 if kw.get("crc") is False else 4)
        self.pos += size
        self.events.append(event(typ, body, self.pos, **kw))
        return start

    def fake_rotate(self, file: str, position: int) -> None:
        self.events.append(event(C.ROTATE_EVENT, rotate_body(file, position), 0, flags=C.LOG_EVENT_ARTIFICIAL_F, ts=0))

    def rotate_to(self, file: str) -> None:
        self.add(C.ROTATE_EVENT, rotate_body(file))
        self.file, self.pos = file, 4
        self.add(C.FORMAT_DESCRIPTION_EVENT, fde_body())
