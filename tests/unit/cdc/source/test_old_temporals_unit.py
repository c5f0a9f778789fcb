"""Which columns validate flags as pre-5.6 temporal storage, from the server's COLUMN_TYPE marks."""

from __future__ import annotations

from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.source.old_temporals import old_temporal_columns, old_temporal_problems


def _schema(name: str, *cols: tuple[str, str, str]) -> TableSchema:
    columns = tuple(Column(n, i + 1, dt, ct, True) for i, (n, dt, ct) in enumerate(cols))
    return TableSchema(TableId("shop", name), columns, ("id",), ("id",), ("id",))


def test_mariadb_and_mysql_marks_are_recognised_and_nothing_else():
    s = _schema(
        "t",
        ("id", "int", "int(11)"),
        ("a", "datetime", "datetime /* mariadb-5.3 */"),
        ("b", "timestamp", "timestamp(3) /* 5.5 binary format */"),
        ("c", "time", "time(2)"),
        ("d", "date", "date"),
        ("e", "varchar", "varchar(40)"),
    )
    assert old_temporal_columns(s) == ["a", "b"]


def test_one_problem_per_table_naming_columns_and_the_rebuild():
    old = _schema("legacy", ("id", "int", "int(11)"), ("t", "datetime", "datetime /* mariadb-5.3 */"))
    new = _schema("fresh", ("id", "int", "int(11)"), ("t", "datetime", "datetime"))
    (problem,) = old_temporal_problems([new, old])
    assert problem.startswith("table shop.legacy has 1 column(s)") and "(`t`)" in problem
    assert "Fix: rebuild the table" in problem and "ALTER TABLE `shop`.`legacy` FORCE" in problem
    assert old_temporal_problems([new]) == []


def test_old_fractional_columns_are_refused_naming_them():
    import pytest

    from airflow_provider_mysqlcdc.cdc.errors import ConfigError
    from airflow_provider_mysqlcdc.cdc.source.old_temporals import refuse_undecodable_old_temporals

    cols = (
        Column("id", 1, "int", "int(11)", False),
        Column("a", 2, "datetime", "datetime /* mariadb-5.3 */", True, datetime_precision=0),
        Column("b", 3, "datetime", "datetime(3) /* mariadb-5.3 */", True, datetime_precision=3),
    )
    s = TableSchema(TableId("shop", "legacy"), cols, ("id",), ("id",), ("id",))
    with pytest.raises(
        ConfigError,
        match=r"1 TIME or fractional-second column\(s\) .*\(`b`\).*Fix: .*ALTER TABLE "
        r"`shop`.`legacy` FORCE",
    ):
        refuse_undecodable_old_temporals(s)
    assert old_temporal_columns(s, decodable=True) == ["a"]
    t = TableSchema(
        TableId("shop", "t"),
        (cols[0], Column("t", 2, "time", "time /* mariadb-5.3 */", True, datetime_precision=0)),
        ("id",),
        ("id",),
        ("id",),
    )
    with pytest.raises(ConfigError, match=r"\(`t`\)"):  # a negative old TIME is misread
        refuse_undecodable_old_temporals(t)
