"""One replication connection speaking the binlog dump protocol itself.

pymysql does the handshake (credentials, TLS, auth plugins) through
``SourceConfig.connect()``; after that the connection is used only for the few session
settings a replica makes and for ``COM_REGISTER_SLAVE`` + ``COM_BINLOG_DUMP``, and its
socket is read through our own framing (``packets.PacketReader``).

Session settings, and why:

* ``@master_binlog_checksum = @@global.binlog_checksum`` declares us checksum-aware.
  Without it a server with ``binlog_checksum=CRC32`` refuses the dump (MySQL) or strips
  checksums; with it every event keeps its CRC32, which we verify.
* ``@mariadb_slave_capability = 4`` (MARIA_SLAVE_CAPABILITY_GTID) asks MariaDB to send its
  GTID / GTID_LIST / BINLOG_CHECKPOINT / ANNOTATE_ROWS events unchanged instead of
  rewriting them into dummy events for old replicas. MySQL ignores the variable.
* ``@master_heartbeat_period`` (nanoseconds) makes an idle server send HEARTBEAT events, so
  a blocking reader learns the head position and notices a dead connection.

The dump is always by (file, position): MariaDB's GTID dump needs a GTID start, and the
engine's offsets are file positions.
"""

from __future__ import annotations

import select
import socket
import struct
from typing import Any

from ...errors import REPORT_BUG
from ...source.config import SourceConfig
from .constants import BINLOG_DUMP_NON_BLOCK, COM_BINLOG_DUMP, COM_REGISTER_SLAVE
from .errors import ProtocolError
from .packets import PacketReader

_REPORT_HOST = b"mysqlcdc-fastbinlog"


def register_slave_payload(server_id: int, host: bytes = _REPORT_HOST, port: int = 0) -> bytes:
    """COM_REGISTER_SLAVE body: server id, report host/user/password, port, rank, master id."""
    return (
        struct.pack("<I", server_id) + bytes([len(host)]) + host + b"\x00" + b"\x00" + struct.pack("<HII", port, 0, 0)
    )


def binlog_dump_payload(server_id: int, file: str, position: int, non_block: bool) -> bytes:
    """COM_BINLOG_DUMP body: position (4), flags (2), server id (4), file name (rest)."""
    if not 4 <= position <= 0xFFFFFFFF:
        raise ValueError(f"binlog dump position must be in 4..2^32-1, got {position}")
    flags = BINLOG_DUMP_NON_BLOCK if non_block else 0
    return struct.pack("<IHI", position, flags, server_id) + file.encode("utf-8")


class DumpConnection:
    """A registered replica connection streaming events from ``file:position``.

    ``read_event()`` returns each event's bytes (header, body and checksum, without the
    protocol's 0x00 status byte), or None once a non-blocking dump reached the end of the
    binlog. ``close()`` may be called from another thread: it shuts the socket down, so a
    blocked ``read_event()`` fails at once (the caller knows it closed and ends quietly).
    """

    def __init__(
        self,
        source: SourceConfig,
        server_id: int,
        file: str,
        position: int,
        blocking: bool = False,
        heartbeat_s: float | None = None,
        receive_buffer: int = 8 << 20,
    ) -> None:
        self.source = source
        self.server_id = int(server_id)
        self.file = file
        self.position = int(position)
        self.blocking = blocking
        self.heartbeat_s = heartbeat_s
        self.receive_buffer = receive_buffer
        self.checksum_algorithm: str = "NONE"
        self.server_version: str = ""
        self.is_mariadb = False
        self._conn: Any = None
        self._reader: PacketReader | None = None

    def open(self) -> None:
        conn = self.source.connect_binlog(self.heartbeat_s)
        self._conn = conn
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION(), @@global.binlog_checksum")
                version, checksum = cur.fetchone()
                self.server_version = str(version)
                self.is_mariadb = "mariadb" in self.server_version.lower()
                self.checksum_algorithm = str(checksum or "NONE").upper()
                cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
                cur.execute("SET @mariadb_slave_capability = 4")
                if self.heartbeat_s:
                    period_ns = int(min(float(self.heartbeat_s), 4294967.0) * 1_000_000_000)
                    cur.execute("SET @master_heartbeat_period = %s", (period_ns,))
            sock = getattr(conn, "_sock", None)
            if sock is not None and self.receive_buffer:
                # A deep kernel buffer lets the server keep sending while we decode a stretch
                # (the loopback default stalls it after a few hundred KB).
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
                except OSError:
                    pass
            conn._execute_command(COM_REGISTER_SLAVE, register_slave_payload(self.server_id))
            conn._read_ok_packet()
            conn._execute_command(
                COM_BINLOG_DUMP,
                binlog_dump_payload(self.server_id, self.file, self.position, non_block=not self.blocking),
            )
            # The dump's packets continue the command's sequence (1, 2, ...). Read through
            # the connection's buffered file: anything it already holds comes first.
            rfile = conn._rfile
            self._reader = PacketReader(rfile.readinto1, first_seq=conn._next_seq_id, ready=self._ready)
        except BaseException:
            self.close()
            raise

    def _ready(self) -> bool:
        """Bytes waiting in the socket (or decrypted in its TLS layer): a read would not block."""
        sock = self.sock
        if sock is None:
            return True
        pending = getattr(sock, "pending", None)
        if pending is not None and pending() > 0:
            return True
        try:
            return bool(select.select([sock], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    @property
    def sock(self) -> socket.socket | None:
        return getattr(self._conn, "_sock", None) if self._conn is not None else None

    def read_event(self) -> bytes | None:
        """The next event, or None when a non-blocking dump is caught up. Raises server errors."""
        if self._reader is None:
            raise ProtocolError(f"read_event() before open() or after close(). {REPORT_BUG}")
        return self._reader.read_event()

    def close(self) -> None:
        conn, self._conn, self._reader = self._conn, None, None
        if conn is None:
            return
        sock = getattr(conn, "_sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            conn._force_close()
        except Exception:
            pass
