"""Which tables a pipeline captures, and what the engine needs to know about each.

Table patterns follow Flink CDC: an exact ``db.table`` name, or a regular expression
matched against the whole ``db.table`` name (``shop\\.order_.*``, ``shop.*``). A pattern
without regex metacharacters other than ``.`` is an exact name, so ``shop.orders`` does not
also capture ``shopXorders``.

Everything comes from information_schema in a handful of queries for all tables at once,
not per table: discovery runs in the Airflow plan task against servers with thousands of
tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Iterable, Mapping, Sequence

from ..errors import ConfigError
from ..model import Column, TableId, TableSchema
from ..types import map_table
from .old_temporals import refuse_undecodable_old_temporals, show_old_temporals
from .table_patterns import TablePattern

SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


@dataclass
class _TableInfo:
    """Raw information_schema rows of one table, before the keys are decided."""

    table_id: TableId
    engine: str | None
    approx_rows: int
    columns: list[Column] = field(default_factory=list)
    # index name -> (non_unique, [column names in index order])
    indexes: dict[str, tuple[bool, list[str]]] = field(default_factory=dict)


# --- patterns -------------------------------------------------------------------------------


def _patterns(texts: Iterable[str], what: str) -> list[TablePattern]:
    if isinstance(texts, str):
        texts = [texts]
    out = []
    for t in texts:
        if not isinstance(t, str) or not t.strip():
            raise ConfigError(f"{what}: found {t!r}, need 'db.table' or a regex. Fix: remove empty patterns.")
        out.append(TablePattern(t.strip()))
    return out


# --- information_schema ---------------------------------------------------------------------


def _text(v: Any) -> Any:
    """MySQL 8 returns some information_schema columns as bytes."""
    return v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else v


def _query(conn, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql, tuple(args) or None)
        return [tuple(_text(x) for x in row) for row in cur.fetchall()]


def _placeholders(n: int) -> str:
    return ", ".join(["%s"] * n)


def _list_base_tables(conn) -> list[_TableInfo]:
    rows = _query(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE, TABLE_ROWS FROM information_schema.TABLES "
        f"WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ({_placeholders(len(SYSTEM_SCHEMAS))}) "
        "ORDER BY TABLE_SCHEMA, TABLE_NAME",
        sorted(SYSTEM_SCHEMAS),
    )
    return [_TableInfo(TableId(db, t), engine, int(n or 0)) for db, t, engine, n in rows]


def _load_details(conn, infos: Sequence[_TableInfo]) -> None:
    """Fill columns and indexes of ``infos`` with two queries per database involved."""
    by_id = {i.table_id: i for i in infos}
    databases = sorted({i.table_id.database for i in infos})
    if not databases:
        return
    ph = _placeholders(len(databases))
    for row in _query(
        conn,
        f"SELECT TABLE_SCHEMA, TABLE_NAME, {_COLUMN_FIELDS} FROM information_schema.COLUMNS "
        f"WHERE TABLE_SCHEMA IN ({ph}) ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
        databases,
    ):
        info = by_id.get(TableId(row[0], row[1]))
        if info is None:
            continue
        info.columns.append(_column(row[2:]))
    for db, table, index, non_unique, _seq, col in _query(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME "
        f"FROM information_schema.STATISTICS WHERE TABLE_SCHEMA IN ({ph}) "
        "ORDER BY TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
        databases,
    ):
        info = by_id.get(TableId(db, table))
        if info is None or col is None:  # functional index parts have no column
            continue
        entry = info.indexes.setdefault(index, (bool(int(non_unique)), []))
        entry[1].append(col)


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


_COLUMN_FIELDS = (
    "COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_SET_NAME, "
    "COLLATION_NAME, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION"
)


def _column(row: Sequence[Any]) -> Column:
    """A Column from the ``_COLUMN_FIELDS`` of one information_schema.COLUMNS row."""
    return Column(
        name=row[0],
        ordinal=int(row[1]),
        data_type=str(row[2]).lower(),
        column_type=str(row[3]),
        nullable=str(row[4]).upper() == "YES",
        charset=row[5],
        collation=row[6],
        char_max_length=_int(row[7]),
        numeric_precision=_int(row[8]),
        numeric_scale=_int(row[9]),
        datetime_precision=_int(row[10]),
    )


# --- keys -----------------------------------------------------------------------------------


def _unique_indexes(info: _TableInfo) -> list[tuple[str, list[str]]]:
    """Unique, non-primary indexes, fewest columns first (then by name, deterministically)."""
    out = [(name, cols) for name, (non_unique, cols) in info.indexes.items() if not non_unique and name != "PRIMARY"]
    return sorted(out, key=lambda x: (len(x[1]), x[0]))


def _row_identity(info: _TableInfo, primary_key: tuple[str, ...]) -> tuple[str, ...]:
    if primary_key:
        return primary_key
    nullable = {c.name for c in info.columns if c.nullable}
    for _name, cols in _unique_indexes(info):
        if not any(c in nullable for c in cols):
            return tuple(cols)
    return tuple(c.name for c in info.columns)


def _suggest_columns(info: _TableInfo) -> list[str]:
    """Columns worth splitting on: single-column unique indexes first, then indexed columns."""
    out: list[str] = []
    for _name, cols in _unique_indexes(info):
        if len(cols) == 1 and cols[0] not in out:
            out.append(cols[0])
    for _name, (_nu, cols) in sorted(info.indexes.items()):
        if cols and cols[0] not in out:
            out.append(cols[0])
    return out


def _no_key_error(info: _TableInfo) -> ConfigError:
    t = info.table_id
    suggestions = _suggest_columns(info)
    column = suggestions[0] if suggestions else "<column>"
    hint = (
        f" Good candidates (unique or indexed): {', '.join(suggestions)}."
        if suggestions
        else " The table has no index: pick a column with (nearly) unique values and consider "
        "indexing it, or the planner will scan the table once per chunk."
    )
    return ConfigError(
        f"table {t} has no primary key, so the planner does not know how to split it into chunks. "
        f"Fix: set chunk_key_columns={{'{t}': '{column}'}} (or add a primary key).{hint}"
    )


def _build_schema(info: _TableInfo, chunk_key_column: str | None, zero_dates: str = "null") -> TableSchema:
    t = info.table_id
    pk = tuple(info.indexes["PRIMARY"][1]) if "PRIMARY" in info.indexes else ()
    names = [c.name for c in info.columns]
    if chunk_key_column is not None:
        if chunk_key_column not in names:
            raise ConfigError(
                f"chunk_key_columns['{t}'] = {chunk_key_column!r}: table {t} has no such column. "
                f"Fix: use one of its columns: {', '.join(names)}."
            )
        chunk_key: tuple[str, ...] = (chunk_key_column,)
    elif pk:
        chunk_key = pk
    else:
        raise _no_key_error(info)
    return TableSchema(
        table_id=t,
        columns=tuple(info.columns),
        primary_key=pk,
        chunk_key=chunk_key,
        row_identity=_row_identity(info, pk),
        engine=info.engine,
        approx_rows=info.approx_rows,
        zero_dates=zero_dates,
    )


# --- public API -----------------------------------------------------------------------------


def discover_tables(
    conn,
    include: Sequence[str],
    exclude: Sequence[str] = (),
    chunk_key_columns: Mapping[str, str] | None = None,
    zero_dates: str = "null",
) -> list[TableSchema]:
    """The schemas of every base table matching ``include`` and no ``exclude`` pattern.

    Fails (ConfigError) naming every problem at once, so a user fixes the table list in one
    go: include patterns that match no table (saying when they match a view, or differ only
    in case), nothing left after exclusion, ``chunk_key_columns`` entries for tables not
    captured or columns that do not exist, and tables with neither a primary key nor a
    configured chunk key.
    """
    chunk_key_columns = dict(chunk_key_columns or {})
    includes = _patterns(include, "include")
    excludes = _patterns(exclude, "exclude")
    if not includes:
        raise ConfigError(
            "include: no table patterns given. Fix: list tables as 'db.table' or regexes like 'shop\\..*'."
        )
    tables = _list_base_tables(conn)
    problems: list[str] = []
    unmatched = [p for p in includes if not any(p.matches(i.table_id) for i in tables)]
    if unmatched:
        views = _list_views(conn)
        hidden = _without_select_grant(conn, [p.table_id for p in unmatched if p.table_id is not None])
        problems += [_nothing_matched(p, tables, views, hidden) for p in unmatched]
    chosen = [
        i
        for i in tables
        if any(p.matches(i.table_id) for p in includes) and not any(p.matches(i.table_id) for p in excludes)
    ]
    if not chosen and not problems:
        raise ConfigError(
            f"include {[p.text for p in includes]} minus exclude {[p.text for p in excludes]} leaves no table. "
            "Fix: narrow the exclude patterns."
        )
    chosen_names = {str(i.table_id) for i in chosen}
    unknown = sorted(set(chunk_key_columns) - chosen_names)
    if unknown:
        problems.append(
            f"chunk_key_columns names {', '.join(unknown)}, which the pipeline does not capture. "
            f"Fix: use 'db.table' names of captured tables ({', '.join(sorted(chosen_names)[:20])})."
        )
    _load_details(conn, chosen)
    schemas = []
    for i in chosen:
        try:
            schema = _build_schema(i, chunk_key_columns.get(str(i.table_id)), zero_dates)
            # Every column must have a defined fate now, not when a snapshot batch reads it
            # (a spatial column used to fail the whole batch, every table in it).
            map_table(schema, "UTC")
            refuse_undecodable_old_temporals(schema)
            schemas.append(schema)
        except ConfigError as e:
            problems.append(str(e))
    if problems:
        raise table_list_error(problems)
    return schemas


def table_list_error(problems: Sequence[str]) -> ConfigError:
    """One error for several table-list problems: a first line that says what to do, then each."""
    if len(problems) == 1:
        return ConfigError(problems[0])
    listed = "\n".join(f"  - {p}" for p in problems)
    return ConfigError(
        f"the table list has {len(problems)} problems; nothing was read. Fix: correct each "
        f"entry below, then trigger again.\n{listed}"
    )


def _list_views(conn) -> list[TableId]:
    rows = _query(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
        f"WHERE TABLE_TYPE <> 'BASE TABLE' AND TABLE_SCHEMA NOT IN ({_placeholders(len(SYSTEM_SCHEMAS))})",
        sorted(SYSTEM_SCHEMAS),
    )
    return [TableId(db, t) for db, t in rows]


def _without_select_grant(conn, wanted: Sequence[TableId]) -> set[TableId]:
    """Of the exact names that matched nothing, those the user may not SELECT from: such a
    table may well exist; the server just does not show it to this user."""
    if not wanted:
        return set()
    from .server import server_version
    from .validation import parse_grants, read_grants, select_granted

    try:
        by_object = parse_grants(read_grants(conn, server_version(conn)))
    except Exception:  # grants unreadable: say nothing rather than guess
        return set()
    return {t for t in wanted if not select_granted(by_object, t.database, t.table)}


def _nothing_matched(
    p: TablePattern, tables: Sequence[_TableInfo], views: Sequence[TableId] = (), hidden: Collection[TableId] = ()
) -> str:
    msg = f"table pattern {p.text!r} matches no table on the server."
    if (t := p.table_id) is not None and t in hidden:  # table_id: None unless the pattern is exact
        return (
            f"table pattern {p.text!r} matches no table the connection's user can see: it has no SELECT grant "
            f"on {t} (a table without one is invisible to it, whether it exists or not). Fix: GRANT SELECT ON "
            f"`{t.database}`.* (or on the table) TO the connection's user, or correct the name."
        )
    seen_views = [str(v) for v in views if p.matches(v)]
    if seen_views:
        return (
            f"table pattern {p.text!r} matches only views ({', '.join(seen_views[:5])}): a view has no rows "
            "in the binlog. Fix: capture the base tables the view reads instead."
        )
    if p.exact:
        close = [str(i.table_id) for i in tables if str(i.table_id).lower() == p.text.lower()]
        if close:
            return msg + f" Fix: table names are case-sensitive; did you mean {close[0]!r}?"
        if "." not in p.text:
            return msg + " Fix: write it as 'database.table' (or a regex like 'db\\..*')."
    elif not _has_separator_dot(p.text):
        return msg + (
            " Fix: a regular expression matches the whole 'db.table' name: include the database, "
            "e.g. 'shop\\.order_.*'."
        )
    return msg + (
        " Fix: check the database and table names (only base tables outside the system schemas "
        "count; a table the connection's user has no SELECT grant on is invisible to it)."
    )


def _has_separator_dot(regex: str) -> bool:
    """Whether a table regex spells a dot between database and table: ``\\.``, ``[.]``, or a bare
    ``.`` that is not a wildcard run (``.*``, ``.+``, ``.?``, ``.{n}``). ``order_.*`` has none, so
    it can only match a table named like a whole ``db.table``: it needs the database."""
    i, in_class = 0, False
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            if regex[i + 1 : i + 2] == ".":
                return True
            i += 2
            continue
        if in_class:
            if c == ".":
                return True
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if regex[i + 1 : i + 2] == "]":  # a ']' first in a class is a literal
                i += 1
        elif c == "." and regex[i + 1 : i + 2] not in ("*", "+", "?", "{"):
            return True
        i += 1
    return False


def read_table_schema(
    conn, table_id: TableId, chunk_key_column: str | None = None, zero_dates: str = "null"
) -> TableSchema:
    """The schema of one table (ConfigError if it is not a base table on the server)."""
    rows = _query(
        conn,
        "SELECT ENGINE, TABLE_ROWS FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND TABLE_TYPE = 'BASE TABLE'",
        (table_id.database, table_id.table),
    )
    if not rows:
        raise ConfigError(f"table {table_id} does not exist (or is not a base table). Fix: check the name.")
    info = _TableInfo(table_id, rows[0][0], int(rows[0][1] or 0))
    show_old_temporals(conn)
    _load_details_one(conn, info)
    schema = _build_schema(info, chunk_key_column, zero_dates)
    # a table that comes under the list while streaming (created, renamed in) is refused alike
    refuse_undecodable_old_temporals(schema)
    return schema


def _load_details_one(conn, info: _TableInfo) -> None:
    """Like ``_load_details`` but filtered to one table (cheap on servers with many tables)."""
    t = info.table_id
    for row in _query(
        conn,
        f"SELECT {_COLUMN_FIELDS} FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
        (t.database, t.table),
    ):
        info.columns.append(_column(row))
    for index, non_unique, _seq, col in _query(
        conn,
        "SELECT INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME FROM information_schema.STATISTICS "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY INDEX_NAME, SEQ_IN_INDEX",
        (t.database, t.table),
    ):
        if col is None:
            continue
        info.indexes.setdefault(index, (bool(int(non_unique)), []))[1].append(col)
