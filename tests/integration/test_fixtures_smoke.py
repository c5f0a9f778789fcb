"""The shared fixtures themselves work: binlog settings as required, Spark sees the JDBC driver."""

import pytest

pytestmark = pytest.mark.integration


def test_mariadb_binlog_settings(mariadb):
    rows = dict(
        mariadb.query(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
            "('log_bin','binlog_format','binlog_row_image','binlog_row_metadata','server_id')"
        )
    )
    assert rows == {
        "log_bin": "ON",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "server_id": "1",
    }


def test_spark_reads_mariadb_over_jdbc(mariadb, fresh_db, spark):
    mariadb.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", "INSERT INTO t VALUES (1,'a'),(2,'b')", database=fresh_db
    )
    src = mariadb.source_config()
    df = (
        spark.read.format("jdbc")
        .option("url", f"jdbc:mysql://127.0.0.1:{mariadb.port}/{fresh_db}")
        .option("driver", "org.mariadb.jdbc.Driver")
        .option("dbtable", "t")
        .option("user", src.user)
        .option("password", src.password)
        .load()
    )
    assert sorted(tuple(r) for r in df.collect()) == [(1, "a"), (2, "b")]
