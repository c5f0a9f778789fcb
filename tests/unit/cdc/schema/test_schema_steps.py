"""Schema changes on the stream's way to the sinks: behaviours, schema history and the step planner.

Pure logic (no Spark, no server): ``cdc/schema/behavior.py`` (what a sink does about a change, per
``schema_change_behavior``), ``cdc/schema/history.py`` (table versions keyed by the DDL's binlog
offset) and ``cdc/schema/steps.py`` (a micro-batch's records turned into ordered per-table steps).
Records are built the way the binlog source's tasks build them (``DdlMark.to_json``,
``columns_signature``); sinks are stood in for by their capability sets.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable, Sequence

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError, SchemaMismatchError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.schema import behavior as B
from airflow_provider_mysqlcdc.cdc.schema.ddl import parse_ddl
from airflow_provider_mysqlcdc.cdc.schema.events import AddColumn, AlterColumnType, RenameColumn
from airflow_provider_mysqlcdc.cdc.schema.evolve import apply_change
from airflow_provider_mysqlcdc.cdc.schema.history import SchemaHistory, TableVersion, offset_key
from airflow_provider_mysqlcdc.cdc.schema.steps import ChangeStep, RowsStep, StepPlanner, logged_schema
from airflow_provider_mysqlcdc.spark.sinks.direct_spec import DdlMark, columns_signature

# --- sinks, as the planner sees them: a name and what they can do --------------------------------

PG = frozenset(B.ACTION_KINDS)  # PostgreSQL: everything
DELTA = frozenset({B.ADD_COLUMN, B.TRUNCATE, B.ALTER_COLUMN_TYPE})  # delta-rs: no rename, no drop
NOTHING = frozenset()

DB = "shop"
T = TableId(DB, "t")
U = TableId(DB, "u")
BINLOG = "mysql-bin.000001"


# --- schemas ------------------------------------------------------------------------------------


def col(name: str, data_type: str = "int", column_type: str | None = None, nullable: bool = True, **kw: Any) -> Column:
    """A column as information_schema describes it (ordinal set by ``schema``)."""
    return Column(name, 0, data_type, column_type or data_type, nullable, **kw)


def int_(name: str, nullable: bool = True) -> Column:
    return col(name, "int", "int", nullable, numeric_precision=10, numeric_scale=0)


def bigint(name: str, nullable: bool = True) -> Column:
    return col(name, "bigint", "bigint", nullable, numeric_precision=19, numeric_scale=0)


def tinyint(name: str, nullable: bool = True) -> Column:
    return col(name, "tinyint", "tinyint", nullable, numeric_precision=3, numeric_scale=0)


def varchar(name: str, n: int = 10, nullable: bool = True) -> Column:
    return col(
        name, "varchar", f"varchar({n})", nullable, charset="utf8mb4", collation="utf8mb4_0900_ai_ci", char_max_length=n
    )


def text(name: str) -> Column:
    return col(name, "text", "text", True, charset="utf8mb4", collation="utf8mb4_0900_ai_ci", char_max_length=65535)


def dec(name: str, p: int, s: int) -> Column:
    return col(name, "decimal", f"decimal({p},{s})", True, numeric_precision=p, numeric_scale=s)


def schema(*columns: Column, pk: Sequence[str] = ("id",), table: TableId = T) -> TableSchema:
    """A table; ordinals 1..n, primary key columns NOT NULL, identity = the key (else every column)."""
    pk = tuple(pk)
    cols = tuple(
        Column(**{**c.to_dict(), "ordinal": i + 1, "nullable": c.nullable and c.name not in pk})
        for i, c in enumerate(columns)
    )
    return TableSchema(table, cols, pk, pk, pk or tuple(c.name for c in cols))


def base(table: TableId = T) -> TableSchema:
    """``CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(10))``"""
    return schema(int_("id", False), varchar("name"), table=table)


def names(s: TableSchema | None) -> list[str]:
    assert s is not None
    return [c.name for c in s.columns]


def shape(s: TableSchema | None) -> list[tuple[str, str]]:
    """(name, column_type) in table order: what a sink's table looks like, nullability aside."""
    assert s is not None
    return [(c.name, c.column_type.lower()) for c in s.columns]


def evolve_by(old: TableSchema, sql: str) -> tuple[TableSchema, list[tuple[str, str]], dict[str, Any]]:
    """``old`` after the ALTER ``sql`` (parsed and applied as the planner does), with what the statement
    says the shapes cannot: the renames (old, new) and, per added column, ``fill_value``."""
    new: TableSchema | None = old
    events = parse_ddl(sql, DB)
    for e in events:
        new = apply_change(new, e)
    assert new is not None
    renames = [(e.old, e.new) for e in events if isinstance(e, RenameColumn)]
    renames += [
        (e.name, e.column.name)
        for e in events
        if isinstance(e, AlterColumnType) and e.name.lower() == e.column.name.lower() and e.name != e.column.name
    ]
    fills = {}
    for e in events:
        if isinstance(e, AddColumn):
            c = next(c for c in new.columns if c.name.lower() == e.column.name.lower())
            fills[c.name.lower()] = B.fill_value(c, e.column.default, e.column.has_default)
    return new, renames, fills


def plan(
    behavior: str,
    can: Iterable[str],
    old: TableSchema,
    sql: str,
    sink: TableSchema | None = None,
    where: str = f"{BINLOG}:400",
) -> B.SinkPlan:
    new, renames, fills = evolve_by(old, sql)
    return B.plan_columns(behavior, "testsink", frozenset(can), sink or old, old, new, renames, fills, where, sql)


def kinds(actions: Iterable[B.SinkAction]) -> list[str]:
    return [a.kind for a in actions]


def apply_in_order(sink: TableSchema, actions: Iterable[B.SinkAction]) -> list[str]:
    """The sink's column names after running ``actions`` one by one, as a SQL sink does; fails where a
    statement would (a column that is not there, a name that is taken)."""
    cols = [c.name for c in sink.columns]
    low = lambda: [c.lower() for c in cols]  # noqa: E731
    for a in actions:
        if a.kind == B.ADD_COLUMN:
            assert a.column is not None and a.column.name.lower() not in low(), f"{a.describe()}: name taken"
            if a.copy_from:
                assert a.copy_from.lower() in low(), f"{a.describe()}: no column {a.copy_from}"
            cols.append(a.column.name)
        elif a.kind == B.DROP_COLUMN:
            assert a.name is not None and a.name.lower() in low(), f"{a.describe()}: no such column"
            del cols[low().index(a.name.lower())]
        elif a.kind == B.RENAME_COLUMN:
            assert a.name is not None and a.new_name is not None
            assert a.name.lower() in low(), f"{a.describe()}: no such column"
            assert a.new_name.lower() not in low() or a.new_name.lower() == a.name.lower(), (
                f"{a.describe()}: column {a.new_name} already exists"
            )
            cols[low().index(a.name.lower())] = a.new_name
        elif a.kind == B.ALTER_COLUMN_TYPE:
            assert a.name is not None and a.name.lower() in low(), f"{a.describe()}: no such column"
    return cols


# --- records, as the binlog source's tasks hand them to the driver ---------------------------------


def offset(position: int, file: str = BINLOG, row: int = 0) -> dict[str, Any]:
    return {"file": file, "position": position, "row": row, "txn_file": None, "txn_position": None, "gtid": None}


def rows(s: TableSchema, seq: int, changes: int = 1, table: TableId | None = None) -> dict[str, Any]:
    """A data record: ``changes`` row changes of ``table`` logged with the columns of ``s``."""
    t = table or s.table_id
    return {
        "database": t.database,
        "table": t.table,
        "first_seq": seq,
        "last_seq": seq + changes - 1,
        "changes": changes,
        "columns": columns_signature(s),
        "ddl": "",
        "payload": f"payload-{t.table}-{seq}".encode(),
        "path": f"/tmp/part-{seq}",
    }


def ddl(sql: str, position: int, seq: int, table: TableId = T, database: str = DB) -> dict[str, Any]:
    """A DDL record for ``table``: the statement at ``position`` whose changes would get ``_seq`` ``seq``."""
    mark = DdlMark((table,), database, sql, offset(position), seq)
    return {
        "database": table.database,
        "table": table.table,
        "first_seq": seq,
        "last_seq": seq,
        "changes": 0,
        "columns": "",
        "ddl": mark.to_json(),
        "payload": b"",
        "path": "",
    }


class Planner:
    """A StepPlanner over a fresh history, counting ``on_record`` calls."""

    def __init__(
        self,
        behavior: str = "lenient",
        can: Iterable[str] = PG,
        tables: Iterable[TableSchema] = (),
        history: SchemaHistory | None = None,
    ) -> None:
        self.history = history or SchemaHistory.starting_with(list(tables) or [base()])
        self.recorded = 0
        self.planner = StepPlanner(self.history, behavior, "testsink", frozenset(can), on_record=self._saved)

    def _saved(self) -> None:
        self.recorded += 1

    def plan(self, records: Sequence[dict[str, Any]]) -> dict[TableId, list]:
        return self.planner.plan(records)

    def steps(self, records: Sequence[dict[str, Any]], table: TableId = T) -> list:
        out = self.plan(records)
        assert set(out) == {table}
        return out[table]


def step_kinds(steps: Sequence[Any]) -> list[str]:
    return ["rows" if isinstance(s, RowsStep) else "change" for s in steps]


# =================================================================================================
# column_diff
# =================================================================================================


class TestColumnDiff:
    OLD = schema(int_("id", False), int_("a"), varchar("b"))

    def test_no_change_is_empty(self):
        d = B.column_diff(self.OLD, self.OLD)
        assert d.empty and d == B.ColumnDiff((), (), (), ())

    def test_added_column(self):
        new = schema(int_("id", False), int_("a"), varchar("b"), bigint("c"))
        d = B.column_diff(self.OLD, new)
        assert [c.name for c in d.added] == ["c"] and d.added[0].column_type == "bigint"
        assert (d.dropped, d.renamed, d.retyped) == ((), (), ())
        assert not d.empty

    def test_dropped_column(self):
        d = B.column_diff(self.OLD, schema(int_("id", False), varchar("b")))
        assert d.dropped == ("a",)
        assert (d.added, d.renamed, d.retyped) == ((), (), ())

    def test_rename_the_statement_named(self):
        d = B.column_diff(self.OLD, schema(int_("id", False), int_("a2"), varchar("b")), [("a", "a2")])
        assert d.renamed == (("a", "a2"),)
        assert (d.added, d.dropped, d.retyped) == ((), (), ())

    def test_rename_without_the_statement_is_a_drop_and_an_add(self):
        d = B.column_diff(self.OLD, schema(int_("id", False), int_("a2"), varchar("b")))
        assert d.dropped == ("a",) and [c.name for c in d.added] == ["a2"] and d.renamed == ()

    def test_rename_chain_counts_as_one_rename(self):
        new = schema(int_("id", False), int_("c"), varchar("b"))
        d = B.column_diff(self.OLD, new, [("a", "x"), ("x", "c")])
        assert d.renamed == (("a", "c"),)
        assert (d.added, d.dropped, d.retyped) == ((), (), ())

    def test_swap_through_the_parsers_temporary_name(self):
        new, renames, _ = evolve_by(self.OLD, "ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO a")
        assert len(renames) == 3  # a -> tmp, b -> a, tmp -> b
        d = B.column_diff(self.OLD, new, renames)
        assert sorted(d.renamed) == [("a", "b"), ("b", "a")]
        assert (d.added, d.dropped) == ((), ())
        # the types travel with the columns: a (int) is now b, b (varchar) now a; nothing is retyped
        assert d.retyped == ()

    def test_retyped_column(self):
        new = schema(int_("id", False), bigint("a"), varchar("b", 50))
        d = B.column_diff(self.OLD, new)
        assert [(o.name, o.column_type, n.column_type) for o, n in d.retyped] == [
            ("a", "int", "bigint"),
            ("b", "varchar(10)", "varchar(50)"),
        ]
        assert (d.added, d.dropped, d.renamed) == ((), (), ())

    def test_names_compare_case_insensitively(self):
        new = schema(int_("ID", False), int_("A"), varchar("B"), pk=("ID",))
        assert B.column_diff(self.OLD, new).empty
        d = B.column_diff(self.OLD, schema(int_("id", False), int_("Alpha"), varchar("b")), [("A", "ALPHA")])
        assert d.renamed == (("a", "Alpha"),)  # spelled as the two versions spell them
        assert (d.added, d.dropped, d.retyped) == ((), (), ())

    def test_rename_and_retype_in_one_change_clause(self):
        new, renames, _ = evolve_by(self.OLD, "ALTER TABLE t CHANGE a b2 BIGINT")
        d = B.column_diff(self.OLD, new, renames)
        assert d.renamed == (("a", "b2"),)
        assert [(o.name, n.name, n.column_type) for o, n in d.retyped] == [("a", "b2", "bigint")]
        assert (d.added, d.dropped) == ((), ())

    def test_drop_and_rename_onto_the_freed_name(self):
        # DROP a, CHANGE b a BIGINT: old a is gone, old b is the new a (and is retyped); a is not "kept"
        new, renames, _ = evolve_by(self.OLD, "ALTER TABLE t DROP COLUMN a, CHANGE b a BIGINT")
        d = B.column_diff(self.OLD, new, renames)
        assert d.dropped == ("a",)
        assert d.renamed == (("b", "a"),)
        assert [(o.name, n.name, n.column_type) for o, n in d.retyped] == [("b", "a", "bigint")]
        assert d.added == ()

    def test_rename_then_add_under_the_old_name(self):
        new, renames, _ = evolve_by(self.OLD, "ALTER TABLE t RENAME COLUMN a TO a_old, ADD COLUMN a VARCHAR(5)")
        d = B.column_diff(self.OLD, new, renames)
        assert d.renamed == (("a", "a_old"),)
        assert [(c.name, c.column_type) for c in d.added] == [("a", "varchar(5)")]
        assert (d.dropped, d.retyped) == ((), ())


# =================================================================================================
# widens
# =================================================================================================


@pytest.mark.parametrize(
    "old, new, expected",
    [
        (tinyint("c"), bigint("c"), True),
        (int_("c"), bigint("c"), True),
        (bigint("c"), int_("c"), False),
        (int_("c"), dec("c", 20, 0), True),
        (bigint("c"), dec("c", 19, 0), True),
        (int_("c"), dec("c", 9, 0), False),  # 10 integer digits do not fit in 9
        (int_("c"), dec("c", 12, 4), False),  # 8 integer digits
        (dec("c", 10, 2), dec("c", 12, 2), True),
        (dec("c", 10, 2), dec("c", 12, 1), False),  # loses a fraction digit
        (dec("c", 10, 2), dec("c", 10, 3), False),  # loses an integer digit
        (col("c", "float"), col("c", "double"), True),
        (col("c", "double"), col("c", "float"), False),
        (varchar("c", 10), varchar("c", 100), True),
        (varchar("c", 100), varchar("c", 10), True),  # the same sink type (string)
        (varchar("c"), text("c"), True),
        (text("c"), int_("c"), False),
        (int_("c"), varchar("c"), False),
        (col("c", "varbinary", "varbinary(4)", char_max_length=4), col("c", "blob", "blob"), True),
        (col("c", "blob", "blob"), text("c"), False),
    ],
    ids=lambda v: v.column_type if isinstance(v, Column) else str(v),
)
def test_widens(old, new, expected):
    assert B.widens(old, new) is expected


def test_unsigned_ints_widen_like_the_next_wider_signed_type():
    uint = col("c", "int", "int unsigned", numeric_precision=10, numeric_scale=0)
    ubig = col("c", "bigint", "bigint unsigned", numeric_precision=20, numeric_scale=0)
    assert B.widens(int_("c"), uint) and B.widens(uint, bigint("c"))
    assert not B.widens(uint, int_("c"))
    assert B.widens(ubig, dec("c", 20, 0)) and not B.widens(ubig, bigint("c"))


# =================================================================================================
# fill_value: what rows that existed before ADD COLUMN hold in it
# =================================================================================================


def added(decl: str) -> tuple[Any, str | None]:
    """``fill_value`` of the column ``ALTER TABLE t ADD COLUMN c <decl>`` declares."""
    (e,) = parse_ddl(f"ALTER TABLE t ADD COLUMN c {decl}", DB)
    assert isinstance(e, AddColumn)
    return B.fill_value(e.column.to_column(3, "utf8mb4"), e.column.default, e.column.has_default)


@pytest.mark.parametrize(
    "decl, value",
    [
        ("INT NOT NULL DEFAULT 5", 5),
        ("INT DEFAULT '5'", 5),  # a quoted number in an int column is a number
        ("VARCHAR(10) DEFAULT '5'", "5"),
        ("INT DEFAULT -1", -1),
        ("DECIMAL(10,2) DEFAULT -3.25", "-3.25"),  # decimals as text, no float rounding
        ("DOUBLE NOT NULL DEFAULT 2.5", 2.5),
        ("TINYINT(1) NOT NULL DEFAULT TRUE", 1),
        ("ENUM('x','y') NOT NULL DEFAULT 'y'", "y"),
        ("INT NOT NULL DEFAULT 5.7", 6),  # the server rounds, it does not truncate
        ("INT DEFAULT -5.5", -6),
        ("BIGINT UNSIGNED NOT NULL DEFAULT 18446744073709551615", "18446744073709551615"),
        ("TIME NOT NULL DEFAULT '12:00:00'", 12 * 3600 * 1_000_000),
        ("TIME DEFAULT '-1 02:03:04'", -(26 * 3600 + 3 * 60 + 4) * 1_000_000),
        ("TIME(3) DEFAULT '00:00:01.2346'", 1_235_000),
        ("INT DEFAULT NULL", None),
        # NOT NULL without DEFAULT: MySQL's implicit default
        ("INT NOT NULL", 0),
        ("BIGINT UNSIGNED NOT NULL", "0"),
        ("VARCHAR(20) NOT NULL", ""),
        ("ENUM('a','b') NOT NULL", "a"),
        ("TIME NOT NULL", 0),
        # nullable without DEFAULT: NULL
        ("INT", None),
        ("VARCHAR(20)", None),
    ],
)
def test_fill_value_of_a_constant_or_implicit_default(decl, value):
    got, note = added(decl)
    assert note is None
    assert got == value and type(got) is type(value)


def test_fill_value_of_a_non_constant_default_is_null_with_a_note():
    got, note = added("TIMESTAMP DEFAULT CURRENT_TIMESTAMP")
    assert got is None
    assert note is not None and "column c" in note and "CURRENT_TIMESTAMP" in note and "not a constant" in note


def test_fill_value_of_an_expression_default_is_null_with_a_note():
    got, note = added("INT DEFAULT (1 + 2)")
    assert got is None and note is not None and "not a constant" in note


def test_fill_value_without_the_parser():
    c = Column("c", 3, "int", "int", nullable=False, numeric_precision=10, numeric_scale=0)
    assert B.fill_value(c, "5", True) == (5, None)
    assert B.fill_value(c, None, False) == (0, None)
    assert B.fill_value(Column("c", 3, "date", "date", nullable=False), None, False) == (None, None)  # zero date


# =================================================================================================
# plan_columns, per behaviour
# =================================================================================================


class TestPlanColumnsEvolve:
    OLD = schema(int_("id", False), int_("a"), varchar("b"), varchar("d"))
    SQL = (
        "ALTER TABLE t RENAME COLUMN a TO a2, DROP COLUMN b, MODIFY d VARCHAR(50), ADD COLUMN c INT NOT NULL DEFAULT 7"
    )

    def test_a_sink_that_can_do_everything_follows_the_source(self):
        p = plan("evolve", PG, self.OLD, self.SQL)
        new, _, _ = evolve_by(self.OLD, self.SQL)
        assert [a.describe() for a in p.actions] == [
            "drop column b",
            "rename column a to a2",
            "change column d to varchar(50)",
            "add column c int, existing rows 7",
        ]
        assert p.actions[-1].fill == 7 and p.actions[-1].copy_from is None
        assert shape(p.sink) == shape(new) == [("id", "int"), ("a2", "int"), ("d", "varchar(50)"), ("c", "int")]
        assert [c.ordinal for c in p.sink.columns] == [1, 2, 3, 4]
        assert p.notes == ()
        assert apply_in_order(self.OLD, p.actions) == names(new)

    def test_added_columns_are_nullable_in_the_sink(self):
        p = plan("evolve", PG, self.OLD, self.SQL)
        add = next(a for a in p.actions if a.kind == B.ADD_COLUMN)
        assert add.column is not None and add.column.nullable
        assert p.sink.column("c").nullable
        assert not p.sink.column("id").nullable  # untouched columns keep theirs

    def test_the_sink_keeps_the_source_identity(self):
        s = schema(int_("id", False), int_("a"))
        p = plan("evolve", PG, s, "ALTER TABLE t RENAME COLUMN id TO key_id")
        assert p.sink.row_identity == ("key_id",) and p.sink.primary_key == ("key_id",)
        assert kinds(p.actions) == [B.RENAME_COLUMN]

    def test_a_swap_of_names_goes_through_a_temporary_name(self):
        s = schema(int_("id", False), int_("a"), varchar("b"))
        sql = "ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO a"
        p = plan("evolve", PG, s, sql)
        new, _, _ = evolve_by(s, sql)
        assert kinds(p.actions) == [B.RENAME_COLUMN] * 3
        assert apply_in_order(s, p.actions) == names(new) == ["id", "b", "a"]
        # the types moved with the columns: sink b is the old a (int), sink a the old b (varchar)
        assert shape(p.sink) == shape(new) == [("id", "int"), ("b", "int"), ("a", "varchar(10)")]

    def test_drop_and_rename_onto_the_freed_name(self):
        s = schema(int_("id", False), varchar("b"), int_("a"))  # b before a: order must not matter
        sql = "ALTER TABLE t DROP COLUMN a, CHANGE b a BIGINT"
        p = plan("evolve", PG, s, sql)
        assert [a.describe() for a in p.actions] == [
            "drop column a",
            "rename column b to a",
            "change column a to bigint",
        ]
        assert apply_in_order(s, p.actions) == ["id", "a"]
        assert shape(p.sink) == [("id", "int"), ("a", "bigint")]

    def test_rename_and_retype_in_one_clause(self):
        p = plan("evolve", PG, self.OLD, "ALTER TABLE t CHANGE a a2 BIGINT")
        assert [a.describe() for a in p.actions] == ["rename column a to a2", "change column a2 to bigint"]
        assert shape(p.sink)[1] == ("a2", "bigint")

    @pytest.mark.parametrize(
        "sql, what",
        [
            ("ALTER TABLE t RENAME COLUMN a TO a2", "rename column a to a2"),
            ("ALTER TABLE t DROP COLUMN b", "drop column b"),
        ],
    )
    def test_a_sink_that_cannot_fails_naming_table_offset_and_fix(self, sql, what):
        with pytest.raises(B.SchemaEvolutionError) as e:
            plan("evolve", DELTA, self.OLD, sql, where=f"{BINLOG}:4711")
        msg = str(e.value)
        assert f"testsink cannot {what}" in msg
        assert "shop.t" in msg and f"{BINLOG}:4711" in msg and sql in msg
        assert "Fix:" in msg and "try_evolve" in msg

    def test_a_sink_that_cannot_still_takes_what_it_can(self):
        p = plan("evolve", DELTA, self.OLD, "ALTER TABLE t ADD COLUMN c INT, MODIFY a BIGINT")
        assert [a.describe() for a in p.actions] == ["change column a to bigint", "add column c int"]


class TestPlanColumnsTryEvolve:
    OLD = schema(int_("id", False), int_("a"), varchar("b"))

    def test_rename_falls_back_to_lenient_with_a_note(self):
        old = schema(int_("id", False), int_("a", False), varchar("b"))
        p = plan("try_evolve", DELTA, old, "ALTER TABLE t RENAME COLUMN a TO a2")
        assert [(a.kind, a.name, a.copy_from) for a in p.actions] == [(B.ADD_COLUMN, "a2", "a")]
        assert names(p.sink) == ["id", "a", "b", "a2"]
        assert p.sink.column("a").nullable
        assert p.notes == ("testsink cannot rename column a to a2: done the lenient way instead",)

    def test_drop_falls_back_to_lenient_with_a_note(self):
        old = schema(int_("id", False), int_("a"), varchar("b", nullable=False))
        p = plan("try_evolve", DELTA, old, "ALTER TABLE t DROP COLUMN b")
        assert p.actions == ()
        assert names(p.sink) == ["id", "a", "b"] and p.sink.column("b").nullable  # new rows leave it NULL
        assert p.notes == ("testsink cannot drop column b: done the lenient way instead",)

    def test_what_the_sink_can_do_is_done(self):
        p = plan("try_evolve", PG, self.OLD, "ALTER TABLE t RENAME COLUMN a TO a2, DROP COLUMN b")
        assert kinds(p.actions) == [B.DROP_COLUMN, B.RENAME_COLUMN] and p.notes == ()
        assert names(p.sink) == ["id", "a2"]


class TestPlanColumnsLenient:
    OLD = schema(int_("id", False), int_("a"), varchar("b"), bigint("big"))

    def test_added_columns_are_added_nullable_with_their_fill(self):
        p = plan("lenient", PG, self.OLD, "ALTER TABLE t ADD COLUMN c VARCHAR(5) NOT NULL")
        (a,) = p.actions
        assert (a.kind, a.name, a.fill, a.copy_from) == (B.ADD_COLUMN, "c", "", None)
        assert a.column is not None and a.column.nullable and p.sink.column("c").nullable
        assert names(p.sink) == ["id", "a", "b", "big", "c"]

    def test_a_non_constant_default_is_noted(self):
        p = plan("lenient", PG, self.OLD, "ALTER TABLE t ADD COLUMN ts TIMESTAMP DEFAULT CURRENT_TIMESTAMP")
        assert kinds(p.actions) == [B.ADD_COLUMN] and p.actions[0].fill is None
        assert len(p.notes) == 1 and "CURRENT_TIMESTAMP" in p.notes[0]

    def test_dropped_columns_stay_nullable(self):
        old = schema(int_("id", False), int_("a"), varchar("b", nullable=False))
        p = plan("lenient", PG, old, "ALTER TABLE t DROP COLUMN b")
        assert p.actions == ()
        assert names(p.sink) == ["id", "a", "b"] and p.sink.column("b").nullable  # new rows leave it NULL
        assert shape(p.sink) == shape(old)

    def test_rename_adds_the_new_name_with_the_old_values(self):
        old = schema(int_("id", False), int_("a", False))
        p = plan("lenient", PG, old, "ALTER TABLE t RENAME COLUMN a TO a2")
        (a,) = p.actions
        assert (a.kind, a.name, a.copy_from) == (B.ADD_COLUMN, "a2", "a")
        assert a.describe() == "add column a2 int, existing rows take the values of a"
        assert names(p.sink) == ["id", "a", "a2"]
        assert p.sink.column("a").nullable and p.sink.column("a2").nullable  # new rows leave a NULL

    def test_rename_and_retype_adds_the_new_name_with_the_new_type(self):
        p = plan("lenient", PG, self.OLD, "ALTER TABLE t CHANGE a a2 BIGINT")
        assert [(a.kind, a.name, a.copy_from, a.column.column_type) for a in p.actions] == [
            (B.ADD_COLUMN, "a2", "a", "bigint")
        ]
        assert shape(p.sink)[-1] == ("a2", "bigint") and shape(p.sink)[1] == ("a", "int")

    @pytest.mark.parametrize("can", [PG, DELTA], ids=["pg", "delta"])
    def test_a_widening_alters_the_sink_column_when_the_sink_can(self, can):
        p = plan("lenient", can, self.OLD, "ALTER TABLE t MODIFY a BIGINT")
        assert [(a.kind, a.name, a.column.column_type) for a in p.actions] == [(B.ALTER_COLUMN_TYPE, "a", "bigint")]
        assert p.sink.column("a").column_type == "bigint" and p.notes == ()

    def test_a_widening_the_sink_cannot_make_fails(self):
        with pytest.raises(B.SchemaEvolutionError, match="cannot widen column a from int to bigint"):
            plan("lenient", NOTHING, self.OLD, "ALTER TABLE t MODIFY a BIGINT")

    def test_a_change_within_the_same_sink_type_needs_no_action(self):
        p = plan("lenient", PG, self.OLD, "ALTER TABLE t MODIFY b VARCHAR(100)")
        assert p.actions == () and p.notes == ()
        assert p.sink.column("b").column_type == "varchar(100)"

    def test_a_narrowing_keeps_the_sink_type_with_a_note(self):
        p = plan("lenient", PG, self.OLD, "ALTER TABLE t MODIFY big INT")
        assert p.actions == ()
        assert p.sink.column("big").column_type == "bigint"
        assert len(p.notes) == 1 and "column big" in p.notes[0] and "keeps its type" in p.notes[0]

    def test_an_incompatible_type_keeps_the_sink_type_with_a_note(self):
        p = plan("lenient", PG, self.OLD, "ALTER TABLE t MODIFY a VARCHAR(20)")
        assert p.actions == ()
        assert p.sink.column("a").column_type == "int"
        assert len(p.notes) == 1 and "varchar(20) does not widen int" in p.notes[0]

    def test_a_column_dropped_earlier_and_added_again_is_not_added_twice(self):
        """The kept column is reused, and every existing row gets the new column's value (NULL here):
        the source's rows all did, whatever the kept column held."""
        dropped = plan("lenient", PG, self.OLD, "ALTER TABLE t DROP COLUMN b")
        new, _, _ = evolve_by(self.OLD, "ALTER TABLE t DROP COLUMN b")
        again, renames, fills = evolve_by(new, "ALTER TABLE t ADD COLUMN b VARCHAR(10)")
        p = B.plan_columns("lenient", "testsink", PG, dropped.sink, new, again, renames, fills, "f:1", "x")
        assert [(a.kind, a.name, a.refill, a.fill) for a in p.actions] == [(B.ADD_COLUMN, "b", True, None)]
        assert names(p.sink) == ["id", "a", "b", "big"]

    def test_rename_onto_a_name_the_sink_kept_is_noted(self):
        p = plan("lenient", PG, self.OLD, "ALTER TABLE t DROP COLUMN a, RENAME COLUMN b TO a")
        assert p.actions == ()
        assert names(p.sink) == ["id", "a", "b", "big"]
        assert any("already has a column of that name" in n and "values of b" in n for n in p.notes)


class TestPlanColumnsIgnore:
    OLD = schema(int_("id", False), int_("a"), varchar("b"))

    @pytest.mark.parametrize(
        "sql",
        [
            "ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 3",
            "ALTER TABLE t DROP COLUMN b",
            "ALTER TABLE t RENAME COLUMN a TO a2",
            "ALTER TABLE t MODIFY a BIGINT",
        ],
    )
    def test_no_actions_and_the_sink_keeps_its_columns(self, sql):
        p = plan("ignore", PG, self.OLD, sql)
        assert p.actions == ()
        assert p.sink.columns == self.OLD.columns
        assert p.notes == ("ignored: the sink table keeps its columns",)


def test_an_unchanged_shape_plans_nothing_under_every_behaviour():
    s = schema(int_("id", False), int_("a"))
    for behavior in B.BEHAVIORS:
        p = B.plan_columns(behavior, "testsink", PG, s, s, s, (), {}, "f:1", "ALTER TABLE t COMMENT 'x'")
        assert (p.actions, p.notes, p.sink) == ((), (), s)


def test_identity_columns_are_never_dropped():
    # the version the sink matches rows on still names u (as a version settled from rows may):
    # the sink keeps u even where it drops every other column the source dropped
    old = schema(int_("id", False), int_("u", False), int_("a"), pk=())
    old = TableSchema(T, old.columns, (), ("u",), ("u",))
    new = TableSchema(T, schema(int_("id", False), pk=()).columns, (), ("u",), ("u",))
    for behavior in ("evolve", "try_evolve", "lenient"):
        p = B.plan_columns(behavior, "testsink", PG, old, old, new, (), {}, "f:1", "ALTER TABLE t DROP u, DROP a")
        assert "u" in names(p.sink), behavior
        assert ("drop_column", "u") not in [(a.kind, a.name) for a in p.actions], behavior
        assert p.sink.row_identity == ("u",)
    assert kinds(B.plan_columns("evolve", "testsink", PG, old, old, new, (), {}, "f:1", "x").actions) == [B.DROP_COLUMN]


def test_sink_action_round_trip_and_description():
    a = B.SinkAction(B.ADD_COLUMN, "c", int_("c"), fill=5)
    assert B.SinkAction.from_dict(json.loads(json.dumps(a.to_dict()))) == a
    assert a.describe() == "add column c int, existing rows 5"
    r = B.SinkAction(B.RENAME_COLUMN, "a", new_name="b")
    assert B.SinkAction.from_dict(r.to_dict()) == r and r.describe() == "rename column a to b"
    assert B.SinkAction(B.TRUNCATE).describe() == "truncate table"


def test_check_behavior():
    assert B.check_behavior("") == B.DEFAULT_BEHAVIOR == "lenient"
    assert B.check_behavior(" Try_Evolve ") == "try_evolve"
    with pytest.raises(ConfigError, match="schema_change_behavior"):
        B.check_behavior("yolo")


# =================================================================================================
# plan_table_event: truncate and drop of a captured table
# =================================================================================================


class TestPlanTableEvent:
    SINK = base()

    def event(self, behavior: str, can: Iterable[str], kind: str) -> B.SinkPlan:
        return B.plan_table_event(
            behavior,
            "testsink",
            frozenset(can),
            kind,
            self.SINK,
            f"{BINLOG}:9",
            "TRUNCATE TABLE t" if kind == B.TRUNCATE else "DROP TABLE t",
        )

    @pytest.mark.parametrize("behavior", ["evolve", "try_evolve"])
    def test_truncate_is_applied_when_the_sink_can(self, behavior):
        p = self.event(behavior, PG, B.TRUNCATE)
        assert kinds(p.actions) == [B.TRUNCATE] and p.sink == self.SINK and p.notes == ()

    @pytest.mark.parametrize("behavior", ["evolve", "try_evolve"])
    def test_drop_is_applied_when_the_sink_can(self, behavior):
        p = self.event(behavior, PG, B.DROP_TABLE)
        assert kinds(p.actions) == [B.DROP_TABLE] and p.sink is None

    @pytest.mark.parametrize("kind, what", [(B.TRUNCATE, "truncate"), (B.DROP_TABLE, "drop")])
    def test_evolve_fails_when_the_sink_cannot(self, kind, what):
        with pytest.raises(B.SchemaEvolutionError) as e:
            self.event("evolve", DELTA if kind == B.DROP_TABLE else NOTHING, kind)
        assert f"testsink cannot {what} a table" in str(e.value) and "shop.t" in str(e.value)
        assert f"{BINLOG}:9" in str(e.value) and "Fix:" in str(e.value)

    @pytest.mark.parametrize("behavior, can", [("try_evolve", NOTHING), ("lenient", PG), ("ignore", PG)])
    @pytest.mark.parametrize("kind, what", [(B.TRUNCATE, "truncate"), (B.DROP_TABLE, "drop")])
    def test_otherwise_logged_and_not_applied(self, behavior, can, kind, what):
        p = self.event(behavior, can, kind)
        assert p.actions == () and p.sink == self.SINK
        assert p.notes == (f"{what} of shop.t logged, not applied to the sink (schema_change_behavior '{behavior}')",)


# =================================================================================================
# SchemaHistory
# =================================================================================================


def version(
    position: int | None, source: TableSchema | None, sink: TableSchema | None = None, **kw: Any
) -> TableVersion:
    return TableVersion(
        None if position is None else offset(position),
        source,
        source if sink is None and source is not None else sink,
        **kw,
    )


class TestSchemaHistory:
    S0 = base()
    S1 = schema(int_("id", False), varchar("name"), int_("c"))
    S2 = schema(int_("id", False), varchar("name"), int_("c"), int_("d"))

    def history(self) -> SchemaHistory:
        h = SchemaHistory.starting_with([self.S0])
        assert h.record(T, version(200, self.S2, ddl="ALTER TABLE t ADD d INT"))
        assert h.record(T, version(100, self.S1, ddl="ALTER TABLE t ADD c INT"))  # out of order: sorted
        return h

    def test_versions_are_kept_in_offset_order(self):
        h = self.history()
        assert [v.offset and v.offset["position"] for v in h.versions[T]] == [None, 100, 200]

    @pytest.mark.parametrize(
        "position, expected",
        [
            (50, "S0"),
            (100, "S0"),  # the DDL at 100 is not in force at 100: strictly earlier offsets only
            (101, "S1"),
            (200, "S1"),
            (201, "S2"),
        ],
    )
    def test_before_picks_the_version_in_force_just_before_an_offset(self, position, expected):
        assert self.history().before(T, offset(position)).source == getattr(self, expected)

    def test_before_orders_by_file_then_position_then_row(self):
        h = self.history()
        assert h.before(T, offset(4, file="mysql-bin.000002")).source == self.S2  # a later file
        assert h.before(T, offset(100, row=3)).source == self.S1  # a later row, same event
        assert offset_key(offset(100, row=3)) > offset_key(offset(100)) > offset_key(None)

    def test_before_none_is_the_latest(self):
        h = self.history()
        assert h.before(T, None).source == h.latest(T).source == self.S2

    def test_before_an_unknown_table_fails(self):
        with pytest.raises(KeyError, match="shop.u"):
            self.history().before(U, offset(1))

    def test_at_finds_only_the_exact_offset(self):
        h = self.history()
        assert h.at(T, offset(100)).source == self.S1
        assert h.at(T, offset(101)) is None and h.at(U, offset(100)) is None

    def test_record_is_idempotent_per_offset(self):
        h = self.history()
        assert not h.record(T, version(100, self.S2, ddl="something else"))
        assert len(h.versions[T]) == 3 and h.at(T, offset(100)).source == self.S1

    def test_replace_puts_a_version_in_place_of_the_one_at_its_offset(self):
        h = SchemaHistory.starting_with([self.S0])
        h.record(T, version(100, self.S0, pending=True))
        h.replace(T, version(100, self.S1, notes=("settled",)))
        assert len(h.versions[T]) == 2
        v = h.at(T, offset(100))
        assert v.source == self.S1 and not v.pending and v.notes == ("settled",)
        with pytest.raises(KeyError, match="no version"):
            h.replace(T, version(300, self.S1))

    def test_json_round_trip(self):
        h = self.history()
        charset = apply_change(
            None, parse_ddl("CREATE TABLE u (id INT PRIMARY KEY, v VARCHAR(5)) CHARSET latin1", DB)[0]
        )
        assert charset is not None and charset.extra["default_charset"] == "latin1"
        h.add_initial([charset])
        action = B.SinkAction(B.ADD_COLUMN, "c", int_("c"), fill=0).to_dict()
        h.record(T, version(300, self.S2, sink=self.S1, ddl="x", actions=(action,), notes=("n",), pending=True))
        h.record(U, version(150, None, sink=charset, ddl="DROP TABLE u"))
        text = json.dumps(h.to_dict())
        back = SchemaHistory.from_dict(json.loads(text))
        assert back == h
        assert back.at(T, offset(300)).pending and back.at(T, offset(300)).actions == (action,)
        assert back.latest(U).source is None and back.latest(U).sink.extra == charset.extra

    def test_an_unknown_format_is_refused(self):
        d = self.history().to_dict()
        d["format"] = 99
        with pytest.raises(ValueError, match="format"):
            SchemaHistory.from_dict(d)

    def test_latest_sources_and_sinks(self):
        h = self.history()
        h.add_initial([base(U)])
        assert h.latest_sources() == [self.S2, base(U)]
        h.record(U, version(500, None, sink=base(U), ddl="DROP TABLE u"))  # lenient: sink kept
        assert h.latest_sources() == [self.S2]
        assert h.latest_sinks() == {T: self.S2, U: base(U)}
        h.record(U, TableVersion(offset(600), None, None, "DROP TABLE u"))  # sink dropped too
        assert h.latest_sinks() == {T: self.S2}

    def test_add_initial_does_not_override(self):
        h = self.history()
        h.add_initial([schema(int_("id", False), table=T), base(U)])
        assert [v.source for v in h.versions[T]] == [self.S0, self.S1, self.S2]
        assert h.tables == [T, U] and h.versions[U] == [TableVersion(None, base(U), base(U))]


# =================================================================================================
# StepPlanner
# =================================================================================================

AFTER_ADD = schema(int_("id", False), varchar("name"), int_("c", False))  # the source after ADD_C
ADD_C = "ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 7"


class TestPlannerRowsOnly:
    def test_one_rows_step_per_table_with_its_version(self):
        p = Planner(tables=[base(T), base(U)])
        recs = [rows(base(T), 1, 2), rows(base(U), 3), rows(base(T), 5, 4), rows(base(U), 10)]
        out = p.plan(recs)
        assert list(out) == [T, U]
        for t, expected in ((T, [recs[0], recs[2]]), (U, [recs[1], recs[3]])):
            (step,) = out[t]
            assert isinstance(step, RowsStep)
            assert list(step.records) == expected
            assert step.source == base(t) and step.sink == base(t)
        assert out[T][0].changes == 6 and out[U][0].changes == 2
        assert p.recorded == 0 and len(p.history.versions[T]) == 1

    def test_records_are_passed_through_untouched(self):
        p = Planner()
        rec = rows(base(), 1)
        before = dict(rec)
        (step,) = p.steps([rec])
        assert step.records[0] is rec and rec == before

    def test_rows_follow_the_latest_version(self):
        h = SchemaHistory.starting_with([base()])
        h.record(T, version(100, AFTER_ADD))
        (step,) = Planner(history=h).steps([rows(AFTER_ADD, 50)])
        assert step.source == AFTER_ADD

    def test_rows_logged_with_other_columns_and_no_ddl_stop_the_stream(self):
        p = Planner()
        with pytest.raises(SchemaMismatchError) as e:
            p.plan([rows(base(), 1), rows(AFTER_ADD, 2)])
        msg = str(e.value)
        assert msg.startswith("shop.t:") and "_seq 2" in msg and "['id', 'name', 'c']" in msg
        assert "no DDL" in msg and "Fix:" in msg

    def test_rows_of_a_table_the_stream_does_not_capture_fail(self):
        with pytest.raises(SchemaMismatchError, match="shop.u, a table this stream does not capture"):
            Planner().plan([rows(base(U), 1)])

    def test_logged_schema_keeps_the_identity_it_can(self):
        s = logged_schema(T, rows(AFTER_ADD, 1), base())
        assert names(s) == ["id", "name", "c"] and s.row_identity == ("id",) and s.primary_key == ("id",)
        s = logged_schema(T, rows(schema(int_("k", False), varchar("name"), pk=("k",)), 1), base())
        assert s.row_identity == ("k", "name") and s.primary_key == ()


class TestPlannerAddColumn:
    RECORDS = [rows(base(), 1, 3), ddl(ADD_C, 1000, 10), rows(AFTER_ADD, 10, 2)]

    def test_rows_change_rows(self):
        p = Planner("lenient", PG)
        steps = p.steps(self.RECORDS)
        assert step_kinds(steps) == ["rows", "change", "rows"]
        first, change, second = steps
        assert first.records == (self.RECORDS[0],) and first.source == base() and first.sink == base()
        assert isinstance(change, ChangeStep)
        assert (change.ddl, change.offset, change.seq) == (ADD_C, offset(1000), 10)
        assert [(a.kind, a.name, a.fill) for a in change.actions] == [(B.ADD_COLUMN, "c", 7)]
        assert change.sink_before == base() and change.source_after == AFTER_ADD
        assert second.records == (self.RECORDS[2],)
        assert second.source == AFTER_ADD and names(second.sink) == ["id", "name", "c"]
        assert second.sink == change.sink_after and second.sink.column("c").nullable
        assert "existing rows 7" in change.describe() and f"{BINLOG}:1000" in change.describe()

    def test_the_new_version_is_recorded_at_the_ddl_offset_before_the_sink_acts(self):
        p = Planner("lenient", PG)
        p.steps(self.RECORDS)
        assert p.recorded == 1
        v = p.history.at(T, offset(1000))
        assert v is not None and v.source == AFTER_ADD and v.ddl == ADD_C and not v.pending
        assert [a["kind"] for a in v.actions] == [B.ADD_COLUMN]
        assert p.history.before(T, offset(1000)).source == base()
        assert p.history.before(T, offset(1001)).source == AFTER_ADD

    def test_records_out_of_order_are_planned_by_seq_ddl_first_at_the_same_seq(self):
        p = Planner("lenient", PG)
        steps = p.steps([self.RECORDS[2], self.RECORDS[1], self.RECORDS[0]])
        assert step_kinds(steps) == ["rows", "change", "rows"]
        assert steps[0].records == (self.RECORDS[0],) and steps[2].records == (self.RECORDS[2],)

    def test_a_replay_gives_the_same_steps_and_records_nothing_again(self):
        p = Planner("lenient", PG)
        first = p.steps(self.RECORDS)
        saved = p.history.to_dict()
        again = p.steps(self.RECORDS)
        assert again == first
        assert p.recorded == 1 and p.history.to_dict() == saved

    def test_a_replay_after_a_restart_from_the_saved_history(self):
        p = Planner("lenient", PG)
        first = p.steps(self.RECORDS)
        restarted = Planner("lenient", PG, history=SchemaHistory.from_dict(json.loads(json.dumps(p.history.to_dict()))))
        assert restarted.steps(self.RECORDS) == first and restarted.recorded == 0

    def test_a_replay_takes_the_recorded_actions_not_a_new_plan(self):
        p = Planner("lenient", PG)
        p.steps(self.RECORDS)
        # the same history under another behaviour: the recorded actions win
        replay = Planner("ignore", NOTHING, history=p.history).steps(self.RECORDS)
        assert [(a.kind, a.name) for a in replay[1].actions] == [(B.ADD_COLUMN, "c")]

    def test_the_next_batch_continues_with_the_new_version(self):
        p = Planner("lenient", PG)
        p.steps(self.RECORDS)
        (step,) = p.steps([rows(AFTER_ADD, 20)])
        assert step.source == AFTER_ADD and names(step.sink) == ["id", "name", "c"]

    def test_two_ddls_in_one_batch(self):
        sql2 = "ALTER TABLE t DROP COLUMN name"
        after2 = schema(int_("id", False), int_("c", False))
        p = Planner("evolve", PG)
        steps = p.steps(self.RECORDS + [ddl(sql2, 2000, 20), rows(after2, 21)])
        assert step_kinds(steps) == ["rows", "change", "rows", "change", "rows"]
        assert [a.describe() for a in steps[3].actions] == ["drop column name"]
        assert steps[4].source == after2 and names(steps[4].sink) == ["id", "c"]
        assert p.recorded == 2 and p.steps(self.RECORDS + [ddl(sql2, 2000, 20), rows(after2, 21)]) == steps

    def test_ddl_of_another_database_default(self):
        # the statement's default database decides which table an unqualified name means
        p = Planner("lenient", PG)
        steps = p.steps([ddl("ALTER TABLE shop.t ADD COLUMN c INT", 1000, 10, database="other"), rows(AFTER_ADD, 10)])
        assert step_kinds(steps) == ["change", "rows"] and steps[1].source.column_names == ("id", "name", "c")


class TestPlannerBehaviours:
    def test_exception_stops_at_the_ddl(self):
        p = Planner("exception", PG)
        with pytest.raises(B.SchemaChangeStopped) as e:
            p.plan([rows(base(), 1), ddl(ADD_C, 1000, 10), rows(AFTER_ADD, 10)])
        msg = str(e.value)
        assert B.STOPPED_MARKER in msg and ADD_C in msg and "shop.t" in msg and f"{BINLOG}:1000" in msg
        assert p.recorded == 0 and p.history.at(T, offset(1000)) is None

    def test_exception_does_not_stop_at_an_index_change(self):
        steps = Planner("exception", PG).steps([rows(base(), 1), ddl("ALTER TABLE t ADD INDEX i (name)", 10, 5)])
        assert step_kinds(steps) == ["rows"]

    def test_evolve_with_a_sink_that_cannot_fails(self):
        p = Planner("evolve", DELTA)
        with pytest.raises(B.SchemaEvolutionError, match="cannot drop column name"):
            p.plan([ddl("ALTER TABLE t DROP COLUMN name", 1000, 1)])
        assert p.history.at(T, offset(1000)) is None

    def test_ignore_keeps_the_sink(self):
        p = Planner("ignore", PG)
        steps = p.steps([ddl(ADD_C, 1000, 1), rows(AFTER_ADD, 2)])
        assert steps[0].actions == () and steps[0].sink_after == base()
        assert steps[1].source == AFTER_ADD and steps[1].sink == base()


class TestPlannerUnreadableDdl:
    SQL = "ALTER TABLE t FROBNICATE c"
    LOGGED = schema(int_("id", False), varchar("name"), varchar("c", 20))

    def records(self) -> list[dict[str, Any]]:
        return [rows(base(), 1), ddl(self.SQL, 1000, 10), rows(self.LOGGED, 10, 2)]

    def test_lenient_waits_for_the_rows_and_settles_from_their_columns(self, caplog):
        p = Planner("lenient", PG)
        with caplog.at_level(logging.WARNING):
            steps = p.steps(self.records())
        assert "cannot read the DDL" in caplog.text
        assert step_kinds(steps) == ["rows", "change", "change", "rows"]
        pending, settled = steps[1], steps[2]
        assert pending.actions == () and pending.offset == offset(1000)
        assert any(n.startswith("unread DDL") for n in pending.notes)
        assert [(a.kind, a.name) for a in settled.actions] == [(B.ADD_COLUMN, "c")]
        assert settled.sink_before == base() and settled.source_after.column_names == ("id", "name", "c")
        assert "shape taken from the rows' TABLE_MAP" in settled.notes
        assert steps[3].source.column_names == ("id", "name", "c") and names(steps[3].sink) == ["id", "name", "c"]
        v = p.history.at(T, offset(1000))
        assert not v.pending and v.source.column_names == ("id", "name", "c") and v.source.row_identity == ("id",)
        assert [a["kind"] for a in v.actions] == [B.ADD_COLUMN]
        assert p.recorded == 2  # the pending version, then the settled one

    def test_pending_stays_pending_while_no_rows_came(self):
        p = Planner("lenient", PG)
        p.steps([ddl(self.SQL, 1000, 10)])
        assert p.history.at(T, offset(1000)).pending
        steps = p.steps([rows(self.LOGGED, 11)])  # the next micro-batch settles it
        assert step_kinds(steps) == ["change", "rows"] and kinds(steps[0].actions) == [B.ADD_COLUMN]
        assert not p.history.at(T, offset(1000)).pending

    def test_a_readable_ddl_after_a_pending_one_stays_pending(self):
        p = Planner("lenient", PG)
        logged = schema(int_("id", False), varchar("name"), varchar("c", 20), int_("d"))
        steps = p.steps([ddl(self.SQL, 1000, 10), ddl("ALTER TABLE t ADD COLUMN d INT", 2000, 20), rows(logged, 21)])
        assert step_kinds(steps) == ["change", "change", "change", "rows"]
        assert kinds(steps[1].actions) == [B.ADD_COLUMN] and kinds(steps[2].actions) == [B.ADD_COLUMN]
        assert steps[3].source.column_names == ("id", "name", "c", "d")
        assert sorted(names(steps[3].sink)) == ["c", "d", "id", "name"]
        assert not p.history.latest(T).pending

    def test_a_replay_of_a_settled_version_applies_its_actions_once(self):
        p = Planner("lenient", PG)
        p.steps(self.records())
        replay = p.steps(self.records())
        assert step_kinds(replay) == ["rows", "change", "rows"]
        assert kinds(replay[1].actions) == [B.ADD_COLUMN]
        assert replay[2].source.column_names == ("id", "name", "c")
        assert p.recorded == 2

    @pytest.mark.parametrize("behavior", ["evolve", "exception"])
    def test_evolve_and_exception_stop_naming_the_statement(self, behavior):
        p = Planner(behavior, PG)
        with pytest.raises(SchemaMismatchError) as e:
            p.plan(self.records())
        msg = str(e.value)
        assert self.SQL in msg and "shop.t" in msg and f"{BINLOG}:1000" in msg and "Fix:" in msg
        assert p.history.at(T, offset(1000)) is None


class TestPlannerGhostCutOver:
    SQL = "RENAME TABLE shop.t TO shop._t_del, shop._t_gho TO shop.t"
    NEW = schema(int_("id", False), varchar("name"), int_("added"))

    def records(self) -> list[dict[str, Any]]:
        return [rows(base(), 1), ddl(self.SQL, 1000, 10), rows(self.NEW, 10)]

    @pytest.mark.parametrize("behavior, can", [("lenient", DELTA), ("try_evolve", DELTA), ("evolve", PG)])
    def test_pending_then_settled_by_the_rows(self, behavior, can):
        p = Planner(behavior, can)
        steps = p.steps(self.records())
        assert step_kinds(steps) == ["rows", "change", "change", "rows"]
        assert steps[1].actions == () and steps[1].sink_after == base()
        assert [(a.kind, a.name) for a in steps[2].actions] == [(B.ADD_COLUMN, "added")]
        assert steps[3].source.column_names == ("id", "name", "added") and steps[3].source.row_identity == ("id",)
        assert names(steps[3].sink) == ["id", "name", "added"]
        v = p.history.at(T, offset(1000))
        assert not v.pending and v.source.column_names == ("id", "name", "added") and v.ddl == self.SQL

    def test_a_batch_ending_at_the_cut_over_leaves_it_pending(self):
        p = Planner("lenient", PG)
        steps = p.steps(self.records()[:2])
        assert step_kinds(steps) == ["rows", "change"]
        assert p.history.at(T, offset(1000)).pending
        assert p.history.latest(T).source == base()  # the old shape until rows say otherwise

    def test_a_cut_over_without_a_change_of_columns(self):
        p = Planner("lenient", PG)
        steps = p.steps([rows(base(), 1), ddl(self.SQL, 1000, 10), rows(base(), 10)])
        assert step_kinds(steps) == ["rows", "change", "rows"] and steps[1].actions == ()

    def test_renamed_away_for_good(self):
        p = Planner("lenient", PG)
        steps = p.steps([ddl("RENAME TABLE t TO t_archive", 1000, 10)])
        (change,) = steps
        assert change.source_after is None and change.sink_after == base()
        assert any("renamed away" in n for n in change.notes)
        assert p.history.latest_sources() == []


class TestPlannerOtherStatements:
    def test_an_index_only_change_gives_no_step(self):
        p = Planner("evolve", PG)
        recs = [rows(base(), 1), ddl("ALTER TABLE t ADD INDEX i (name)", 1000, 10), rows(base(), 11)]
        steps = p.steps(recs)
        assert not any(isinstance(s, ChangeStep) for s in steps)
        assert [r for s in steps for r in s.records] == [recs[0], recs[2]]
        assert all(s.source == base() and s.sink == base() for s in steps)
        assert p.recorded == 0 and p.history.at(T, offset(1000)) is None

    @pytest.mark.parametrize("can", [PG, DELTA], ids=["pg", "delta"])
    def test_truncate_under_evolve_when_the_sink_can(self, can):
        p = Planner("evolve", can)
        steps = p.steps([rows(base(), 1), ddl("TRUNCATE TABLE t", 1000, 10), rows(base(), 11)])
        assert step_kinds(steps) == ["rows", "change", "rows"]
        change = steps[1]
        assert kinds(change.actions) == [B.TRUNCATE] and change.sink_after == base() and change.notes == ()
        assert p.history.at(T, offset(1000)).actions == ({**B.SinkAction(B.TRUNCATE).to_dict()},)

    def test_truncate_under_evolve_when_the_sink_cannot(self):
        with pytest.raises(B.SchemaEvolutionError, match="cannot truncate"):
            Planner("evolve", NOTHING).plan([ddl("TRUNCATE TABLE t", 1000, 10)])

    def test_truncate_under_lenient_is_a_note(self):
        p = Planner("lenient", PG)
        (change,) = p.steps([ddl("TRUNCATE t", 1000, 10)])
        assert change.actions == () and change.sink_after == base()
        assert change.notes == (
            "truncate of shop.t logged, not applied to the sink (schema_change_behavior 'lenient')",
        )

    def test_drop_table_under_lenient_keeps_the_sink(self):
        p = Planner("lenient", PG)
        steps = p.steps([rows(base(), 1), ddl("DROP TABLE t", 1000, 10)])
        assert step_kinds(steps) == ["rows", "change"]
        change = steps[1]
        assert change.actions == () and change.source_after is None and change.sink_after == base()
        assert change.notes == ("drop of shop.t logged, not applied to the sink (schema_change_behavior 'lenient')",)
        assert p.history.latest_sinks() == {T: base()} and p.history.latest_sources() == []

    def test_drop_table_under_evolve_drops_the_sink_table(self):
        p = Planner("evolve", PG)
        (change,) = p.steps([ddl("DROP TABLE IF EXISTS t", 1000, 10)])
        assert kinds(change.actions) == [B.DROP_TABLE] and change.sink_after is None
        assert p.history.latest_sinks() == {}

    def test_rows_after_a_drop_are_refused(self):
        p = Planner("lenient", PG)
        with pytest.raises(SchemaMismatchError, match="after the table was dropped or renamed away"):
            p.plan([ddl("DROP TABLE t", 1000, 10), rows(base(), 11)])

    def test_a_statement_on_two_tables_changes_each_in_its_own_steps(self):
        p = Planner("evolve", PG, tables=[base(T), base(U)])
        sql = "DROP TABLE t, u"
        out = p.plan([ddl(sql, 1000, 10, table=T), ddl(sql, 1000, 10, table=U)])
        assert list(out) == [T, U]
        for t in (T, U):
            (change,) = out[t]
            assert kinds(change.actions) == [B.DROP_TABLE]
            assert p.history.at(t, offset(1000)).source is None


class TestPlannerTableComesBack:
    """A captured name that went away (DROP, RENAME away) and comes back (CREATE, RENAME into it)."""

    CREATE = "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, name VARCHAR(10), born INT)"
    NEW = schema(int_("id", False), varchar("name"), int_("born"))

    def test_drop_then_create_under_evolve_creates_the_sink_table_again_empty(self):
        p = Planner("evolve", PG)
        steps = p.steps(
            [rows(base(), 1), ddl("DROP TABLE t", 1000, 10), ddl(self.CREATE, 2000, 20), rows(self.NEW, 21)]
        )
        assert step_kinds(steps) == ["rows", "change", "change", "rows"]
        assert kinds(steps[1].actions) == [B.DROP_TABLE] and steps[1].sink_after is None
        create = steps[2]
        assert kinds(create.actions) == [B.CREATE_TABLE] and create.sink_before is None
        assert names(create.sink_after) == ["id", "name", "born"] and create.sink_after.row_identity == ("id",)
        assert steps[3].sink == create.sink_after and steps[3].source.column_names == ("id", "name", "born")

    def test_create_after_a_logged_drop_plans_columns_from_what_the_sink_kept(self):
        p = Planner("lenient", DELTA)
        steps = p.steps([ddl("DROP TABLE t", 1000, 10), ddl(self.CREATE, 2000, 20), rows(self.NEW, 21)])
        create = steps[1]
        assert [(a.kind, a.name) for a in create.actions] == [(B.ADD_COLUMN, "born")]
        assert any("keeps the rows it had" in n for n in create.notes)
        assert names(steps[2].sink) == ["id", "name", "born"]

    @pytest.mark.parametrize("behavior, can", [("lenient", DELTA), ("evolve", PG)])
    def test_renamed_away_and_back_is_settled_by_its_rows(self, behavior, can):
        p = Planner(behavior, can)
        steps = p.steps(
            [
                rows(base(), 1),
                ddl("RENAME TABLE t TO t_parked", 1000, 10),
                ddl("RENAME TABLE t_parked TO t", 2000, 20),
                rows(base(), 21),
            ]
        )
        assert step_kinds(steps) == ["rows", "change", "change", "change", "rows"]
        settled = steps[3]
        assert settled.actions == () and settled.sink_after == base()
        assert steps[4].source.row_identity == ("id",)  # the key of the shape it had before it went away
        assert not p.history.latest(T).pending

    def test_renamed_under_the_name_after_the_sink_dropped_it_creates_the_table(self):
        p = Planner("evolve", PG)
        steps = p.steps([ddl("DROP TABLE t", 1000, 10), ddl("RENAME TABLE t_new TO t", 2000, 20), rows(self.NEW, 21)])
        assert step_kinds(steps) == ["change", "change", "change", "rows"]
        assert kinds(steps[2].actions) == [B.CREATE_TABLE] and names(steps[2].sink_after) == ["id", "name", "born"]
        assert steps[2].sink_after.row_identity == ("id",)
