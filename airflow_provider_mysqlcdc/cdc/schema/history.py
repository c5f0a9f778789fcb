"""Schema history: each captured table's versions, keyed by the binlog offset of the DDL that made them.

Why offsets and not "the latest": a stream restarted from a checkpoint taken before a DDL
replays the rows before it, and those must be read and written with the version in force
there. A version holds both sides: ``source`` (the table as the server has it after the
DDL) and ``sink`` (what the sink table looks like after the pipeline's behaviour applied
it: under ``lenient`` a dropped column stays, under ``ignore`` nothing changes), plus the
sink actions taken, so a replay after a crash between "recorded" and "applied" applies the
very same actions again instead of planning anew.

A version is *pending* when the statement did not say what the table looks like afterwards
(a rename swap, a DDL the parser cannot read under a lenient behaviour): the columns the next
rows were logged with settle it.

The first version of a table (``offset`` None) is what the snapshot read. The history is
kept with the stream's checkpoint (``HISTORY_FILE``) and rewritten whole at each DDL (a rare
event; the file stays small).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from ..model import TableId, TableSchema
from ..offsets import BinlogOffset

HISTORY_FILE = "mysqlcdc_schema_history.json"
FORMAT_VERSION = 1


def offset_key(offset: Mapping[str, Any] | None) -> tuple[int, int, int]:
    """Ordering key of a stream offset dict (``file``, ``position``, ``row``); None sorts first."""
    if offset is None:
        return (-1, -1, -1)
    return BinlogOffset(str(offset["file"]), int(offset["position"]), row=int(offset.get("row") or 0)).sort_key()


def _schema_to_dict(schema: TableSchema | None) -> dict[str, Any] | None:
    """``TableSchema.to_dict`` plus ``extra`` (the table's default charset and collation, which ADD COLUMN
    and MODIFY give to character columns declared without one)."""
    if schema is None:
        return None
    return {**schema.to_dict(), "extra": dict(schema.extra or {})}


def _schema_from_dict(d: Mapping[str, Any] | None) -> TableSchema | None:
    if not d:
        return None
    return replace(TableSchema.from_dict(d), extra=dict(d.get("extra") or {}))


@dataclass(frozen=True)
class TableVersion:
    """One version of one table: after the DDL at ``offset`` (None: the snapshot's)."""

    offset: Mapping[str, Any] | None
    source: TableSchema | None  # None: the table is gone (dropped, renamed away)
    sink: TableSchema | None  # None: the sink table was dropped
    ddl: str | None = None
    actions: tuple[Mapping[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    pending: bool = False  # the shape is known only from the next rows' TABLE_MAP

    @property
    def key(self) -> tuple[int, int, int]:
        return offset_key(self.offset)

    def to_dict(self) -> dict[str, Any]:
        return {
            "offset": dict(self.offset) if self.offset else None,
            "source": _schema_to_dict(self.source),
            "sink": _schema_to_dict(self.sink),
            "ddl": self.ddl,
            "actions": [dict(a) for a in self.actions],
            "notes": list(self.notes),
            "pending": self.pending,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TableVersion":
        return cls(
            d.get("offset"),
            _schema_from_dict(d.get("source")),
            _schema_from_dict(d.get("sink")),
            d.get("ddl"),
            tuple(d.get("actions") or ()),
            tuple(d.get("notes") or ()),
            bool(d.get("pending")),
        )


@dataclass
class SchemaHistory:
    """Versions per table, in offset order."""

    versions: dict[TableId, list[TableVersion]] = field(default_factory=dict)

    @classmethod
    def starting_with(cls, schemas: Iterable[TableSchema], pending: bool = False) -> "SchemaHistory":
        """``pending``: the schemas are today's, not necessarily those in force where the stream
        starts (a start at an offset in the past, no snapshot): the first rows' TABLE_MAP settles them."""
        return cls({s.table_id: [TableVersion(None, s, s, pending=pending)] for s in schemas})

    def add_initial(self, schemas: Iterable[TableSchema]) -> None:
        """Tables the history does not know yet start with the given (snapshot) schema."""
        for s in schemas:
            self.versions.setdefault(s.table_id, [TableVersion(None, s, s)])

    @property
    def tables(self) -> list[TableId]:
        return sorted(self.versions)

    def before(self, table_id: TableId, offset: Mapping[str, Any] | None) -> TableVersion:
        """The version in force just before ``offset`` (None: the latest)."""
        found = self.versions.get(table_id)
        if not found:
            raise KeyError(f"no schema history for {table_id}")
        if offset is None:
            return found[-1]
        key = offset_key(offset)
        current = found[0]
        for v in found[1:]:
            if v.key < key:
                current = v
        return current

    def latest(self, table_id: TableId) -> TableVersion:
        return self.before(table_id, None)

    def at(self, table_id: TableId, offset: Mapping[str, Any]) -> TableVersion | None:
        """The version the DDL at exactly ``offset`` made, if it is recorded."""
        key = offset_key(offset)
        for v in self.versions.get(table_id, ()):
            if v.offset is not None and v.key == key:
                return v
        return None

    def record(self, table_id: TableId, version: TableVersion) -> bool:
        """Add a DDL's version (kept in offset order); False when that offset is already there."""
        if version.offset is not None and self.at(table_id, version.offset) is not None:
            return False
        found = self.versions.setdefault(table_id, [])
        found.append(version)
        found.sort(key=lambda v: v.key)
        return True

    def replace(self, table_id: TableId, version: TableVersion) -> None:
        """Put ``version`` in place of the one recorded at its offset (a pending version settled)."""
        found = self.versions[table_id]
        for i, v in enumerate(found):
            if v.key == version.key:
                found[i] = version
                return
        raise KeyError(f"{table_id}: no version at {version.offset}")

    def latest_sources(self) -> list[TableSchema]:
        """Every live table's current source schema (what a restarted stream starts from)."""
        return [v.source for v in (self.latest(t) for t in self.tables) if v.source is not None]

    def latest_sinks(self) -> dict[TableId, TableSchema]:
        return {t: v.sink for t in self.tables if (v := self.latest(t)).sink is not None}

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "tables": [
                {"database": t.database, "table": t.table, "versions": [v.to_dict() for v in self.versions[t]]}
                for t in self.tables
            ],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SchemaHistory":
        if int(d.get("format") or 0) != FORMAT_VERSION:
            raise ValueError(f"schema history format {d.get('format')!r}: this version reads {FORMAT_VERSION}")
        return cls(
            {
                TableId(t["database"], t["table"]): [TableVersion.from_dict(v) for v in t["versions"]]
                for t in d.get("tables") or ()
            }
        )
