"""The DDL reader against the server: parse_ddl + apply_change must predict information_schema.

Each scenario runs DDL on a real MariaDB. After every statement, the schemas tracked by
applying the parsed events (starting from ``read_table_schema`` before the first one) must
equal what ``read_table_schema`` reads now: the same tables, column names and order, types,
nullability, UNSIGNED, ENUM/SET members, numeric precision/scale, datetime precision,
character lengths, character sets (and collations where the statement named one) and
primary keys.

The tracker gets what a stream can know: the tables' default charsets as read at the start
(``TableSchema.extra``) and the database's default charset for CREATE TABLE.
"""

from __future__ import annotations

import contextlib
import dataclasses

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.schema.ddl import parse_ddl
from airflow_provider_mysqlcdc.cdc.schema.events import TEXT_TYPES, CreateTable
from airflow_provider_mysqlcdc.cdc.schema.evolve import DEFAULT_CHARSET_KEY, DEFAULT_COLLATION_KEY, apply_to_tables
from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
from airflow_provider_mysqlcdc.cdc.source.version import ServerVersion
from airflow_provider_mysqlcdc.cdc.types import _set_members

pytestmark = pytest.mark.integration

DB_CHARSET = "utf8mb4"  # the test server's character_set_server, so every fresh database's default

ORDERS = "CREATE TABLE orders (id INT PRIMARY KEY AUTO_INCREMENT, a INT, b VARCHAR(20), c DECIMAL(10,2) NOT NULL)"

# name -> (setup statements, DDL statements checked one by one). {db}: the fresh database,
# {other}: a second one.
SCENARIOS: dict[str, tuple[list[str], list[str]]] = {
    "add-columns-positions": (
        [ORDERS],
        [
            "ALTER TABLE orders ADD x INT AFTER a, ADD y INT AFTER a",
            "ALTER TABLE orders ADD COLUMN z VARCHAR(20) NOT NULL DEFAULT 'z' FIRST",
            "ALTER TABLE orders ADD COLUMN (p INT, q DECIMAL(8,3) UNSIGNED)",
            "ALTER TABLE orders ADD r INT FIRST, ADD s INT AFTER r, ADD t INT AFTER ID",
        ],
    ),
    "drop-columns": (
        [ORDERS],
        [
            "ALTER TABLE orders DROP a, DROP COLUMN IF EXISTS nope",
            "ALTER TABLE orders DROP COLUMN B",
        ],
    ),
    "modify-columns": (
        [ORDERS],
        [
            "ALTER TABLE orders MODIFY a BIGINT UNSIGNED NOT NULL, "
            "MODIFY b VARCHAR(30) CHARACTER SET latin1 COLLATE latin1_bin",
            "ALTER TABLE orders MODIFY COLUMN b TEXT AFTER id",
            "ALTER TABLE orders MODIFY c DECIMAL(20,6) NULL FIRST",
            "ALTER TABLE orders MODIFY id BIGINT NULL",  # stays NOT NULL: a primary key column
        ],
    ),
    "change-columns": (
        [ORDERS],
        [
            "ALTER TABLE orders CHANGE a a2 DECIMAL(12,4) FIRST, CHANGE COLUMN b b2 DATETIME(3)",
            "ALTER TABLE orders CHANGE a2 A2 INT, CHANGE b2 b3 DATETIME(3) AFTER A2",
            "ALTER TABLE orders CHANGE id ident BIGINT UNSIGNED AUTO_INCREMENT",
        ],
    ),
    "modify-changes-name-case": (
        ["CREATE TABLE t (id INT PRIMARY KEY, Abc INT, B INT)"],
        [
            "ALTER TABLE t MODIFY abc BIGINT",
            "ALTER TABLE t MODIFY COLUMN b SMALLINT UNSIGNED",
        ],
    ),
    "rename-columns": (
        [ORDERS],
        [
            "ALTER TABLE orders RENAME COLUMN a TO a2",
            "ALTER TABLE orders RENAME COLUMN a2 TO b_tmp, RENAME COLUMN b TO a2",
            "ALTER TABLE orders RENAME COLUMN b_tmp TO c, RENAME COLUMN c TO b",
            "ALTER TABLE orders RENAME COLUMN id TO ID2",
        ],
    ),
    "primary-key-changes": (
        ["CREATE TABLE t (a INT, b INT NOT NULL, c INT)"],
        [
            "ALTER TABLE t ADD PRIMARY KEY (a, B)",
            "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (b)",
            "ALTER TABLE t MODIFY a INT NULL",
            "ALTER TABLE t DROP PRIMARY KEY",
        ],
    ),
    "drop-key-column": ([ORDERS], ["ALTER TABLE orders DROP id"]),
    "add-key-column": (
        ["CREATE TABLE t (a INT)"],
        [
            "ALTER TABLE t ADD id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST",
        ],
    ),
    "enum-and-set": (
        [ORDERS],
        [
            "ALTER TABLE orders ADD e ENUM('a','b''c','d') NOT NULL DEFAULT 'a', ADD s SET('x','y','zz')",
            r"ALTER TABLE orders MODIFY e ENUM('a','b''c','d','e\\f', 'g  ')",
            "ALTER TABLE orders ADD e2 ENUM(\"dq\", 'sq') CHARACTER SET latin1",
        ],
    ),
    "type-synonyms": (
        [ORDERS],
        [
            "ALTER TABLE orders ADD t1 INTEGER, ADD t2 BOOL, ADD t3 DEC(5,2), ADD t4 NUMERIC(8), ADD t5 FIXED, "
            "ADD t6 REAL, ADD t7 DOUBLE PRECISION, ADD t8 INT8, ADD t9 MIDDLEINT, ADD t10 FLOAT(30), "
            "ADD t11 FLOAT(7,3), ADD t12 FLOAT UNSIGNED, ADD t13 INT4, ADD t14 CHARACTER VARYING(7), "
            "ADD t15 LONG, ADD t16 LONG VARBINARY, ADD t17 BIT(5), ADD t18 YEAR, ADD t19 TIME(2), "
            "ADD t20 TIMESTAMP(4) NULL, ADD t21 DATE, ADD t22 INT(10) UNSIGNED ZEROFILL, ADD t23 TINYINT(3) ZEROFILL, "
            "ADD t24 MEDIUMINT UNSIGNED, ADD t25 BIGINT(20) SIGNED, ADD t26 FLOAT4, ADD t27 FLOAT8, ADD t28 INT1, "
            "ADD t29 INT3, ADD t30 DOUBLE(10,2), ADD t31 BIT, ADD t32 LONG VARCHAR, ADD t33 BOOLEAN",
        ],
    ),
    "character-types": (
        [ORDERS],
        [
            "ALTER TABLE orders ADD ca CHAR, ADD cb NATIONAL VARCHAR(10), ADD cc NCHAR(2), ADD cd VARCHAR(5) BINARY, "
            "ADD ce VARCHAR(5) CHARACTER SET latin1 COLLATE latin1_bin, ADD cf VARCHAR(5) COLLATE utf8mb4_unicode_ci, "
            "ADD cg VARCHAR(5) CHARSET utf8, ADD ch VARCHAR(4) CHARACTER SET binary, ADD ci TEXT CHARACTER SET binary, "
            "ADD cj CHAR(3) BYTE, ADD ck VARCHAR(3) ASCII, ADD cl VARCHAR(3) UNICODE, ADD cm TEXT(50), ADD cn TEXT(100), "
            "ADD co TEXT(64) CHARSET latin1, ADD cp BLOB(70000), ADD cq BINARY, ADD cr VARBINARY(16), ADD cs TINYTEXT, "
            "ADD ct LONGBLOB, ADD cu MEDIUMTEXT CHARSET latin1, ADD cv JSON, ADD cw NATIONAL CHAR VARYING(4), "
            "ADD cx VARCHAR(5) CHARACTER SET latin1 BINARY",
        ],
    ),
    "convert-charset": (
        [
            "CREATE TABLE t (id INT PRIMARY KEY, a TEXT, b VARCHAR(10), c TINYTEXT CHARSET utf8mb3, "
            "e ENUM('a','b'), s SET('x'), i INT, bl BLOB) CHARSET latin1"
        ],
        [
            "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4",
            "ALTER TABLE t CONVERT TO CHARACTER SET latin1 COLLATE latin1_bin",
            "ALTER TABLE t ADD n VARCHAR(3)",
            "ALTER TABLE t CONVERT TO CHARACTER SET binary",
        ],
    ),
    "default-charset-is-tracked": (
        [],
        [
            "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5)) DEFAULT CHARSET=latin1",
            "ALTER TABLE t ADD b VARCHAR(5), MODIFY a TEXT",
            "ALTER TABLE t DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin",
            "ALTER TABLE t ADD c VARCHAR(5), ADD d VARCHAR(5) CHARSET latin1",
            "ALTER TABLE t MODIFY a VARCHAR(9)",
        ],
    ),
    "table-charset-from-the-start": (
        ["CREATE TABLE t (id INT PRIMARY KEY) CHARSET latin1"],
        [
            "ALTER TABLE t ADD a VARCHAR(3), ADD b ENUM('x')",
        ],
    ),
    "generated-columns": (
        [ORDERS],
        [
            "ALTER TABLE orders ADD g INT AS (a + 1) VIRTUAL, ADD h INT AS (a * 2) PERSISTENT",
            "ALTER TABLE orders ADD k VARCHAR(30) GENERATED ALWAYS AS (concat(b, 'x')) STORED AFTER id",
        ],
    ),
    "invisible-and-executable-comments": (
        [ORDERS],
        [
            "ALTER TABLE orders ADD x INT /*!80023 INVISIBLE */, ADD y INT /*M!100301 INVISIBLE */",
            "ALTER TABLE orders ADD z INT /*!50100 NOT NULL */ /*!99999 WHATEVER */",
            "ALTER TABLE orders /*!50100 ADD COLUMN w INT, */ ADD v INT",
        ],
    ),
    "comments-and-quoting": (
        [ORDERS],
        [
            "ALTER /* app */ TABLE `orders` -- why\n ADD `we``ird` INT, ADD `dot.col` INT # done",
            "ALTER TABLE `{db}`.`orders` ADD note VARCHAR(40) DEFAULT '/* not; a -- comment */', ADD `select` INT",
            "ALTER TABLE orders ADD `date` DATE, ADD status INT, ADD `key` INT",
        ],
    ),
    "unicode-names": (
        [],
        [
            "CREATE TABLE `bestellung_ü` (`größe` INT PRIMARY KEY, ünï VARCHAR(3))",
            "ALTER TABLE bestellung_ü ADD `名前` VARCHAR(20) AFTER `größe`",
            "ALTER TABLE `bestellung_ü` RENAME COLUMN ünï TO `ÜNÏ2`",
        ],
    ),
    "create-table-like-show-create": (
        [],
        [
            "CREATE TABLE `events` (\n  `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT,\n"
            "  `kind` enum('click','view') NOT NULL DEFAULT 'view',\n  `at` timestamp(6) NULL DEFAULT current_timestamp(6) "
            "ON UPDATE current_timestamp(6),\n  `payload` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL "
            "CHECK (json_valid(`payload`)),\n  `amount` decimal(14,4) DEFAULT 0.0000,\n"
            "  `flag` tinyint(1) NOT NULL DEFAULT 0,\n"
            "  PRIMARY KEY (`id`),\n  KEY `idx_kind` (`kind`)\n) ENGINE=InnoDB AUTO_INCREMENT=5 DEFAULT CHARSET=latin1 "
            "COLLATE=latin1_swedish_ci",
            "CREATE TABLE IF NOT EXISTS events (x INT)",
            "CREATE TABLE k (a INT, b INT, c INT, PRIMARY KEY (a, B), UNIQUE KEY (c, a)) "
            "/*!50100 PARTITION BY KEY (a) PARTITIONS 2 */",
            "CREATE OR REPLACE TABLE k (z INT NOT NULL, UNIQUE (z))",
            "CREATE TABLE s (id SERIAL, w INT)",
            "CREATE TABLE s2 (v INT NOT NULL SERIAL DEFAULT VALUE, w INT)",
        ],
    ),
    "create-like": (
        [ORDERS],
        [
            "CREATE TABLE orders_copy LIKE orders",
            "CREATE TABLE IF NOT EXISTS `{other}`.o2 (LIKE `{db}`.orders)",
            "ALTER TABLE orders_copy ADD extra INT",
        ],
    ),
    "gh-ost-migration": (
        [ORDERS],
        [
            "create /* gh-ost */ table `{db}`.`_orders_gho` like `{db}`.`orders`",
            "alter /* gh-ost */ table `{db}`.`_orders_gho` add column d int not null default 0, modify b varchar(50)",
            "create /* gh-ost */ table `{db}`.`_orders_ghc` (\n\t\t\tid bigint unsigned auto_increment,\n\t\t\t"
            "last_update timestamp not null DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n\t\t\t"
            "hint varchar(64) charset ascii not null,\n\t\t\tvalue varchar(4096) charset ascii not null,\n\t\t\t"
            "primary key(id),\n\t\t\tunique key hint_uidx(hint)\n\t\t) auto_increment=256 comment='gh-ost changelog'",
            "create /* gh-ost */ table `{db}`.`_orders_del` (\n\t\t\tid int auto_increment primary key\n\t\t) "
            "engine=InnoDB comment='ghost-cut-over-sentry'",
            "rename /* gh-ost */ table `{db}`.`orders` to `{db}`.`_orders_del2`, `{db}`.`_orders_gho` to `{db}`.`orders`",
            "drop /* gh-ost */ table if exists `{db}`.`_orders_del`",
            "drop /* gh-ost */ table if exists `{db}`.`_orders_del2`",
            "drop /* gh-ost */ table if exists `{db}`.`_orders_ghc`",
        ],
    ),
    "gh-ost-bumpy-cut-over": (
        [ORDERS, "CREATE TABLE _orders_gho LIKE orders"],
        [
            "alter /* gh-ost */ table `{db}`.`_orders_gho` add column d int",
            "alter /* gh-ost */ table `{db}`.`orders` rename `_orders_del`",
            "alter /* gh-ost */ table `{db}`.`_orders_gho` rename `orders`",
        ],
    ),
    "pt-online-schema-change": (
        [ORDERS],
        [
            "CREATE TABLE `{db}`.`_orders_new` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `a` int(11) DEFAULT NULL,\n"
            "  `b` varchar(20) DEFAULT NULL,\n  `c` decimal(10,2) NOT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB "
            "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
            "ALTER TABLE `{db}`.`_orders_new` ADD COLUMN region CHAR(2) NOT NULL DEFAULT 'EU', DROP COLUMN a",
            "RENAME TABLE `{db}`.`orders` TO `{db}`.`_orders_old`, `{db}`.`_orders_new` TO `{db}`.`orders`",
            "DROP TABLE IF EXISTS `{db}`.`_orders_old`",
        ],
    ),
    "rename-tables": (
        [ORDERS, "CREATE TABLE `{other}`.x (id INT PRIMARY KEY)"],
        [
            "ALTER TABLE orders RENAME TO orders2, ADD d INT",
            "ALTER TABLE orders2 RENAME AS `{other}`.orders3",
            "ALTER TABLE `{other}`.orders3 RENAME orders4",  # unqualified: the statement's default database
            "RENAME TABLE orders4 TO o5, `{other}`.x TO x2",
            "RENAME TABLE o5 TO tmp, x2 TO o5, tmp TO x2",
        ],
    ),
    "truncate-and-drop": (
        [ORDERS, "CREATE TABLE t2 (id INT PRIMARY KEY)"],
        [
            "TRUNCATE TABLE orders",
            "TRUNCATE t2",
            "DROP TABLE IF EXISTS t2, nope",
            "DROP TABLE `orders`",
        ],
    ),
    "mariadb-forms": (
        [ORDERS],
        [
            "ALTER ONLINE TABLE orders ADD o INT",
            "ALTER IGNORE TABLE orders ADD i INT",
            "ALTER TABLE IF EXISTS orders ADD COLUMN IF NOT EXISTS a INT",
            "ALTER TABLE orders DROP COLUMN IF EXISTS zz, ADD COLUMN IF NOT EXISTS n INT",
            "ALTER TABLE orders WAIT 5 ADD w TEXT COMPRESSED, ADD uu UUID, ADD ip INET6",
            "ALTER TABLE IF EXISTS nope ADD x INT",
        ],
    ),
    "no-shape-changes": (
        [ORDERS],
        [
            "ALTER TABLE orders ADD INDEX i (a), ADD UNIQUE KEY u (b), ENGINE=InnoDB, ALGORITHM=INPLACE, LOCK=NONE",
            "ALTER TABLE orders COMMENT='x, y', FORCE",
            "ALTER TABLE orders RENAME INDEX i TO i2, DROP INDEX u, ADD FULLTEXT KEY ft (b)",
            "ALTER TABLE orders ALTER COLUMN a SET DEFAULT 5, ALTER b DROP DEFAULT, ALTER COLUMN c SET DEFAULT (1 + 1)",
            "ALTER TABLE orders ADD CONSTRAINT chk CHECK (a > 0)",
            "ALTER TABLE orders DROP CONSTRAINT chk",
        ],
    ),
    "partitioning": (
        [ORDERS],
        [
            "ALTER TABLE orders PARTITION BY HASH(id) PARTITIONS 3",
            "ALTER TABLE orders TRUNCATE PARTITION p0, p1",
            "ALTER TABLE orders ADD d INT PARTITION BY KEY (id) PARTITIONS 2",
            "ALTER TABLE orders REMOVE PARTITIONING",
        ],
    ),
    "timestamps-and-defaults": (
        [ORDERS],
        [
            "ALTER TABLE orders ADD ts TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, "
            "ADD d6 DATETIME(6) DEFAULT NOW(6), ADD t TIMESTAMP(3) NULL",
            "ALTER TABLE orders MODIFY ts DATETIME(2) NULL",
        ],
    ),
}


def _tables(conn, databases: list[str]) -> list[TableId]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
            f"AND TABLE_SCHEMA IN ({', '.join(['%s'] * len(databases))})",
            databases,
        )
        return [TableId(db, t) for db, t in cur.fetchall()]


def _table_defaults(conn, t: TableId) -> dict:
    """The table's default charset and collation, as the tracker's ``extra``."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (t.database, t.table),
        )
        collation = cur.fetchone()[0]
    return {DEFAULT_CHARSET_KEY: collation.split("_")[0], DEFAULT_COLLATION_KEY: collation}


def _read(conn, t: TableId) -> TableSchema:
    try:
        return read_table_schema(conn, t)
    except ConfigError:  # no primary key: any column does as chunk key for the comparison
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
                "TABLE_NAME = %s ORDER BY ORDINAL_POSITION LIMIT 1",
                (t.database, t.table),
            )
            return read_table_schema(conn, t, chunk_key_column=cur.fetchone()[0])


def _shape(s: TableSchema, with_collation: set[str]) -> dict:
    """What must agree, per column; collations only where the tracker knows one."""

    def column(c):
        members = _set_members(c.column_type) if c.data_type in ("enum", "set") else None
        return dict(
            name=c.name,
            data_type=c.data_type,
            nullable=c.nullable,
            unsigned=c.unsigned,
            members=members,
            numeric_precision=c.numeric_precision,
            numeric_scale=c.numeric_scale,
            datetime_precision=c.datetime_precision,
            char_max_length=c.char_max_length,
            charset=c.charset if c.data_type in TEXT_TYPES or c.charset else None,
            collation=c.collation if c.name in with_collation else None,
        )

    return {"columns": [column(c) for c in s.columns], "primary_key": list(s.primary_key)}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_parsed_ddl_predicts_the_servers_schema(mariadb, fresh_db, name):
    setup, statements = SCENARIOS[name]
    other = f"{fresh_db}_o"
    fmt = lambda sql: sql.replace("{db}", fresh_db).replace("{other}", other)  # noqa: E731
    mariadb.execute(f"CREATE DATABASE `{other}`")
    try:
        if setup:
            mariadb.execute(*[fmt(s) for s in setup], database=fresh_db)
        server = ServerVersion.parse(mariadb.query("SELECT VERSION()")[0][0])
        with contextlib.closing(mariadb.source_config().connect()) as conn:
            tracked = {}
            for t in _tables(conn, [fresh_db, other]):
                s = _read(conn, t)
                tracked[t] = dataclasses.replace(s, extra=_table_defaults(conn, t))
            for sql in map(fmt, statements):
                mariadb.execute(sql, database=fresh_db)
                for change in parse_ddl(sql, fresh_db, server=server):
                    tracked = apply_to_tables(tracked, change, DB_CHARSET if isinstance(change, CreateTable) else None)
                actual = {t: _read(conn, t) for t in _tables(conn, [fresh_db, other])}
                assert sorted(tracked) == sorted(actual), f"after {sql!r}: tables differ"
                for t, s in actual.items():
                    known = {c.name for c in tracked[t].columns if c.collation}
                    want, got = _shape(tracked[t], known), _shape(s, known)
                    diff = [(w, g) for w, g in zip(want["columns"], got["columns"]) if w != g]
                    assert want == got, f"{t} after {sql!r}: tracked vs server: {diff or (want, got)}"
                    assert [c.ordinal for c in tracked[t].columns] == list(range(1, len(s.columns) + 1))
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{other}`")


def test_there_are_enough_scenarios():
    assert len(SCENARIOS) >= 30
    assert sum(len(ddl) for _setup, ddl in SCENARIOS.values()) >= 80
