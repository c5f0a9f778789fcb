"""connectorx's Rust panic output stays out of the task log when the Arrow reader falls back."""

from __future__ import annotations

import logging
import os

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig
from airflow_provider_mysqlcdc.spark.snapshot import arrow_read

PANIC = b"thread '<unnamed>' panicked at connectorx/src/sources/mysql/mod.rs:1:1:\nzero date\n" + (
    b"  0: std::backtrace_rs::backtrace::libunwind::trace\n" * 900
)


def _source() -> SourceConfig:
    return SourceConfig(host="127.0.0.1", port=3306, user="u", password="pw")


def _fake_read_sql(calls: list):
    def read_sql(url, sql, return_type):
        calls.append(sql)
        if "fast" in sql:
            os.write(2, PANIC)  # what the Rust panic hook writes before the exception reaches Python
            raise BaseException("zero date")  # pyo3's PanicException derives from BaseException
        os.write(2, b"a warning while succeeding\n")
        return pa.table({"d": pa.array(["0000-00-00"])})

    return read_sql


def test_the_panic_is_not_written_and_one_line_says_what_was_done(monkeypatch, capfd, caplog):
    import connectorx

    calls: list = []
    monkeypatch.setattr(connectorx, "read_sql", _fake_read_sql(calls))
    monkeypatch.setattr(arrow_read, "conform", lambda table, mappings: table)
    with caplog.at_level(logging.INFO, logger=arrow_read.__name__):
        rows, used_safe = arrow_read.read_rows(_source(), "shop", [], "SELECT fast", "SELECT safe")
    err = capfd.readouterr().err
    assert used_safe and rows.num_rows == 1 and calls == ["SELECT fast", "SELECT safe"]
    assert "panicked" not in err and "backtrace" not in err, err[:300]
    assert "a warning while succeeding" in err, "what a successful read writes still reaches the log"
    lines = [r.getMessage() for r in caplog.records if "read it again with those columns as text" in r.getMessage()]
    assert len(lines) == 1 and "zero date" in lines[0]


def test_without_a_safe_form_the_error_names_the_query_not_the_password(monkeypatch, capfd):
    import connectorx

    monkeypatch.setattr(connectorx, "read_sql", _fake_read_sql([]))
    with pytest.raises(RuntimeError, match=r"zero date \(query: SELECT fast\)") as e:
        arrow_read.read_rows(_source(), "shop", [], "SELECT fast", None)
    assert "pw" not in str(e.value).replace("panicked", "")
    assert "panicked" not in capfd.readouterr().err
