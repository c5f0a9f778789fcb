"""Tables and columns as read from the server's information_schema."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True, order=True)
class TableId:
    """A captured table, ``database.table``. Names are kept exactly as the server spells them."""

    database: str
    table: str

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def quoted(self) -> str:
        return f"{quote_ident(self.database)}.{quote_ident(self.table)}"

    @property
    def text(self) -> str:
        """The name as state files keep it, read back by :meth:`parse`: ``db.table``, or
        `` `db`.`table` `` when the database name holds a dot or a backtick (split at the first
        dot, ``shop.eu.orders`` would come back as table ``eu.orders`` of database ``shop``)."""
        if "." in self.database or self.database.startswith("`"):
            return self.quoted
        return str(self)

    @classmethod
    def parse(cls, text: str) -> "TableId":
        """``db.table`` (split at the first dot) or `` `db`.`table` `` (as :attr:`text` writes it)."""
        if text.startswith("`"):
            parts = _backticked(text)
            if parts is not None:
                return cls(*parts)
        database, sep, table = text.partition(".")
        if not sep or not database or not table:
            raise ValueError(f"table name {text!r} must look like 'database.table'")
        return cls(database, table)


def _backticked(text: str) -> tuple[str, str] | None:
    """`` `a`.`b` `` (a doubled backtick stands for one) -> (a, b); None for any other form."""
    names: list[str] = []
    i = 0
    while i < len(text) and text[i] == "`" and len(names) < 2:
        j, buf = i + 1, []
        while True:
            k = text.find("`", j)
            if k < 0:
                return None
            if text[k + 1 : k + 2] == "`":
                buf.append(text[j : k + 1])
                j = k + 2
                continue
            buf.append(text[j:k])
            i = k + 1
            break
        names.append("".join(buf))
        if len(names) == 1:
            if text[i : i + 1] != ".":
                return None
            i += 1
    return (names[0], names[1]) if len(names) == 2 and i == len(text) else None


def quote_ident(name: str) -> str:
    """Backtick-quote an identifier for MySQL/MariaDB SQL."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class Column:
    """One column, from information_schema.COLUMNS.

    ``data_type`` is the lower-case base type (``bigint``, ``varchar``, ``enum`` ...);
    ``column_type`` the full declaration (``bigint(20) unsigned``, ``enum('a','b')``,
    ``tinyint(1)``), which the type mapping needs for display widths, ENUM/SET members
    and UNSIGNED.
    """

    name: str
    ordinal: int
    data_type: str
    column_type: str
    nullable: bool
    charset: str | None = None
    collation: str | None = None
    char_max_length: int | None = None
    numeric_precision: int | None = None
    numeric_scale: int | None = None
    datetime_precision: int | None = None

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Column":
        return cls(**d)


@dataclass(frozen=True)
class TableSchema:
    """What the engine knows about one captured table.

    ``primary_key`` is empty for tables without one. ``chunk_key`` is what the planner
    splits on (the primary key, or the configured chunk key column). ``row_identity`` is
    what corrections and sinks match rows on: the primary key, else a unique key whose
    columns are all NOT NULL, else every column.
    """

    table_id: TableId
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    chunk_key: tuple[str, ...]
    row_identity: tuple[str, ...]
    engine: str | None = None
    approx_rows: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)
    # The fate of zero and invalid dates (source option zero_dates, cdc/types.py): "null", or
    # "text" -- DATE/DATETIME/TIMESTAMP columns are then captured as their text, literal kept.
    zero_dates: str = "null"

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.table_id} has no column {name!r}")

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "database": self.table_id.database,
            "table": self.table_id.table,
            "columns": [c.to_dict() for c in self.columns],
            "primary_key": list(self.primary_key),
            "chunk_key": list(self.chunk_key),
            "row_identity": list(self.row_identity),
            "engine": self.engine,
            "approx_rows": self.approx_rows,
            **({"zero_dates": self.zero_dates} if self.zero_dates != "null" else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TableSchema":
        return cls(
            table_id=TableId(d["database"], d["table"]),
            columns=tuple(Column.from_dict(c) for c in d["columns"]),
            primary_key=tuple(d["primary_key"]),
            chunk_key=tuple(d["chunk_key"]),
            row_identity=tuple(d["row_identity"]),
            engine=d.get("engine"),
            approx_rows=int(d.get("approx_rows") or 0),
            zero_dates=d.get("zero_dates") or "null",
        )
