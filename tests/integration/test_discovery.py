"""Table discovery against a real server: patterns, keys, and the errors that say what to fix."""

import contextlib

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.source.discovery import discover_tables, read_table_schema

pytestmark = pytest.mark.integration


@pytest.fixture
def shop(mariadb, fresh_db):
    mariadb.execute(
        "CREATE TABLE order_1 (id BIGINT UNSIGNED PRIMARY KEY, note VARCHAR(20) COLLATE utf8mb4_bin, "
        "amount DECIMAL(10,2), at DATETIME(3))",
        "CREATE TABLE order_2 (id INT PRIMARY KEY)",
        "CREATE TABLE items (b INT NOT NULL, a INT NOT NULL, q INT, PRIMARY KEY (a, b))",
        "CREATE TABLE nopk (x INT, code VARCHAR(10) NOT NULL, email VARCHAR(50), "
        "UNIQUE KEY u_email (email), UNIQUE KEY u_code (code))",
        "CREATE TABLE bare (x INT, y INT)",
        "CREATE VIEW v AS SELECT id FROM order_2",
        "INSERT INTO order_2 VALUES (1), (2), (3)",
        database=fresh_db,
    )
    with contextlib.closing(mariadb.source_config().connect()) as conn:
        yield fresh_db, conn


def names(schemas):
    return [str(s.table_id) for s in schemas]


def test_exact_regex_and_exclude(shop):
    db, conn = shop
    assert names(discover_tables(conn, [f"{db}.order_2"])) == [f"{db}.order_2"]
    got = discover_tables(conn, [rf"{db}\.order_.*"])
    assert names(got) == [f"{db}.order_1", f"{db}.order_2"]
    got = discover_tables(conn, [f"{db}.*"], exclude=[f"{db}.order_1", rf"{db}\.(bare|nopk)"], chunk_key_columns={})
    assert names(got) == [f"{db}.items", f"{db}.order_2"]  # the view is not a base table


def test_dot_in_an_exact_name_is_literal(shop):
    db, conn = shop
    with pytest.raises(ConfigError, match="matches no table"):
        discover_tables(conn, [f"{db}.order.1"])


def test_pattern_matching_nothing_is_named(shop):
    db, conn = shop
    with pytest.raises(ConfigError, match=rf"'{db}\.nothing_here'"):
        discover_tables(conn, [f"{db}.order_1", f"{db}.nothing_here"])
    with pytest.raises(ConfigError, match="no table"):
        discover_tables(conn, ["mysql.user"])  # system schemas never count
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        discover_tables(conn, [f"{db}.(order"])
    with pytest.raises(ConfigError, match="leaves no table"):
        discover_tables(conn, [f"{db}.order_2"], exclude=[f"{db}.order_.*"])


def test_every_problem_of_a_table_list_is_named_at_once(shop):
    """A user fixes the list in one go: each entry matching nothing, a view, a keyless table."""
    db, conn = shop
    with pytest.raises(ConfigError) as e:
        discover_tables(conn, [f"{db}.order_1", f"{db}.no_such_table", f"{db}.v", f"{db}.bare", "Order_2"])
    text = str(e.value)
    first, *rest = text.splitlines()
    assert "4 problems" in first and "Fix:" in first
    assert len(rest) == 4 and all("Fix:" in line for line in rest), text
    assert f"'{db}.no_such_table' matches no table" in text
    assert f"'{db}.v' matches only views" in text
    assert f"table {db}.bare has no primary key" in text
    assert "'Order_2' matches no table on the server. Fix: write it as 'database.table'" in text


def test_columns_and_keys(shop):
    db, conn = shop
    (s,) = discover_tables(conn, [f"{db}.order_1"])
    assert s.primary_key == s.chunk_key == s.row_identity == ("id",)
    id_, note, amount, at = s.columns
    assert (id_.name, id_.ordinal, id_.data_type, id_.unsigned, id_.nullable) == ("id", 1, "bigint", True, False)
    assert (note.charset, note.collation, note.char_max_length, note.nullable) == ("utf8mb4", "utf8mb4_bin", 20, True)
    assert (amount.numeric_precision, amount.numeric_scale) == (10, 2)
    assert at.datetime_precision == 3 and at.column_type == "datetime(3)"
    items = read_table_schema(conn, TableId(db, "items"))
    assert items.primary_key == items.chunk_key == ("a", "b")  # index order, not column order
    (o2,) = discover_tables(conn, [f"{db}.order_2"])
    assert o2.approx_rows >= 0 and o2.engine == "InnoDB"


def test_no_primary_key_needs_a_chunk_key(shop):
    db, conn = shop
    with pytest.raises(ConfigError) as e:
        discover_tables(conn, [f"{db}.nopk"])
    msg = str(e.value)
    assert f"{db}.nopk" in msg and f"chunk_key_columns={{'{db}.nopk': 'code'}}" in msg
    with pytest.raises(ConfigError, match=r"chunk_key_columns=\{.*'<column>'\}"):
        read_table_schema(conn, TableId(db, "bare"))
    (s,) = discover_tables(conn, [f"{db}.nopk"], chunk_key_columns={f"{db}.nopk": "email"})
    assert s.primary_key == () and s.chunk_key == ("email",)
    assert s.row_identity == ("code",)  # unique and NOT NULL; email is nullable
    bare = read_table_schema(conn, TableId(db, "bare"), chunk_key_column="x")
    assert bare.row_identity == ("x", "y")


def test_chunk_key_must_exist(shop):
    db, conn = shop
    with pytest.raises(ConfigError, match=r"no such column.*x, code, email"):
        discover_tables(conn, [f"{db}.nopk"], chunk_key_columns={f"{db}.nopk": "nope"})
    with pytest.raises(ConfigError, match="does not capture"):
        discover_tables(conn, [f"{db}.order_2"], chunk_key_columns={f"{db}.other": "x"})
    with pytest.raises(ConfigError, match="does not exist"):
        read_table_schema(conn, TableId(db, "v"))


def test_a_table_hidden_by_a_missing_grant_is_named_as_such(mariadb, shop):
    """The user may SELECT from order_2 only: order_1 exists but is invisible to it."""
    db, _ = shop
    mariadb.execute(
        "CREATE USER 'cdc_narrow'@'%' IDENTIFIED BY 'pw-narrow'",
        f"GRANT SELECT ON `{db}`.`order_2` TO 'cdc_narrow'@'%'",
    )
    try:
        source = mariadb.source_config(user="cdc_narrow", password="pw-narrow")
        with contextlib.closing(source.connect()) as conn:
            assert names(discover_tables(conn, [f"{db}.order_2"])) == [f"{db}.order_2"]
            with pytest.raises(ConfigError) as e:
                discover_tables(conn, [f"{db}.order_2", f"{db}.order_1"])
        text = str(e.value)
        assert f"'{db}.order_1' matches no table the connection's user can see: it has no SELECT grant" in text
        assert f"Fix: GRANT SELECT ON `{db}`.*" in text
    finally:
        mariadb.execute("DROP USER IF EXISTS 'cdc_narrow'@'%'")


def test_a_spatial_column_is_refused_at_discovery_naming_table_column_and_fix(mariadb, shop):
    """Before, it passed the plan and failed the whole snapshot batch, every table in it."""
    db, conn = shop
    mariadb.execute("CREATE TABLE places (id INT PRIMARY KEY, name VARCHAR(20), spot POINT)", database=db)
    assert names(discover_tables(conn, [f"{db}.order_2"])) == [f"{db}.order_2"]
    with pytest.raises(ConfigError) as e:
        discover_tables(conn, [f"{db}.order_2", f"{db}.places"])
    text = str(e.value)
    assert f"table {db}.places, column 'spot': type 'point' is not supported" in text
    assert f"Fix: leave the table out (exclude: ['{db}.places'])" in text
