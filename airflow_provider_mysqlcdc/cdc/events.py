"""What the binlog reader produces: row changes, schema changes and heartbeats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .model import TableId
from .offsets import BinlogOffset

# Flink CDC's RowKind letters, used in the changelog and as the sink's op column.
OP_INSERT = "+I"
OP_UPDATE_BEFORE = "-U"
OP_UPDATE_AFTER = "+U"
OP_DELETE = "-D"


@dataclass(frozen=True)
class RowChange:
    """One row of a binlog row event.

    ``kind`` is ``insert``, ``update`` or ``delete``. ``before`` / ``after`` are full row
    images keyed by column name (``binlog_row_image=FULL``), values already normalized by
    the type mapping so they equal what the snapshot SELECT yields. ``offset`` is where the
    event starts (``row`` = index of the row inside a multi-row event), so it orders
    changes and compares with watermarks: a change is after a watermark when
    ``offset >= watermark``.
    """

    kind: str
    table_id: TableId
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None
    offset: BinlogOffset
    gtid: str | None = None
    timestamp: int = 0

    def ops(self) -> list[tuple[str, Mapping[str, Any]]]:
        """The changelog records of this change, in Flink CDC's RowKind form."""
        if self.kind == "insert":
            return [(OP_INSERT, self.after)]  # type: ignore[list-item]
        if self.kind == "delete":
            return [(OP_DELETE, self.before)]  # type: ignore[list-item]
        return [(OP_UPDATE_BEFORE, self.before), (OP_UPDATE_AFTER, self.after)]  # type: ignore[list-item]


@dataclass(frozen=True)
class SchemaChange:
    """A DDL statement seen in the binlog (QUERY event other than BEGIN/COMMIT)."""

    database: str
    sql: str
    offset: BinlogOffset
    table_id: TableId | None = None
    gtid: str | None = None
    timestamp: int = 0
    tables: tuple[TableId, ...] = ()  # every captured table it changes (table_id is the first)


@dataclass(frozen=True)
class Heartbeat:
    """The reader reached ``offset`` with nothing (captured) to report: lets offsets move."""

    offset: BinlogOffset
