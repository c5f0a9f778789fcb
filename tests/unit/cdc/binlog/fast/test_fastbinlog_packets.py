"""Packet framing of the fast binlog reader: sizes around 16 MB, split reads, EOF/error, CRC32."""

from __future__ import annotations

import random
import struct
import zlib

import numpy as np
import pymysql
import pytest

from airflow_provider_mysqlcdc.cdc.binlog.fast.connection import binlog_dump_payload, register_slave_payload
from airflow_provider_mysqlcdc.cdc.binlog.fast.constants import MAX_PACKET_LEN
from airflow_provider_mysqlcdc.cdc.binlog.fast.errors import ChecksumError, ProtocolError
from airflow_provider_mysqlcdc.cdc.binlog.fast.packets import (
    PacketReader,
    checksums_valid,
    frame_packets,
    verify_checksum,
)


def stream(data: bytes, chunk: int | None = None):
    """A ``readinto`` over ``data`` returning at most ``chunk`` bytes per call (a slow socket)."""
    pos = 0

    def read_into(view: memoryview) -> int:
        nonlocal pos
        n = min(len(view), len(data) - pos, chunk or len(data))
        view[:n] = data[pos : pos + n]
        pos += n
        return n

    return read_into


def wire(*payloads: bytes, first_seq: int = 1) -> bytes:
    out = b""
    seq = first_seq
    for p in payloads:
        framed = frame_packets(p, seq)
        out += framed
        seq += len(p) // MAX_PACKET_LEN + 1  # the last packet is always shorter than 16 MB - 1
    return out


def event(body: bytes) -> bytes:
    """A dump packet payload: status 0x00 + an event with a valid CRC32."""
    ev = body + struct.pack("<I", zlib.crc32(body))
    return b"\x00" + ev


@pytest.mark.parametrize("chunk", [None, 1, 7, 4096])
def test_small_packets_in_any_read_sizes(chunk):
    payloads = [event(b"a" * 30), event(b"b" * 300), event(b""), b"\xfe\x00\x00\x02\x00"]
    r = PacketReader(stream(wire(*payloads), chunk), buffer_size=64)
    assert r.read_event() == payloads[0][1:]
    assert r.read_event() == payloads[1][1:]
    assert r.read_event() == payloads[2][1:]
    assert r.read_event() is None  # EOF packet: a non-blocking dump is caught up


@pytest.mark.parametrize(
    "size", [MAX_PACKET_LEN - 1, MAX_PACKET_LEN, MAX_PACKET_LEN + 1, 2 * MAX_PACKET_LEN, 2 * MAX_PACKET_LEN + 5]
)
def test_payloads_around_16mb_join_their_continuation_packets(size):
    big = b"\x00" + bytes(range(256)) * (size // 256) + b"z" * (size % 256 - 1 if size % 256 else 0)
    big = big[:size]
    assert len(big) == size
    after = event(b"after")
    data = frame_packets(big, 1)
    data += frame_packets(after, 1 + size // MAX_PACKET_LEN + 1)
    r = PacketReader(stream(data, 1 << 20), buffer_size=1 << 16)
    got = r.read_event()
    assert len(got) == size - 1 and got == big[1:]
    assert r.read_event() == after[1:]


def test_frame_packets_splits_like_the_server():
    data = frame_packets(b"x" * MAX_PACKET_LEN, 0)
    # one full packet, then an empty one that ends the payload
    assert data[:4] == b"\xff\xff\xff\x00" and data[-4:] == b"\x00\x00\x00\x01"


def test_error_packet_raises_the_server_error():
    err = b"\xff" + struct.pack("<H", 1236) + b"#HY000" + b"Could not find first log file name"
    r = PacketReader(stream(wire(err)))
    with pytest.raises(pymysql.err.OperationalError) as e:
        r.read_event()
    assert e.value.args == (1236, "Could not find first log file name")


def test_sequence_gap_is_a_protocol_error():
    data = frame_packets(event(b"a"), 1) + frame_packets(event(b"b"), 3)
    r = PacketReader(stream(data))
    r.read_event()
    with pytest.raises(ProtocolError, match="sequence id 3, expected 2"):
        r.read_event()


def test_sequence_wraps_at_256():
    payloads = [event(bytes([i % 251])) for i in range(300)]
    r = PacketReader(stream(wire(*payloads, first_seq=250)), first_seq=250, buffer_size=128)
    assert [r.read_event() for _ in payloads] == [p[1:] for p in payloads]


def test_lost_connection():
    data = frame_packets(event(b"abcdef"), 1)[:-3]
    r = PacketReader(stream(data))
    with pytest.raises(pymysql.err.OperationalError) as e:
        r.read_event()
    assert e.value.args[0] == 2013


def test_unexpected_status_byte():
    r = PacketReader(stream(frame_packets(b"\x07abc", 1)))
    with pytest.raises(ProtocolError):
        r.read_event()


def test_buffered_counts_what_is_left():
    data = wire(event(b"a" * 10), event(b"b" * 10))
    r = PacketReader(stream(data))
    r.read_event()
    assert r.buffered() == len(data) // 2
    r.read_event()
    assert r.buffered() == 0


def test_checksum():
    ev = event(b"some event bytes")[1:]
    verify_checksum(ev)
    bad = ev[:3] + b"X" + ev[4:]
    with pytest.raises(ChecksumError, match="checksum mismatch at f:1"):
        verify_checksum(bad, "f:1")


def _events_back_to_back(events: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    starts = np.cumsum([0] + [len(e) for e in events[:-1]])
    return np.frombuffer(b"".join(events), dtype=np.uint8).copy(), starts


def test_checksums_valid_checks_every_event_in_one_call():
    rng = random.Random(5)
    events = [event(rng.randbytes(rng.randint(19, 90)))[1:] for _ in range(50)]
    assert checksums_valid(*_events_back_to_back(events))
    assert checksums_valid(*_events_back_to_back(events[:1]))
    for k in (0, 17, 49):  # one bit anywhere in any one event -- its data or its stored CRC
        for at in (0, 3, 4, len(events[k]) // 2, len(events[k]) - 1):
            bad = list(events)
            bad[k] = bad[k][:at] + bytes([bad[k][at] ^ (1 << (at % 8))]) + bad[k][at + 1 :]
            assert not checksums_valid(*_events_back_to_back(bad)), (k, at)
    # two events swapping their stored CRCs: each alone is wrong, so the run is
    a, b = events[3], events[4]
    swapped = events[:3] + [a[:-4] + b[-4:], b[:-4] + a[-4:]] + events[5:]
    assert not checksums_valid(*_events_back_to_back(swapped))


def test_command_payloads():
    assert binlog_dump_payload(7, "mysql-bin.000002", 1234, non_block=True) == (
        struct.pack("<IHI", 1234, 1, 7) + b"mysql-bin.000002"
    )
    assert binlog_dump_payload(7, "b.000001", 4, non_block=False)[4:6] == b"\x00\x00"
    with pytest.raises(ValueError):
        binlog_dump_payload(7, "b.000001", 2, non_block=False)
    reg = register_slave_payload(6101)
    assert reg[:4] == struct.pack("<I", 6101) and reg[-10:] == struct.pack("<HII", 0, 0, 0)
