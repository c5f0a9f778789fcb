"""The binlog retention warning: given when the server may purge the stream's start before the
snapshot ends, silent otherwise."""

from __future__ import annotations

from airflow_provider_mysqlcdc.cdc.binlog.retention import retention_warning


def test_retention_shorter_than_the_snapshot_with_its_margin_is_warned_about_with_the_fix():
    # 360M rows at 100k rows/s: one hour; kept 2 h < 3 h (margin 3)
    msg = retention_warning(7200, 360_000_000, 100_000)
    assert msg is not None
    assert "keeps binlogs for 2.0 h" in msg and "~360,000,000 rows" in msg and "1.0 h" in msg
    assert "Fix: keep binlogs at least 3.0 h (SET GLOBAL binlog_expire_logs_seconds = 10801" in msg


def test_enough_retention_none_at_all_or_nothing_to_read_says_nothing():
    assert retention_warning(7 * 86400, 360_000_000, 100_000) is None
    assert retention_warning(None, 10**12, 1) is None  # binlogs are never purged
    assert retention_warning(60, 0, 100_000) is None  # every batch is done
    assert retention_warning(10_800, 360_000_000, 100_000) is None  # exactly the margin
