"""Errors of the fast binlog reader.

All derive from the engine's ``CdcError`` so callers handle both readers alike. The split
matters to the caller: ``UnsupportedTableError`` means "this table needs the
python-mysql-replication path", everything else means "stop: the data cannot be trusted".
"""

from __future__ import annotations

from ...errors import NOT_EXACT_MARKER, CdcError


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


class RowMetadataError(FastBinlogError):
    """A captured table's TABLE_MAP without column names on a server that can log them: it was
    written while ``binlog_row_metadata`` was MINIMAL or NO_LOG. The names would have to come
    from today's schema, which is wrong for every event logged before a later ALTER TABLE."""

    def __init__(self, table: str, where: str) -> None:
        self.table = table
        self.where = where
        super().__init__(
            f"the binlog at {where} maps {table} without column names: the server logged it while "
            f"binlog_row_metadata was not FULL, so its rows cannot be matched to columns with certainty; "
            f"{NOT_EXACT_MARKER} and stopped before it; every change before it is in the sink. Fix: SET GLOBAL "
            "binlog_row_metadata = FULL (and binlog_row_metadata=FULL under [mysqld]), then load the affected "
            "tables again (trigger the pipeline with reset=true) and restart the stream."
        )


class UnsupportedTableError(FastBinlogError):
    """A table whose columns the fast decoder cannot decode exactly: read it with the library path.

    ``reason`` names the column and what is missing (a type, a charset, metadata).
    """

    def __init__(self, table: str, reason: str) -> None:
        self.table = table
        self.reason = reason
        super().__init__(
            f"{table}: the fast binlog decoder does not support this table ({reason}); "
            "Fix: read it with python-mysql-replication (cdc.binlog.reader.BinlogReader), or pass "
            "on_unsupported='report' (as the stream does) to have its rows events reported for that reader."
        )
