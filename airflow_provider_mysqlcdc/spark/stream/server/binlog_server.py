"""The driver's short calls to the source server: where the binlog ends, and whether an offset is still there."""

from __future__ import annotations

from typing import Sequence

from ....cdc.model import TableId
from ....cdc.offsets import BinlogOffset
from ....cdc.source.config import SourceConfig


def head_offset(source: SourceConfig) -> BinlogOffset:
    from ....cdc.source.server import current_offset, server_version

    conn = source.connect_binlog()
    try:
        return current_offset(conn, server_version(conn))
    finally:
        conn.close()


def check_available(source: SourceConfig, offset: BinlogOffset, tables: Sequence[TableId]) -> None:
    from ....cdc.source.server import check_offset_available

    conn = source.connect_binlog()
    try:
        check_offset_available(conn, offset, [str(t) for t in tables])
    finally:
        conn.close()
