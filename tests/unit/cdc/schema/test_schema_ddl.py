"""DDL of binlog QUERY events read as schema change events, and those events applied to schemas.

The statement corpus (ddl_corpus.yaml) holds real DDL as MySQL 5.7/8.0/8.4 and MariaDB
10.x/11.x clients, gh-ost and pt-online-schema-change send it, with the events expected.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.schema.ddl import might_touch, parse_ddl
from airflow_provider_mysqlcdc.cdc.schema.ddl_tokens import DdlParseError, unwrap_executable_comments
from airflow_provider_mysqlcdc.cdc.schema.events import (
    EVENT_TYPES,
    AddColumn,
    AlterColumnType,
    AlterKey,
    ConvertCharset,
    CreateTable,
    DropColumn,
    DropDatabase,
    DropTable,
    RenameColumn,
    RenameTable,
    SetColumnDefault,
    SetDefaultCharset,
    TruncateTable,
    change_from_dict,
)
from airflow_provider_mysqlcdc.cdc.schema.evolve import SchemaChangeError, apply_change, apply_to_tables
from airflow_provider_mysqlcdc.cdc.source.version import ServerVersion

CORPUS = yaml.safe_load((Path(__file__).parent / "ddl_corpus.yaml").read_text(encoding="utf-8"))


def _parse(entry: dict) -> list:
    server = ServerVersion.parse(entry["server"]) if entry.get("server") else None
    return parse_ddl(entry["sql"], entry.get("db", "shop"), server=server)


def _plain(value):
    """to_dict() output with TableIds written 'db.table' (as the corpus writes them)."""
    if isinstance(value, dict):
        if set(value) == {"database", "table"} and "." not in value["database"]:
            return f"{value['database']}.{value['table']}"
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _mismatch(expected, actual, path="") -> str | None:
    """Where ``actual`` differs from ``expected`` (dicts: a subset match; lists: same length)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected a mapping, got {actual!r}"
        for k, v in expected.items():
            if k not in actual:
                return f"{path}.{k}: missing"
            why = _mismatch(v, actual[k], f"{path}.{k}")
            if why:
                return why
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{path}: expected {len(expected)} items, got {actual!r}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            why = _mismatch(e, a, f"{path}[{i}]")
            if why:
                return why
        return None
    if isinstance(expected, (int, float)) and not isinstance(expected, bool) and isinstance(actual, str):
        actual = type(expected)(actual) if actual.lstrip("-").replace(".", "", 1).isdigit() else actual
    return None if expected == actual else f"{path}: expected {expected!r}, got {actual!r}"


def test_the_corpus_is_large_and_covers_every_event_kind():
    assert len(CORPUS) >= 80
    assert len({e["id"] for e in CORPUS}) == len(CORPUS), "ids must be unique"
    kinds = {ev["kind"] for e in CORPUS for ev in e.get("events") or []}
    assert kinds == set(EVENT_TYPES), set(EVENT_TYPES) - kinds


@pytest.mark.parametrize("entry", CORPUS, ids=[e["id"] for e in CORPUS])
def test_corpus_statement(entry):
    if entry.get("error"):
        with pytest.raises(DdlParseError):
            _parse(entry)
        return
    events = _parse(entry)
    actual = [_plain(e.to_dict()) for e in events]
    why = _mismatch(entry["events"], actual)
    assert why is None, f"{why}\n  got: {json.dumps(actual, ensure_ascii=False, indent=1)[:3000]}"
    for e in events:  # JSON round trip
        d = json.loads(json.dumps(e.to_dict()))
        assert change_from_dict(d) == e
    names = {t.table for e in events for t in e.tables}
    assert not names or might_touch(entry["sql"], names), "might_touch must see every table an event names"
    for name in names:
        assert might_touch(entry["sql"], {name.upper()}) or not name.isascii()


# --- might_touch -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql, captured, expected",
    [
        ("ALTER TABLE orders ADD x INT", {"orders"}, True),
        ("ALTER TABLE `Orders` ADD x INT", {"orders"}, True),
        ("ALTER TABLE shop.`orders` ADD x INT", {"items", "orders"}, True),
        ("ALTER TABLE `we``ird` ADD x INT", {"we`ird"}, True),
        ('ALTER TABLE "q""t" ADD x INT', {'q"t'}, True),
        ("ALTER TABLE `bestellungen_ü` ADD x INT", {"bestellungen_ü"}, True),
        ("RENAME TABLE _orders_gho TO orders", {"orders"}, True),
        ("ALTER TABLE customers ADD x INT", {"orders"}, False),
        ("CREATE TABLE audit_log (id INT)", {"orders", "items"}, False),
        ("DROP DATABASE shop", {"orders"}, True),
        ("/*!40000 DROP SCHEMA IF EXISTS `shop`*/", {"orders"}, True),
        ("CREATE DATABASE shop", {"orders"}, False),
        ("COMMIT", {"orders"}, False),
        ("ALTER TABLE customers ADD x INT", set(), False),
    ],
)
def test_might_touch(sql, captured, expected):
    assert might_touch(sql, captured) is expected


def test_might_touch_accepts_table_ids():
    assert might_touch("TRUNCATE shop.orders", [TableId("shop", "orders")])


def test_might_touch_is_conservative_not_exact():
    # A name inside another name or a literal is enough: the full parse decides then.
    assert might_touch("ALTER TABLE orders_archive ADD x INT", {"orders"})
    assert parse_ddl("ALTER TABLE orders_archive ADD x INT", "shop")[0].tables == (TableId("shop", "orders_archive"),)


# --- executable comments ---------------------------------------------------------------------

MARIADB = ServerVersion.parse("10.11.6-MariaDB")
MYSQL8 = ServerVersion.parse("8.0.36")
MYSQL57 = ServerVersion.parse("5.7.44-log")


@pytest.mark.parametrize(
    "server, sql, runs",
    [
        (None, "/*!80023 X */", True),
        (MYSQL8, "/*!80023 X */", True),
        (MYSQL57, "/*!80023 X */", False),
        (MARIADB, "/*!80023 X */", False),  # MariaDB skips 50700..99999
        (MARIADB, "/*!50100 X */", True),
        (MARIADB, "/*!100301 X */", True),
        (MARIADB, "/*!110400 X */", False),
        (MARIADB, "/*M!100301 X */", True),
        (MYSQL8, "/*M!100301 X */", False),  # MySQL: an ordinary comment
        (MYSQL8, "/*! X */", True),
    ],
)
def test_executable_comment_versions(server, sql, runs):
    out = unwrap_executable_comments(sql, server)
    assert len(out) == len(sql)  # positions are kept
    assert (out.strip() == "X") is runs
    assert (out == sql) is not runs  # a comment the server skips stays a comment


def test_executable_comment_markers_inside_strings_stay():
    sql = "ALTER TABLE t ADD c VARCHAR(9) DEFAULT '/*!50100 no */' /*!50100 NOT NULL */"
    out = unwrap_executable_comments(sql)
    assert "'/*!50100 no */'" in out and "/*!50100 NOT" not in out
    (add,) = parse_ddl(sql, "db")
    assert add.column.nullable is False and add.column.default == "'/*!50100 no */'"


# --- events ----------------------------------------------------------------------------------


def test_event_dicts_are_json_and_name_their_kind():
    col = parse_ddl("ALTER TABLE t ADD c ENUM('a','b') NOT NULL", "db")[0].column
    events = [
        CreateTable(TableId("db", "t"), (col,), ("c",), (("c",),), None, "utf8mb4"),
        CreateTable(TableId("db", "t2"), like=TableId("db", "t")),
        AddColumn(TableId("db", "t"), col, after="x"),
        DropColumn(TableId("db", "t"), "c", True),
        RenameColumn(TableId("db", "t"), "a", "b"),
        AlterColumnType(TableId("db", "t"), "c", col, first=True),
        SetColumnDefault(TableId("db", "t"), "c", "'a'"),
        AlterKey(TableId("db", "t"), ("a", "b")),
        ConvertCharset(TableId("db", "t"), "latin1"),
        SetDefaultCharset(TableId("db", "t"), "latin1", "latin1_bin"),
        RenameTable(TableId("db", "t"), TableId("db2", "u")),
        TruncateTable(TableId("db", "t")),
        DropTable(TableId("d.b", "t.x")),
        DropDatabase("db"),
    ]
    assert {type(e) for e in events} == set(EVENT_TYPES.values())
    for e in events:
        d = json.loads(json.dumps(e.to_dict()))
        assert d["kind"] == e.kind and change_from_dict(d) == e
    assert events[1].tables == (TableId("db", "t2"), TableId("db", "t"))
    assert events[10].tables == (TableId("db", "t"), TableId("db2", "u"))
    assert events[-1].tables == ()
    with pytest.raises(ValueError):
        change_from_dict({"kind": "nope"})


def test_column_def_to_column_takes_the_table_charset_for_text_only():
    (create,) = parse_ddl("CREATE TABLE t (a VARCHAR(3), b INT, c TEXT CHARSET latin1 COLLATE latin1_bin)", "db")
    a, b, c = (d.to_column(i + 1, "utf8mb4") for i, d in enumerate(create.columns))
    assert (a.charset, a.collation, a.ordinal) == ("utf8mb4", None, 1)
    assert b.charset is None and b.unsigned is False
    assert (c.charset, c.collation) == ("latin1", "latin1_bin")


def test_unparseable_statement_is_named_shortened():
    sql = "ALTER TABLE orders ADD v VARCHAR NOT NULL, " + ", ".join(f"ADD c{i} INT" for i in range(100))
    with pytest.raises(DdlParseError) as e:
        parse_ddl(sql, "shop")
    assert "ALTER TABLE orders ADD v VARCHAR" in str(e.value) and "..." in str(e.value)
    assert "Fix:" in str(e.value) and e.value.statement == sql


def test_a_parse_error_names_the_tables_read_before_it():
    with pytest.raises(DdlParseError) as e:
        parse_ddl("ALTER TABLE billing.invoices FROBNICATE", "shop")
    assert e.value.tables == (TableId("billing", "invoices"),)
    with pytest.raises(DdlParseError) as e:
        parse_ddl("ALTER TABLE t ADD c INT) NOT NULL", "shop")  # unbalanced: never given to sqlglot
    assert "unbalanced" in e.value.reason and e.value.tables == (TableId("shop", "t"),)


@pytest.mark.parametrize("entry", [e for e in CORPUS if len(e["sql"]) < 400], ids=lambda e: e["id"])
def test_damaged_statements_fail_only_with_ddl_parse_error(entry):
    """Every prefix of a corpus statement, and the statement minus any one character:
    either events or DdlParseError, never another exception."""
    sql = entry["sql"]
    for cut in range(1, len(sql)):
        for variant in (sql[:cut], sql[:cut] + sql[cut + 1 :]):
            try:
                parse_ddl(variant, "shop")
            except DdlParseError:
                pass


# --- apply_change ----------------------------------------------------------------------------

DB = "shop"
T = TableId(DB, "t")


def col(name, ordinal, data_type="int", column_type=None, nullable=True, charset=None, **kw) -> Column:
    return Column(name, ordinal, data_type, column_type or data_type, nullable, charset, **kw)


def schema(*columns: Column, pk=("id",), table=T, chunk=None, identity=None) -> TableSchema:
    return TableSchema(
        table,
        tuple(columns),
        tuple(pk),
        tuple(chunk if chunk is not None else pk),
        tuple(identity if identity is not None else (pk or [c.name for c in columns])),
    )


def evolve(s: TableSchema | None, *sqls: str, charset: str | None = "utf8mb4") -> TableSchema | None:
    for sql in sqls:
        for change in parse_ddl(sql, DB):
            s = apply_change(s, change, charset)
    return s


BASE = schema(
    col("id", 1, nullable=False),
    col("note", 2, "varchar", "varchar(10)", charset="utf8mb4", char_max_length=10),
    col("qty", 3),
)


def shape(s: TableSchema) -> list[tuple]:
    return [(c.ordinal, c.name, c.column_type, c.nullable) for c in s.columns]


def test_add_column_positions_and_ordinals():
    s = evolve(BASE, "ALTER TABLE t ADD a INT FIRST, ADD b INT AFTER id, ADD c INT, ADD d INT AFTER ID")
    assert [c.name for c in s.columns] == ["a", "id", "d", "b", "note", "qty", "c"]
    assert [c.ordinal for c in s.columns] == list(range(1, 8))
    assert s.primary_key == ("id",) and s.row_identity == ("id",)


def test_add_existing_column_fails_unless_if_not_exists():
    with pytest.raises(SchemaChangeError, match="already has"):
        evolve(BASE, "ALTER TABLE t ADD NOTE INT")
    assert evolve(BASE, "ALTER TABLE t ADD COLUMN IF NOT EXISTS note INT") == BASE


def test_drop_column_and_drop_of_a_key_column():
    s = evolve(BASE, "ALTER TABLE t DROP COLUMN Note")
    assert [c.name for c in s.columns] == ["id", "qty"] and s.columns[1].ordinal == 2
    assert evolve(BASE, "ALTER TABLE t DROP COLUMN IF EXISTS nope") == BASE
    with pytest.raises(SchemaChangeError, match="no column 'nope'"):
        evolve(BASE, "ALTER TABLE t DROP nope")
    s = evolve(BASE, "ALTER TABLE t DROP id")  # the only key column: the key is gone
    assert s.primary_key == () and s.row_identity == ("note", "qty") and s.chunk_key == ()
    two = schema(col("a", 1, nullable=False), col("b", 2, nullable=False), col("c", 3), pk=("a", "b"))
    s = evolve(two, "ALTER TABLE t DROP b")  # MySQL 8: the column leaves the key
    assert s.primary_key == ("a",) and s.row_identity == ("a",) and s.chunk_key == ("a",)


def test_rename_column_renames_keys_and_is_case_insensitive():
    s = evolve(BASE, "ALTER TABLE t RENAME COLUMN ID TO ident")
    assert s.column_names == ("ident", "note", "qty") and s.primary_key == ("ident",)
    assert s.chunk_key == ("ident",) and s.row_identity == ("ident",)
    assert evolve(BASE, "ALTER TABLE t RENAME COLUMN note TO Note").column_names == ("id", "Note", "qty")
    with pytest.raises(SchemaChangeError, match="already has"):
        evolve(BASE, "ALTER TABLE t RENAME COLUMN note TO QTY")


def test_rename_swap_in_one_statement():
    s = evolve(BASE, "ALTER TABLE t RENAME COLUMN note TO qty, RENAME COLUMN qty TO note")
    assert shape(s) == [(1, "id", "int", False), (2, "qty", "varchar(10)", True), (3, "note", "int", True)]
    s = evolve(BASE, "ALTER TABLE t CHANGE note qty TEXT, CHANGE qty note BIGINT")
    assert [(c.name, c.data_type) for c in s.columns] == [("id", "int"), ("qty", "text"), ("note", "bigint")]


def test_modify_and_change():
    s = evolve(BASE, "ALTER TABLE t MODIFY NOTE VARCHAR(50) CHARACTER SET latin1 NOT NULL FIRST")
    assert shape(s)[0] == (1, "NOTE", "varchar(50)", False) and s.columns[0].charset == "latin1"
    s = evolve(BASE, "ALTER TABLE t CHANGE qty quantity BIGINT UNSIGNED AFTER id")
    assert [c.name for c in s.columns] == ["id", "quantity", "note"] and s.columns[1].unsigned
    s = evolve(BASE, "ALTER TABLE t MODIFY note TEXT", charset=None)  # table default unknown: keeps the charset
    assert s.columns[1].charset == "utf8mb4"
    s = evolve(BASE, "ALTER TABLE t MODIFY id BIGINT NULL")  # a primary key column stays NOT NULL
    assert s.columns[0].nullable is False and s.columns[0].data_type == "bigint"


def test_primary_key_changes():
    s = evolve(BASE, "ALTER TABLE t DROP PRIMARY KEY")
    assert s.primary_key == () and s.row_identity == ("id", "note", "qty") and s.chunk_key == ("id",)
    s = evolve(s, "ALTER TABLE t ADD PRIMARY KEY (note, QTY)")
    assert s.primary_key == ("note", "qty") and s.chunk_key == ("note", "qty")
    assert [c.nullable for c in s.columns] == [False, False, False]
    with pytest.raises(SchemaChangeError):
        evolve(BASE, "ALTER TABLE t ADD PRIMARY KEY (nope)")


def test_row_identity_without_primary_key_follows_all_columns():
    s = schema(col("a", 1), col("b", 2), pk=(), chunk=("a",))
    s = evolve(s, "ALTER TABLE t ADD c INT")
    assert s.row_identity == ("a", "b", "c") and s.chunk_key == ("a",)
    s = evolve(s, "ALTER TABLE t RENAME COLUMN a TO z")
    assert s.chunk_key == ("z",) and s.row_identity == ("z", "b", "c")


def test_unique_key_identity_is_kept_while_valid():
    s = schema(col("a", 1, nullable=False), col("b", 2), pk=(), chunk=("a",), identity=("a",))
    assert evolve(s, "ALTER TABLE t ADD c INT").row_identity == ("a",)
    assert evolve(s, "ALTER TABLE t MODIFY a INT NULL").row_identity == ("a", "b")


def test_create_table_and_if_not_exists():
    s = evolve(None, "CREATE TABLE t (id INT, u VARCHAR(5) NOT NULL, v TEXT, PRIMARY KEY (id)) CHARSET latin1")
    assert s.table_id == T and s.primary_key == ("id",) and s.columns[0].nullable is False
    assert s.columns[1].charset == "latin1" and s.columns[2].charset == "latin1"
    assert evolve(BASE, "CREATE TABLE IF NOT EXISTS t (x INT)") == BASE
    s = evolve(None, "CREATE TABLE t (a INT, u INT NOT NULL UNIQUE, w INT UNIQUE)", charset=None)
    assert s.primary_key == () and s.row_identity == ("u",) and s.chunk_key == ()
    s = evolve(s, "ALTER TABLE t ADD x VARCHAR(3)", charset=None)
    assert s.columns[-1].charset is None  # no table charset given, none recorded


def test_create_table_default_charset_is_remembered():
    s = evolve(None, "CREATE TABLE t (id INT PRIMARY KEY) DEFAULT CHARSET=latin1", charset=None)
    s = evolve(s, "ALTER TABLE t ADD v VARCHAR(5)", charset=None)
    assert s.columns[1].charset == "latin1"
    s = evolve(s, "ALTER TABLE t DEFAULT CHARSET utf8mb4", "ALTER TABLE t ADD w TEXT", charset=None)
    assert s.columns[2].charset == "utf8mb4" and s.columns[1].charset == "latin1"


def test_create_like_and_select():
    (like,) = parse_ddl("CREATE TABLE t2 LIKE t", DB)
    s = apply_change(None, like, like=BASE)
    assert s.table_id == TableId(DB, "t2") and s.columns == BASE.columns and s.primary_key == ("id",)
    with pytest.raises(SchemaChangeError, match="needed"):
        apply_change(None, like)
    (ctas,) = parse_ddl("CREATE TABLE t3 SELECT * FROM t", DB)
    with pytest.raises(SchemaChangeError, match="query"):
        apply_change(None, ctas)


def test_rename_truncate_drop():
    (rename,) = parse_ddl("RENAME TABLE t TO archive.t_old", DB)
    s = apply_change(BASE, rename)
    assert s.table_id == TableId("archive", "t_old") and s.columns == BASE.columns
    assert apply_change(BASE, parse_ddl("TRUNCATE t", DB)[0]) == BASE
    assert apply_change(BASE, parse_ddl("DROP TABLE IF EXISTS t", DB)[0]) is None
    assert apply_change(BASE, DropDatabase("shop")) is None and apply_change(BASE, DropDatabase("other")) == BASE
    with pytest.raises(SchemaChangeError, match="applied to the schema of"):
        apply_change(BASE, parse_ddl("ALTER TABLE other ADD x INT", DB)[0])
    with pytest.raises(SchemaChangeError, match="not known"):
        apply_change(None, parse_ddl("ALTER TABLE t ADD x INT", DB)[0])


def test_set_default_changes_no_shape():
    assert evolve(BASE, "ALTER TABLE t ALTER COLUMN qty SET DEFAULT 5, ALTER note DROP DEFAULT") == BASE


def test_convert_charset_widens_text_like_the_server():
    s = schema(
        col("id", 1, nullable=False),
        col("a", 2, "text", charset="latin1", char_max_length=65535),
        col("b", 3, "varchar", "varchar(10)", charset="latin1", char_max_length=10),
        col("c", 4, "tinytext", charset="utf8mb3", char_max_length=255),
        col("e", 5, "enum", "enum('a')", charset="latin1", char_max_length=1),
        col("bl", 6, "blob", char_max_length=65535),
    )
    u = evolve(s, "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4")
    assert [(c.name, c.data_type, c.charset) for c in u.columns] == [
        ("id", "int", None),
        ("a", "mediumtext", "utf8mb4"),
        ("b", "varchar", "utf8mb4"),
        ("c", "text", "utf8mb4"),
        ("e", "enum", "utf8mb4"),
        ("bl", "blob", None),
    ]
    assert u.columns[1].char_max_length == 16777215
    back = evolve(u, "ALTER TABLE t CONVERT TO CHARACTER SET latin1 COLLATE latin1_bin")
    assert back.columns[1].data_type == "mediumtext" and back.columns[1].collation == "latin1_bin"
    b = evolve(back, "ALTER TABLE t CONVERT TO CHARACTER SET binary")
    assert [(c.data_type, c.column_type, c.charset) for c in b.columns[1:5]] == [
        ("mediumblob", "mediumblob", None),
        ("varbinary", "varbinary(10)", None),
        ("blob", "blob", None),
        ("enum", "enum('a')", "binary"),
    ]


def test_apply_to_tables_follows_a_gh_ost_cut_over():
    orders, gho, dele = TableId(DB, "orders"), TableId(DB, "_orders_gho"), TableId(DB, "_orders_del")
    tables = {orders: schema(col("id", 1, nullable=False), col("a", 2), table=orders)}
    for sql in [
        "create /* gh-ost */ table `shop`.`_orders_gho` like `shop`.`orders`",
        "alter /* gh-ost */ table `shop`.`_orders_gho` add column b int, drop column a",
        "create /* gh-ost */ table `shop`.`_orders_del` (id int auto_increment primary key) engine=InnoDB",
        "drop /* gh-ost */ table if exists `shop`.`_orders_del`",
        "create /* gh-ost */ table `shop`.`_orders_del` (id int auto_increment primary key)",
        "rename /* gh-ost */ table `shop`.`orders` to `shop`.`_orders_del`, `shop`.`_orders_gho` to `shop`.`orders`",
        "drop /* gh-ost */ table if exists `shop`.`_orders_del`",
    ]:
        for change in parse_ddl(sql, DB):
            tables = apply_to_tables(tables, change, "utf8mb4")
    assert set(tables) == {orders} and tables[orders].column_names == ("id", "b")
    assert gho not in tables and dele not in tables


def test_apply_to_tables_drops_a_name_taken_by_an_untracked_table():
    orders = TableId(DB, "orders")
    tables = {orders: schema(col("id", 1), table=orders)}
    for change in parse_ddl("RENAME TABLE orders TO orders_old, orders_new TO orders", DB):
        tables = apply_to_tables(tables, change)
    assert set(tables) == {TableId(DB, "orders_old")}
    assert apply_to_tables(tables, DropDatabase(DB)) == {}
