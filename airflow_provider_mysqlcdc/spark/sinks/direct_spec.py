"""The interface of a sink's direct stream write (see ``direct.py`` for the two kinds and how they travel).

Kept apart from ``direct.py``, which knows every kind: the kinds implement this interface, and
the registry imports the kinds, so neither imports the other.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable

import numpy as np
import pyarrow as pa


class DirectSpec(ABC):
    """What the binlog source's tasks need to do a sink's direct stream write."""

    kind: ClassVar[str]

    @abstractmethod
    def options(self) -> dict[str, Any]:
        """The spec's settings, JSON-able (``to_json`` adds the kind)."""

    @classmethod
    @abstractmethod
    def from_options(cls, options: dict[str, Any]) -> "DirectSpec": ...

    @abstractmethod
    def arrow_schema(self) -> pa.Schema:
        """The records the source yields in this mode (non-nullable fields)."""

    @abstractmethod
    def write_range(self, items: Iterable["TableRows | DdlMark"], batch_id: int, part: int) -> pa.RecordBatch:
        """Do the task's share for one binlog range: its rows (``TableRows``, each in the layout
        of the table version it was logged with) and DDL (``DdlMark``) in binlog order. Return its
        records: per table and segment between DDLs, one with a ``changes`` count and the
        ``columns`` it was logged with; per DDL, one with the statement in ``ddl``."""

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, **self.options()}, sort_keys=True)

    def spark_schema(self) -> Any:
        """``arrow_schema`` as Spark's StructType (pyspark imported on use)."""
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self.arrow_schema())


# --- what a range's task hands a spec: rows of one table version, and the DDL between them ----


@dataclass(frozen=True)
class TableRows:
    """Source rows of one table, in the layout of the table version they were logged with.

    ``slot`` is that version's ``SourceLayout`` slot (its ``schema`` is the table as the
    binlog's TABLE_MAP described it, its ``column`` the struct column holding the images).
    """

    table_id: Any
    slot: Any
    rows: pa.RecordBatch


@dataclass(frozen=True)
class DdlMark:
    """A DDL on captured tables inside the range, at its place in the stream (``seq`` is the
    ``_seq`` a change row at the statement's offset would get)."""

    tables: tuple[Any, ...]
    database: str
    sql: str
    offset: dict
    seq: int

    def to_json(self) -> str:
        return json.dumps(
            {
                "tables": [[t.database, t.table] for t in self.tables],
                "database": self.database,
                "sql": self.sql,
                "offset": self.offset,
                "seq": self.seq,
            },
            sort_keys=True,
        )


def first_at(rows: pa.RecordBatch) -> str:
    """``file:position`` of a source batch's first row (for messages that name a place in the binlog)."""
    if not rows.num_rows:
        return ""
    return f"{rows.column('binlog_file')[0].as_py()}:{rows.column('binlog_pos')[0].as_py()}"


def columns_signature(schema: Any) -> str:
    """The columns a row image holds (name, type as declared): what a data record was logged with,
    so the driver can check it against the schema version it expects there."""
    return json.dumps([c.to_dict() for c in schema.columns], sort_keys=True)


class Segments:
    """Cuts one range's rows of each table at that table's DDLs: rows on the two sides of a DDL
    are never reduced or written together (they may have different shapes)."""

    def __init__(self) -> None:
        self._cuts: dict[Any, list[int]] = {}

    def add(self, mark: DdlMark) -> None:
        for t in mark.tables:
            self._cuts.setdefault(t, []).append(mark.seq)

    def split(self, table_id: Any, seq: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """(segment number, row positions) of rows with these ``_seq`` values (ascending or not)."""
        cuts = self._cuts.get(table_id)
        if not cuts or not len(seq):
            return [(len(cuts or ()), np.arange(len(seq)))]
        seg = np.searchsorted(np.asarray(sorted(cuts), np.int64), seq)
        if seg.min() == seg.max():
            return [(int(seg[0]), np.arange(len(seq)))]
        return [(int(s), np.flatnonzero(seg == s)) for s in np.unique(seg)]
