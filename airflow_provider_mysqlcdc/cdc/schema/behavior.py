"""What a sink does about one schema change, per ``schema_change_behavior`` (Flink CDC 3's five).

The change arrives as two source versions of a table (before and after the DDL, see
``history.py``) plus what the statement said that the shapes cannot: which column was
renamed (rather than dropped and added), a truncate, a drop. From those and the sink's
current shape this module plans *sink actions* and the sink's next shape:

``exception``   stop at the DDL (``SchemaChangeStopped``): nothing after it is written.
``evolve``      the sink follows the source exactly; a change the sink cannot make fails
                (``SchemaEvolutionError``, naming sink, table, statement and offset).
``try_evolve``  as evolve; where the sink cannot, the lenient way, and a note says so.
``lenient``     never lose data, never break readers: added columns are added (nullable),
                dropped columns stay and get NULL in new rows, a renamed column is added
                under its new name holding the old column's values (the old one stays, and
                new rows leave it NULL), a type only changes when it widens, truncate and
                drop table are logged and not applied. (The default.) Flink CDC adds the
                renamed column empty; copying the values keeps the sink equal to the
                source on every source column.
``ignore``      the sink's shape never changes: new columns are not written, dropped ones
                get NULL.

Rows are then written *projected* onto the sink's shape: by name, missing columns NULL,
extra columns left out, values cast to the sink column's type.
"""

from __future__ import annotations

import decimal
import re
from dataclasses import dataclass, replace
from typing import Any, Collection, Mapping, Sequence

import pyarrow as pa

from ..errors import CdcError, ConfigError
from ..model import Column, TableSchema
from ..source.statements import NOT_EXACT_MARKER
from ..types import map_column

BEHAVIORS = ("exception", "evolve", "try_evolve", "lenient", "ignore")
DEFAULT_BEHAVIOR = "lenient"

# Sink action kinds
ADD_COLUMN = "add_column"
DROP_COLUMN = "drop_column"
RENAME_COLUMN = "rename_column"
ALTER_COLUMN_TYPE = "alter_column_type"
TRUNCATE = "truncate_table"
DROP_TABLE = "drop_table"
ACTION_KINDS = (ADD_COLUMN, DROP_COLUMN, RENAME_COLUMN, ALTER_COLUMN_TYPE, TRUNCATE, DROP_TABLE)
# A captured name that comes back (CREATE TABLE, a rename into it) after the sink dropped its
# table: the sink table is created again, empty, in the new shape. Every sink that can drop a
# table can create one, so this is no capability of its own.
CREATE_TABLE = "create_table"

# In the message of a stop the watchdog must not restart (it would stop again at the same DDL).
STOPPED_MARKER = "stopped at a schema change"


class SchemaChangeStopped(CdcError):
    """``exception``: the stream stopped at a DDL; everything before it is in the sink."""


NO_RELAUNCH = f" ({NOT_EXACT_MARKER} with these settings: the watchdog does not relaunch it.)"


class SchemaEvolutionError(CdcError):
    """``evolve``: the sink cannot make a change the source made (a relaunch would stop again)."""

    def __init__(self, message: str) -> None:
        super().__init__(message + NO_RELAUNCH)


def check_behavior(value: str) -> str:
    v = (value or DEFAULT_BEHAVIOR).strip().lower()
    if v not in BEHAVIORS:
        raise ConfigError(
            f"schema_change_behavior: found {value!r}, need one of {', '.join(BEHAVIORS)}. "
            f"Fix: set it to one of those ({DEFAULT_BEHAVIOR} keeps every change and never breaks "
            "readers)."
        )
    return v


@dataclass(frozen=True)
class SinkAction:
    """One change to a sink table. ``column`` is the new definition (add, alter type), ``name``
    the column acted on, ``new_name`` a rename's target; ``fill`` the value existing rows get in
    an added column (the DDL's constant DEFAULT, or MySQL's implicit one for NOT NULL columns)."""

    kind: str
    name: str | None = None
    column: Column | None = None
    new_name: str | None = None
    fill: Any = None
    copy_from: str | None = None
    refill: bool = False  # the sink kept a column of this name: every existing row gets ``fill``

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "column": self.column.to_dict() if self.column else None,
            "new_name": self.new_name,
            "fill": self.fill,
            "copy_from": self.copy_from,
            "refill": self.refill,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SinkAction":
        return cls(
            d["kind"],
            d.get("name"),
            Column.from_dict(d["column"]) if d.get("column") else None,
            d.get("new_name"),
            d.get("fill"),
            d.get("copy_from"),
            bool(d.get("refill")),
        )

    def describe(self) -> str:
        if self.kind == ADD_COLUMN:
            assert self.column is not None
            fill = f", existing rows {self.fill!r}" if self.fill is not None else ""
            if self.copy_from:
                fill = f", existing rows take the values of {self.copy_from}"
            return f"add column {self.column.name} {self.column.column_type}{fill}"
        if self.kind == RENAME_COLUMN:
            return f"rename column {self.name} to {self.new_name}"
        if self.kind == ALTER_COLUMN_TYPE:
            assert self.column is not None
            return f"change column {self.name} to {self.column.column_type}"
        if self.kind == DROP_COLUMN:
            return f"drop column {self.name}"
        return self.kind.replace("_", " ")


@dataclass(frozen=True)
class ColumnDiff:
    """How a table's columns changed between two versions (names compared case-insensitively,
    as MySQL does)."""

    added: tuple[Column, ...]
    dropped: tuple[str, ...]
    renamed: tuple[tuple[str, str], ...]
    retyped: tuple[tuple[Column, Column], ...]  # (old, new)

    @property
    def empty(self) -> bool:
        return not (self.added or self.dropped or self.renamed or self.retyped)


def _same_type(a: Column, b: Column) -> bool:
    return (
        a.data_type,
        a.column_type.lower(),
        a.numeric_precision,
        a.numeric_scale,
        a.datetime_precision,
        a.char_max_length,
    ) == (
        b.data_type,
        b.column_type.lower(),
        b.numeric_precision,
        b.numeric_scale,
        b.datetime_precision,
        b.char_max_length,
    )


def column_diff(old: TableSchema, new: TableSchema, renames: Sequence[tuple[str, str]] = ()) -> ColumnDiff:
    """The columns added, dropped, renamed and retyped from ``old`` to ``new``.

    ``renames`` are what the statement said (old name, new name), in order; a chain
    ``a -> b -> c`` counts as ``a -> c``. Without them a rename looks like a drop and an add.
    """
    old_by = {c.name.lower(): c for c in old.columns}
    new_by = {c.name.lower(): c for c in new.columns}
    mapping: dict[str, str] = {}  # old lower name -> new lower name
    for a, b in renames:
        src = next((k for k, v in mapping.items() if v == a.lower()), a.lower())
        mapping[src] = b.lower()
    renamed = []
    for a, b in mapping.items():
        if a in old_by and b in new_by and a != b:
            renamed.append((old_by[a].name, new_by[b].name))
    moved_from = {a for a, b in mapping.items() if a in old_by and b in new_by}
    moved_to = {mapping[a] for a in moved_from}
    # A name a renamed column moved to is not the old column of that name any more (``DROP a, CHANGE b a
    # ...``: old a is dropped), and a name a renamed column left may be taken by a new column (``RENAME
    # COLUMN a TO b, ADD a ...``: the new a is added).
    added = tuple(c for k, c in new_by.items() if k not in moved_to and (k not in old_by or k in moved_from))
    dropped = tuple(c.name for k, c in old_by.items() if k not in moved_from and (k not in new_by or k in moved_to))
    retyped = []
    for k, c in old_by.items():
        target = mapping[k] if k in moved_from else (k if k in new_by and k not in moved_to else None)
        if target is not None and not _same_type(c, new_by[target]):
            retyped.append((c, new_by[target]))
    return ColumnDiff(added, dropped, tuple(renamed), tuple(retyped))


# --- widening ---------------------------------------------------------------------------------


def _arrow(column: Column) -> pa.DataType:
    return map_column(column, "UTC").arrow_type


_INT_RANK = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}


def widens(old: Column, new: Column) -> bool:
    """True when every value of ``old``'s type is a value of ``new``'s in the sink (integers to
    wider integers or to a decimal that holds them, decimals to more integer and fraction digits,
    FLOAT to DOUBLE, text to text, binary to binary, the same type)."""
    a, b = _arrow(old), _arrow(new)
    if a == b:
        return True
    if a in _INT_RANK and b in _INT_RANK:
        return _INT_RANK[b] >= _INT_RANK[a]
    if a in _INT_RANK and pa.types.is_decimal(b):
        digits = {8: 3, 16: 5, 32: 10, 64: 19}[_INT_RANK[a]]
        return b.precision - b.scale >= digits
    if pa.types.is_decimal(a) and pa.types.is_decimal(b):
        return b.scale >= a.scale and b.precision - b.scale >= a.precision - a.scale
    if a == pa.float32() and b == pa.float64():
        return True
    if pa.types.is_string(a) and pa.types.is_string(b):
        return True
    if pa.types.is_binary(a) and pa.types.is_binary(b):
        return True
    return False


# --- implicit defaults --------------------------------------------------------------------------


def fill_value(
    column: Column, default_sql: str | None, has_default: bool, text_dates: bool = False
) -> tuple[Any, str | None]:
    """What rows that existed before ``ADD COLUMN`` hold in it, as a canonical value, and a note
    when that cannot be known (a non-constant DEFAULT such as CURRENT_TIMESTAMP). ``text_dates``:
    the table's zero_dates is "text" (date columns hold their literal, zero dates too)."""
    dated = text_dates and column.data_type in ("date", "datetime", "timestamp")
    if has_default and default_sql is not None:
        literal = _literal(default_sql)
        if literal is _NOT_CONSTANT:
            return None, (
                f"column {column.name}: DEFAULT {default_sql} is not a constant; rows that existed "
                "before the ALTER get NULL in the sink"
            )
        if dated and literal is not None:
            return _date_text(column, str(literal)), None
        return _canonical(column, literal), None
    if column.nullable:
        return None, None
    # NOT NULL without DEFAULT: the server fills existing rows with the type's implicit default.
    t = column.data_type
    if t in (
        "tinyint",
        "smallint",
        "mediumint",
        "int",
        "integer",
        "bigint",
        "decimal",
        "numeric",
        "float",
        "double",
        "real",
        "bit",
        "year",
    ):
        return _canonical(column, "0"), None
    if t in (
        "char",
        "varchar",
        "tinytext",
        "text",
        "mediumtext",
        "longtext",
        "binary",
        "varbinary",
        "tinyblob",
        "blob",
        "mediumblob",
        "longblob",
        "set",
    ):
        return _canonical(column, ""), None
    if t == "enum":
        members = _enum_members(column)
        return (members[0] if members else ""), None
    if t == "time":
        return 0, None
    if dated:  # the implicit default is the zero date, kept as its literal
        return _date_text(column, "0"), None
    return None, None  # zero dates are NULL on both paths


def _date_text(column: Column, literal: str) -> str:
    """A date constant as the server prints the column (cdc/types.py's text form)."""
    from ..types import date_text, datetime_text

    parts = [p for p in re.split(r"[^0-9]+", literal.strip()) if p]
    y, m, d, h, mi, s = ([int(p) for p in parts[:6]] + [0] * 6)[:6]
    if column.data_type == "date":
        return date_text(y, m, d)
    us = int(parts[6].ljust(6, "0")[:6]) if len(parts) > 6 else 0
    return datetime_text(y, m, d, h, mi, s, us, column.datetime_precision or 0)


class _NotConstant:
    pass


_NOT_CONSTANT = _NotConstant()


def _literal(sql: str) -> Any:
    """A DEFAULT clause's constant as text (None for NULL), or ``_NOT_CONSTANT``."""
    import sqlglot
    from sqlglot import exp

    try:
        node = sqlglot.parse_one(f"SELECT {sql}", read="mysql").expressions[0]
    except Exception:
        return _NOT_CONSTANT
    negative = False
    if isinstance(node, exp.Neg):
        negative, node = True, node.this
    if isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return "1" if node.this else "0"
    if isinstance(node, exp.Literal):
        text = str(node.this)
        return ("-" + text) if negative else text
    return _NOT_CONSTANT


def _enum_members(column: Column) -> list[str]:
    from ..types import _set_members

    try:
        return list(_set_members(column.column_type))
    except ValueError:
        return []


def _canonical(column: Column, text: str | None) -> Any:
    """The JSON-safe value of a constant for this column (numbers as numbers or decimal text)."""
    if text is None:
        return None
    mp = map_column(column, "UTC")
    k = mp.kind
    try:
        if k in ("int", "year"):
            return int(_integral(text))
        if k == "time":
            return _time_micros(text, column.datetime_precision or 0)
        if k in ("uint64", "bit"):
            return str(_integral(text))
        if k in ("decimal", "decimal_text"):
            return text
        if k in ("float", "double"):
            return float(text)
    except (ValueError, ArithmeticError):
        return None
    if k in ("datetime", "timestamp", "date"):
        return None if text.startswith("0000") else text
    if k == "binary":
        return None  # binary constants are not filled (rare); new rows carry their values
    return text


def _integral(text: str) -> decimal.Decimal:
    """A numeric constant as the server stores it in an integer column: rounded half away from zero
    (DEFAULT 5.7 is 6), not truncated."""
    return decimal.Decimal(text.strip()).to_integral_value(rounding=decimal.ROUND_HALF_UP)


_TIME_TEXT = re.compile(r"(-)?(?:(\d+) )?(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?(?:\.(\d+))?")


def _time_micros(text: str, fsp: int) -> int | None:
    """A TIME constant (``'[-][D ]HH:MM[:SS[.f]]'``, ``'HHMMSS[.f]'``) as signed microseconds, its fraction
    rounded to the column's ``fsp`` as the server stores it; None when it is not one of those forms."""
    m = _TIME_TEXT.fullmatch(text.strip())
    if m is None:
        return None
    sign, days, first, minutes, seconds, frac = m.groups()
    if days is None and minutes is None:  # no colon: HHMMSS, MMSS or SS
        n = int(first)
        hours, mins, secs = n // 10000, n // 100 % 100, n % 100
    else:
        hours, mins, secs = int(first) + 24 * int(days or 0), int(minutes or 0), int(seconds or 0)
    if mins > 59 or secs > 59:
        return None
    fraction = decimal.Decimal("0." + (frac or "0")).quantize(
        decimal.Decimal(1).scaleb(-fsp), rounding=decimal.ROUND_HALF_UP
    )
    us = ((hours * 60 + mins) * 60 + secs) * 1_000_000 + int(fraction * 1_000_000)
    return -us if sign else us


# --- planning ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkPlan:
    actions: tuple[SinkAction, ...]
    sink: TableSchema | None  # the sink table after the actions (None: dropped)
    notes: tuple[str, ...] = ()


def _fallback(behavior: str) -> str:
    return "lenient" if behavior == "try_evolve" else behavior


def plan_columns(
    behavior: str,
    sink_name: str,
    can: Collection[str],
    sink: TableSchema,
    old: TableSchema,
    new: TableSchema,
    renames: Sequence[tuple[str, str]],
    fills: Mapping[str, Any],
    where: str,
    ddl: str,
) -> SinkPlan:
    """Sink actions for a change of columns from ``old`` to ``new`` (see the module docstring)."""
    diff = column_diff(old, new, renames)
    if diff.empty or behavior == "ignore":
        keep = _with_identity(sink, new)
        return SinkPlan((), keep, ("ignored: the sink table keeps its columns",) if not diff.empty else ())
    plan = _ColumnPlan(behavior, sink_name, can, sink, new, fills, where, ddl)
    # Drops first: a statement may drop a column and rename another to its name (DROP a, CHANGE b a ...),
    # and the sink cannot take the name before the old column is gone.
    plan.drop(diff.dropped)
    plan.rename(diff.renamed)
    plan.retype(diff.retyped)
    for c in diff.added:
        plan.add(c)
    columns = plan.columns
    out = _with_identity(replace(sink, columns=tuple(replace(c, ordinal=i + 1) for i, c in enumerate(columns))), new)
    return SinkPlan(tuple(plan.actions), out, tuple(plan.notes))


class _ColumnPlan:
    """``plan_columns``' working state: the sink table's columns as the actions so far leave them,
    the actions and the notes; one method per kind of column change, applied in the order the
    sink must take them."""

    def __init__(
        self,
        behavior: str,
        sink_name: str,
        can: Collection[str],
        sink: TableSchema,
        new: TableSchema,
        fills: Mapping[str, Any],
        where: str,
        ddl: str,
    ) -> None:
        self.behavior, self.sink_name, self.can = behavior, sink_name, can
        self.new, self.fills, self.where, self.ddl = new, fills, where, ddl
        self.columns: list[Column] = list(sink.columns)
        self.actions: list[SinkAction] = []
        self.notes: list[str] = []

    def find(self, name: str) -> int | None:
        for i, c in enumerate(self.columns):
            if c.name.lower() == name.lower():
                return i
        return None

    @staticmethod
    def nullable(c: Column) -> Column:
        return replace(c, nullable=True)

    def unable(self, what: str) -> str:
        return f"{self.sink_name} cannot {what}"

    def add(self, c: Column, copy_from: str | None = None) -> None:
        fill, note = self.fills.get(c.name.lower(), (None, None))
        kept = self.find(c.name)
        if kept is not None:  # lenient kept a column of that name (dropped earlier, now back)
            if copy_from:
                self.notes.append(
                    f"column {c.name}: the sink table already has a column of that name, which keeps "
                    f"its values; the values of {copy_from} are not copied into it"
                )
                return
            # the source's rows all got the new column's value (its DEFAULT, else NULL): so do the sink's,
            # whatever the kept column held
            if note:
                self.notes.append(note)
            column = self.columns[kept]
            self.actions.append(SinkAction(ADD_COLUMN, column.name, column, fill=fill, refill=True))
            return
        if note:
            self.notes.append(note)
        self.actions.append(SinkAction(ADD_COLUMN, c.name, self.nullable(c), fill=fill, copy_from=copy_from))
        self.columns.append(self.nullable(c))

    def decide(self, kind: str, what: str) -> str:
        """'do' when the behaviour and the sink allow it, else 'lenient' (or raise under evolve)."""
        if self.behavior in ("evolve", "try_evolve") and kind in self.can:
            return "do"
        if self.behavior == "evolve":
            raise SchemaEvolutionError(
                f"{self.unable(what)} (schema_change_behavior 'evolve'), for the DDL on {self.new.table_id} at "
                f"{self.where}: {_short(self.ddl)!r}. Every change before it is in the sink; nothing after it was "
                "written. Fix: set schema_change_behavior to 'try_evolve' (the sink then takes the change the "
                "lenient way) or 'lenient', and restart the stream."
            )
        if self.behavior == "try_evolve":
            self.notes.append(f"{self.unable(what)}: done the lenient way instead")
        return "lenient"

    def drop(self, dropped: Sequence[str]) -> None:
        for name in dropped:
            i = self.find(name)
            if i is None:
                continue
            if self.new.row_identity and name.lower() in (c.lower() for c in self.new.row_identity):
                continue
            if self.decide(DROP_COLUMN, f"drop column {name}") == "do":
                self.actions.append(SinkAction(DROP_COLUMN, self.columns[i].name))
                del self.columns[i]
            elif self.behavior == "lenient" or self.behavior == "try_evolve":
                self.columns[i] = self.nullable(self.columns[i])

    def rename(self, renamed: Sequence[tuple[str, str]]) -> None:
        columns = self.columns
        waiting = {a.lower(): a for a, _ in renamed}  # renamed column -> its name in the sink now
        for a, b in renamed:
            i = self.find(waiting.pop(a.lower()))
            if i is None:
                continue
            src_new = next(c for c in self.new.columns if c.name.lower() == b.lower())
            how = self.decide(RENAME_COLUMN, f"rename column {a} to {b}")
            j = self.find(b)
            if how == "do" and j is not None and j != i:
                holder = next((k for k, v in waiting.items() if v.lower() == columns[j].name.lower()), None)
                if holder is not None:  # a swap: the column holding the name is renamed later; move it aside
                    tmp = _free_name(columns[j].name, [c.name for c in columns] + [y for _, y in renamed])
                    self.actions.append(SinkAction(RENAME_COLUMN, columns[j].name, new_name=tmp))
                    columns[j] = replace(columns[j], name=tmp)
                    waiting[holder] = tmp
                elif self.behavior == "evolve":
                    raise SchemaEvolutionError(
                        f"{self.sink_name} cannot rename column {a} to {b}: the sink table already has a column {b} "
                        f"(kept from an earlier change), for the DDL on {self.new.table_id} at {self.where}: "
                        f"{_short(self.ddl)!r}. Fix: drop or rename that column in the sink table, or set "
                        "schema_change_behavior to 'try_evolve' or 'lenient', and restart the stream."
                    )
                else:
                    how = "lenient"
            if how == "do":
                self.actions.append(SinkAction(RENAME_COLUMN, columns[i].name, new_name=b))
                columns[i] = replace(columns[i], name=b)
            else:  # the new name is added with the old column's values; the old column stays as it is
                self.add(src_new, copy_from=columns[i].name)
                columns[i] = self.nullable(columns[i])

    def retype(self, retyped: Sequence[tuple[Column, Column]]) -> None:
        columns = self.columns
        for old_c, new_c in retyped:
            i = self.find(new_c.name) if self.find(new_c.name) is not None else self.find(old_c.name)
            if i is None:
                continue
            current = columns[i]
            if _same_type(current, new_c):
                continue
            if self.behavior in ("evolve", "try_evolve"):
                what = f"change column {new_c.name} from {current.column_type} to {new_c.column_type}"
                if self.decide(ALTER_COLUMN_TYPE, what) == "do":
                    self.actions.append(
                        SinkAction(ALTER_COLUMN_TYPE, current.name, replace(new_c, name=current.name, nullable=True))
                    )
                    columns[i] = replace(new_c, name=current.name, nullable=current.nullable or new_c.nullable)
                    continue
            if widens(current, new_c):
                if _arrow(current) == _arrow(new_c):
                    columns[i] = replace(new_c, name=current.name, nullable=True)  # same sink type: nothing to do
                elif ALTER_COLUMN_TYPE in self.can:
                    self.actions.append(
                        SinkAction(ALTER_COLUMN_TYPE, current.name, replace(new_c, name=current.name, nullable=True))
                    )
                    columns[i] = replace(new_c, name=current.name, nullable=True)
                else:
                    raise SchemaEvolutionError(
                        f"{self.unable('widen column ' + current.name)} from {current.column_type} to "
                        f"{new_c.column_type} (DDL on {self.new.table_id} at {self.where}: {_short(self.ddl)!r}); its "
                        "new values may not fit. Fix: recreate the sink table (trigger the pipeline with reset=true) "
                        "or use another sink."
                    )
            else:  # a narrowing or another type: the sink column keeps holding what it held
                self.notes.append(
                    f"column {current.name}: {new_c.column_type} does not widen {current.column_type}; the sink "
                    "keeps its type and new values are converted to it"
                )


def _free_name(name: str, taken: Sequence[str]) -> str:
    """A temporary column name (for a swap of names) no column has or gets."""
    low = {t.lower() for t in taken}
    n = 0
    while f"{name}#mysqlcdc-swap-{n}".lower() in low:
        n += 1
    return f"{name}#mysqlcdc-swap-{n}"


def _with_identity(sink: TableSchema, new: TableSchema) -> TableSchema:
    """The sink keeps matching rows on the source's identity (renamed with its columns)."""
    names = {c.name.lower(): c.name for c in sink.columns}
    ident = tuple(names.get(c.lower(), c) for c in new.row_identity)
    if all(c.lower() in names for c in new.row_identity):
        return replace(
            sink,
            row_identity=ident,
            primary_key=tuple(names.get(c.lower(), c) for c in new.primary_key if c.lower() in names),
        )
    return sink


def plan_returning_table(
    behavior: str,
    sink_name: str,
    can: Collection[str],
    sink: TableSchema | None,
    new: TableSchema,
    where: str,
    ddl: str,
) -> SinkPlan:
    """A captured name comes back (``CREATE TABLE``, a rename into it) with the shape ``new``.

    The sink dropped its table: it is created again, empty (the source's table is new, or its
    rows were never this table's). The sink kept the old table (the drop or rename was only
    logged): its columns are planned like an ``ALTER`` from what it holds, and its old rows stay.
    """
    if sink is None:
        return SinkPlan((SinkAction(CREATE_TABLE),), new, (f"{new.table_id} created again in the sink, empty",))
    plan = plan_columns(behavior, sink_name, can, sink, sink, new, (), {}, where, ddl)
    return SinkPlan(
        plan.actions,
        plan.sink,
        plan.notes
        + (
            f"{new.table_id} is a table that came under a captured name; the sink table keeps the rows it had under "
            "that name (re-snapshot the table if the two differ)",
        ),
    )


def plan_table_event(
    behavior: str, sink_name: str, can: Collection[str], kind: str, sink: TableSchema, where: str, ddl: str
) -> SinkPlan:
    """Truncate or drop of a captured table."""
    what = "truncate" if kind == TRUNCATE else "drop"
    if behavior in ("evolve", "try_evolve") and kind in can:
        return SinkPlan((SinkAction(kind),), None if kind == DROP_TABLE else sink)
    if behavior == "evolve":
        raise SchemaEvolutionError(
            f"{sink_name} cannot {what} a table (schema_change_behavior 'evolve'), for the DDL on {sink.table_id} at "
            f"{where}: {_short(ddl)!r}. Fix: set schema_change_behavior to 'try_evolve' or 'lenient'."
        )
    return SinkPlan(
        (), sink, (f"{what} of {sink.table_id} logged, not applied to the sink (schema_change_behavior '{behavior}')",)
    )


def stop(table: Any, where: str, ddl: str) -> SchemaChangeStopped:
    return SchemaChangeStopped(
        f"{table}: {STOPPED_MARKER} at {where}: {_short(ddl)!r} (schema_change_behavior 'exception'), so "
        f"{NOT_EXACT_MARKER} without a decision; every change before it is in the sink and nothing after it was "
        "written. Fix: change the sink table yourself if you want the change, then restart the stream with "
        "schema_change_behavior set to 'lenient', 'try_evolve', 'evolve' or 'ignore' (or reload the table)."
    )


def _short(sql: str, n: int = 200) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= n else text[: n - 3] + "..."
