"""Source layouts per table version, for the tasks of a direct stream write.

The stream's layout (``change_rows.SourceLayout``) is built from the schemas the query
started with. After an ``ALTER TABLE`` the binlog's TABLE_MAP describes the table's new
shape and its rows events hold images of that shape, so a task that meets them builds a
layout for the version it sees, from the TABLE_MAP (``binlog_row_metadata=FULL`` gives names,
types, signedness, charsets and the primary key). The row identity stays the stream's own
while its columns exist (a DDL that drops or renames one is applied by the driver, which
checks every segment's columns against the schema version it expects there).
"""

from __future__ import annotations

from typing import Any

from ....cdc.events import SchemaChange
from ....cdc.model import TableId, TableSchema
from ...sinks.direct_spec import DdlMark
from ..offsets.stream_offset import StreamOffset
from .change_rows import SourceLayout, seq_of


def _image_fields(image: Any) -> list[tuple[str, Any]]:
    return [(f.name, f.type) for f in image]


class LayoutBook:
    """The query's layout, and one single-table layout per other table version met."""

    def __init__(self, base: SourceLayout, server_time_zone: str = "UTC") -> None:
        self.base = base
        self.server_time_zone = server_time_zone
        self._versions: dict[tuple, SourceLayout] = {}

    def layout_for(self, table_id: TableId, logged: TableSchema, image_type: Any = None) -> SourceLayout:
        """The layout for rows of ``table_id`` logged as ``logged`` (the decoder's TABLE_MAP schema)."""
        slot = self.base.slots.get(table_id)
        if (
            slot is not None
            and slot.schema.column_names == logged.column_names
            and (image_type is None or _image_fields(image_type) == _image_fields(slot.image))
        ):
            return self.base
        key = (table_id, tuple((c.name, c.column_type, c.nullable) for c in logged.columns))
        if key not in self._versions:
            identity = logged.row_identity
            if slot is not None and all(c in logged.column_names for c in slot.schema.row_identity):
                identity = slot.schema.row_identity
            schema = TableSchema(table_id, logged.columns, logged.primary_key, logged.chunk_key or identity, identity)
            self._versions[key] = SourceLayout([schema], self.server_time_zone)
        return self._versions[key]

    def mark(self, change: SchemaChange, first_file_index: int) -> DdlMark:
        """A DDL's mark: the captured tables the reader found it changes (those of its database
        when it could tell none), and its place."""
        captured = set(self.base.slots)
        # the reader reports captured tables, and tables the DDL brings under the pipeline's list
        named = (
            list(dict.fromkeys(change.tables))
            if change.tables
            else [t for t in ((change.table_id,) if change.table_id else ()) if t in captured]
        )
        if not named:
            named = sorted(t for t in captured if t.database == change.database) or sorted(captured)
        o = change.offset
        return DdlMark(
            tuple(named),
            change.database,
            change.sql,
            StreamOffset.boundary(o).to_dict(),
            2 * seq_of(o.file, o.position, 0, first_file_index),
        )
