"""Zero and invalid dates have a named fate (source option ``zero_dates``), the same on every path.

``null`` (default): NULL. ``text``: DATE/DATETIME/TIMESTAMP captured as text, the literal kept
('0000-00-00 00:00:00', '2020-00-15'), TIMESTAMP in UTC. Checked three ways: the snapshot's
SELECT (Spark JDBC), the fast binlog decoder column by column and row by row, and the
library (refused tables) must give the same text; then snapshot + stream into each sink, a
NOT NULL zero-date column included, compared row by row with the source.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.events import RowChange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.cdc.types import map_table
from airflow_provider_mysqlcdc.spark.sinks.factory import build_sink
from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch
from airflow_provider_mysqlcdc.spark.stream.query import start_stream
from mysqlcdc_harness.sink_compare import delta_rows, postgres_for, postgres_rows, sink_config, wait_until_equal

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DDL = (
    "CREATE TABLE d (id INT PRIMARY KEY, da DATE, dt DATETIME, dt3 DATETIME(3), dt6 DATETIME(6), "
    "ts TIMESTAMP NULL, ts3 TIMESTAMP(3) NULL, nn DATE NOT NULL DEFAULT '0000-00-00')"
)
ROWS = [
    "(1, '2024-02-29', '2026-03-08 02:30:00', '1000-01-01 00:00:00.001', '9999-12-31 23:59:59.999999', "
    "'2038-01-19 03:14:07', '1970-01-01 00:00:01.500', '2024-01-02')",
    "(2, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00.000', '0000-00-00 00:00:00.000000', "
    "'0000-00-00 00:00:00', '0000-00-00 00:00:00.000', '0000-00-00')",
    "(3, '2020-00-15', '2020-02-00 10:11:12', '0000-05-06 07:08:09.120', '2021-13-01 00:00:00', "
    "NULL, NULL, '2020-01-00')",
    "(4, NULL, NULL, NULL, NULL, NULL, NULL, '1999-12-31')",
]
TEXT = {
    1: (
        "2024-02-29",
        "2026-03-08 02:30:00",
        "1000-01-01 00:00:00.001",
        "9999-12-31 23:59:59.999999",
        "2038-01-19 03:14:07",
        "1970-01-01 00:00:01.500",
        "2024-01-02",
    ),
    2: (
        "0000-00-00",
        "0000-00-00 00:00:00",
        "0000-00-00 00:00:00.000",
        "0000-00-00 00:00:00.000000",
        "0000-00-00 00:00:00",
        "0000-00-00 00:00:00.000",
        "0000-00-00",
    ),
    3: ("2020-00-15", "2020-02-00 10:11:12", "0000-05-06 07:08:09.120", None, None, None, "2020-01-00"),
    4: (None, None, None, None, None, None, "1999-12-31"),
}
COLS = ["id", "da", "dt", "dt3", "dt6", "ts", "ts3", "nn"]


def _fill(mariadb, db: str) -> None:
    # sql_mode '' lets zero and zero-in-date values in; TIMESTAMPs are given in UTC
    mariadb.execute(
        "SET SESSION sql_mode = ''",
        "SET SESSION time_zone = '+00:00'",
        *[f"INSERT INTO d VALUES {r}" for r in ROWS],
        database=db,
    )


def test_text_dates_are_the_same_through_the_snapshot_and_every_binlog_decoder(mariadb, fresh_db, spark):
    from airflow_provider_mysqlcdc.cdc.binlog.fast import FastBinlogReader
    from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader
    from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
    from airflow_provider_mysqlcdc.cdc.types import row_normalizer
    from airflow_provider_mysqlcdc.spark.snapshot.batch_reader import ConsistentBatchReader

    mariadb.execute(DDL, database=fresh_db)
    source = dataclasses.replace(mariadb.source_config(), zero_dates="text")
    t = TableId(fresh_db, "d")
    start = BinlogOffset(*mariadb.master_status())
    _fill(mariadb, fresh_db)
    # '2021-13-01' is out of range even for sql_mode '': the server stored the zero date
    TEXT_NOW = {**TEXT, 3: TEXT[3][:3] + ("0000-00-00 00:00:00.000000",) + TEXT[3][4:]}
    stop = BinlogOffset(*mariadb.master_status())
    import contextlib

    with contextlib.closing(source.connect()) as conn:
        schema = read_table_schema(conn, t, zero_dates="text")
    assert [m.kind for m in map_table(schema, "UTC")][1:] == [
        "date_text",
        "datetime_text",
        "datetime_text",
        "datetime_text",
        "timestamp_text",
        "timestamp_text",
        "date_text",
    ]

    # the snapshot's SELECTs
    reader = ConsistentBatchReader(spark, source, {t: schema})
    frame = reader._read_chunks(schema, [[_whole_table_chunk(t)]])
    snap = {r["id"]: tuple(r[c] for c in COLS[1:]) for r in frame.collect()}
    assert snap == TEXT_NOW, snap

    # the fast decoder, column by column and row by row
    for columnar in (True, False):
        with FastBinlogReader(source, 9301, start, stop, tables=[t], columnar=columnar) as r:
            got = {c.after["id"]: tuple(c.after[k] for k in COLS[1:]) for c in r.changes() if isinstance(c, RowChange)}
        assert got == TEXT_NOW, (columnar, got)

    # the library (tables the fast decoder refuses): the same text; it reads zero dates as NULL
    normalize = row_normalizer(schema, "UTC")
    with BinlogReader(source, 9302, start, stop=stop, tables=[t], normalizers={t: normalize}) as r:
        lib = {c.after["id"]: tuple(c.after[k] for k in COLS[1:]) for c in r if isinstance(c, RowChange)}
    assert lib[1] == TEXT_NOW[1] and lib[4] == TEXT_NOW[4]


def _whole_table_chunk(t: TableId):
    from airflow_provider_mysqlcdc.cdc.chunks import Chunk

    return Chunk(t, 0, None, None, True)


def test_an_unknown_zero_dates_value_is_refused_naming_the_choices():
    from airflow_provider_mysqlcdc.cdc.source.config import SourceConfig

    with pytest.raises(ConfigError, match="zero_dates: found 'epoch', need one of null, text. Fix:"):
        SourceConfig(zero_dates="epoch")


@pytest.mark.parametrize("mode", ["text", "null"])
@pytest.mark.parametrize("sink_type", ["delta", "postgres", "changelog"])
def test_zero_dates_through_snapshot_and_stream_into_every_sink(
    mariadb, fresh_db, spark, tmp_dir, request, monkeypatch, sink_type, mode
):
    mariadb.execute(DDL, database=fresh_db)
    _fill(mariadb, fresh_db)
    t = TableId(fresh_db, "d")
    src = dataclasses.replace(mariadb.source_config(), zero_dates=mode)
    config = PipelineConfig(
        name=f"zd-{sink_type}-{mode}",
        source=src,
        include=(str(t),),
        state_location=str(tmp_dir / "state"),
        sink=sink_config(sink_type, tmp_dir, postgres_for(request, sink_type), monkeypatch),
        split=SplitOptions(chunk_size=2),
        stream=StreamOptions(max_events_per_batch=1000, heartbeat_s=1.0, trigger_interval_s=0.5),
    )
    plan = build_plan(src, config.include, split=config.split)
    assert all(s.zero_dates == mode for s in plan.schemas.values())
    state = StateStore(config.state_location)
    state.write_plan(plan)
    for b in plan.batches:
        run_snapshot_batch(spark, config, b.batch_id, plan=plan)
    state.write_finished(state.finished_from_results())
    sink = build_sink(config.sink)
    sink.prepare(list(plan.schemas.values()))
    query = start_stream(spark, config, sink, list(plan.schemas.values()))
    try:
        time.sleep(2)
        mariadb.execute(
            "SET SESSION sql_mode = ''",
            "SET SESSION time_zone = '+00:00'",
            f"INSERT INTO d VALUES {ROWS[1].replace('(2,', '(12,', 1)}",
            f"INSERT INTO d VALUES {ROWS[2].replace('(3,', '(13,', 1)}",
            "UPDATE d SET dt = '0000-00-00 00:00:00', ts = '2001-02-03 04:05:06', nn = '0000-00-00' WHERE id = 1",
            "DELETE FROM d WHERE id = 4",
            database=fresh_db,
        )
        want = _want(mariadb, fresh_db, mode)
        if sink_type == "delta":

            def actual():
                return {k: {c: r[c] for c in COLS} for k, r in delta_rows(tmp_dir / "lake", t, ("id",)).items()}
        elif sink_type == "postgres":
            pg = request.getfixturevalue("postgres")

            def actual():
                return postgres_rows(pg, f"{fresh_db}__d", COLS, ("id",), schema=config.sink.options["schema"])
        else:

            def actual():
                return _changelog_rows(tmp_dir / "lake" / fresh_db / "d")

        problem = wait_until_equal(lambda: want, lambda: _comparable(actual(), mode), timeout_s=90)
        assert not problem, problem
        assert query.exception() is None
    finally:
        query.stop()


def _want(mariadb, db: str, mode: str) -> dict:
    """The source as each mode must show it: the server's own text, or NULL for zero dates."""
    sel = ", ".join(f"CAST(`{c}` AS CHAR)" if c != "id" else "id" for c in COLS)
    rows = mariadb.execute("SET SESSION time_zone = '+00:00'", f"SELECT {sel} FROM d", database=db)
    out = {}
    for r in rows:
        rec = dict(zip(COLS, r))
        for c in COLS[1:]:
            v = rec[c]
            if mode == "null" and v is not None:
                ok = not v.startswith("0000") and "-00" not in v[:10]
                rec[c] = v[:10] if ok and c in ("da", "nn") else (v if ok else None)
        out[(rec["id"],)] = rec
    return out


def _comparable(rows: dict, mode: str) -> dict:
    """Sink values as text: dates as 'YYYY-MM-DD', date-times as the server prints them (UTC)."""
    import datetime as dt

    fsp = {"dt": 0, "dt3": 3, "dt6": 6, "ts": 0, "ts3": 3}
    out = {}
    for k, r in rows.items():
        rec = dict(r)
        for c in COLS[1:]:
            v = rec[c]
            if isinstance(v, dt.datetime):
                if v.tzinfo is not None:
                    v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
                text = v.strftime("%Y-%m-%d %H:%M:%S")
                rec[c] = text + ("." + f"{v.microsecond:06d}"[: fsp[c]] if fsp[c] else "")
            elif isinstance(v, dt.date):
                rec[c] = v.isoformat()
        out[(int(rec["id"]),)] = rec
    return out


def _changelog_rows(table_dir: Path) -> dict:
    """The changelog replayed: the last image per key."""
    state: dict = {}
    for f in sorted(table_dir.rglob("*.jsonl")):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            key = (int(rec["data"]["id"]),)
            if rec["op"] in ("+I", "+U"):
                state[key] = {c: _changelog_value(rec["data"].get(c)) for c in COLS}
            elif rec["op"] == "-D":
                state.pop(key, None)
    return state


def _changelog_value(v):
    if isinstance(v, str) and len(v) >= 20 and v.endswith("Z") and "T" in v:  # an instant in UTC
        import datetime as dt

        return dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    if isinstance(v, str) and len(v) >= 19 and "T" in v[10:11]:
        import datetime as dt

        return dt.datetime.fromisoformat(v)
    return v
