"""Errors of the fast binlog reader.

All derive from the engine's ``CdcError`` so callers handle both readers alike. The split
matters to the caller: ``UnsupportedTableError`` means "this table needs the
python-mysql-replication path", everything else means "stop: the data cannot be trusted".
"""

from __future__ import annotations

from ..errors import CdcError


class FastBinlogError(CdcError):
    """Base class of the fast reader's errors."""


class ProtocolError(FastBinlogError):
    """The server's byte stream did not follow the replication protocol as we read it."""


class ChecksumError(FastBinlogError):
    """An event's CRC32 did not match its bytes."""


class CompressedEventError(FastBinlogError):
    """A compressed event (MySQL transaction compression, MariaDB log_bin_compress) we cannot decode.

    Raised instead of skipping it: skipping would silently lose every row inside.
    """


class UnknownEventError(FastBinlogError):
    """An event type we do not know that the server did not mark as ignorable."""


class PartialImageError(FastBinlogError):
    """A rows event without every column (binlog_row_image MINIMAL/NOBLOB, partial JSON)."""


class UnsupportedTableError(FastBinlogError):
    """A table whose columns the fast decoder cannot decode exactly: read it with the library path.

    ``reason`` names the column and what is missing (a type, a charset, metadata).
    """

    def __init__(self, table: str, reason: str) -> None:
        self.table = table
        self.reason = reason
        super().__init__(
            f"{table}: the fast binlog decoder does not support this table ({reason}); "
            "read it with python-mysql-replication (cdc.binlog.BinlogReader) instead.")
