"""Binlog retention against the time the snapshot will take.

The stream starts from the oldest high watermark of the snapshot, so every binlog file from
the first batch's watermark on must still be on the server when the last batch is done and
the stream starts. A server that purges binlogs sooner than that makes the stream fail at
start (``BinlogPurgedError``) after hours of snapshot work; the plan task says so first.
"""

from __future__ import annotations

from typing import Any

# Rows per second one snapshot slot reads when no batch of this pipeline has run yet: well
# below what this package reads on a small machine (~0.5-1M rows/s per slot), so the warning
# errs towards being given.
ASSUMED_ROWS_PER_S_PER_SLOT = 100_000
MARGIN = 3.0


def binlog_retention_s(conn: Any) -> float | None:
    """How long the server keeps binlogs (None: forever). ``binlog_expire_logs_seconds`` wins
    where the server has it (MySQL 8, MariaDB 10.6+) and is not 0; else ``expire_logs_days``."""
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('binlog_expire_logs_seconds', 'expire_logs_days')")
        values = {str(k).lower(): v for k, v in cur.fetchall()}
    seconds = float(values.get("binlog_expire_logs_seconds") or 0)
    if seconds > 0:
        return seconds
    days = float(values.get("expire_logs_days") or 0)
    return days * 86400.0 if days > 0 else None


def retention_warning(retention_s: float | None, rows: int, rows_per_s: float, margin: float = MARGIN) -> str | None:
    """The warning to give, or None when the binlogs stay long enough (``margin`` times the
    estimated snapshot time)."""
    if retention_s is None or rows <= 0 or rows_per_s <= 0:
        return None
    needed = rows / rows_per_s * margin
    if retention_s >= needed:
        return None
    return (
        f"the server keeps binlogs for {_human(retention_s)}, and the snapshot of ~{rows:,} rows is estimated "
        f"at {_human(rows / rows_per_s)} ({rows_per_s:,.0f} rows/s): with a margin of {margin:g}x the binlog "
        "from the first batch's watermark may be purged before the stream starts, which then fails and needs "
        f"a reset. Fix: keep binlogs at least {_human(needed)} (SET GLOBAL binlog_expire_logs_seconds = "
        f"{int(needed) + 1}; expire_logs_days on older servers) while the load runs, or snapshot fewer "
        "tables per run."
    )


def _human(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
