"""Schema evolution end to end: DDL on a captured table while writers run, into Delta and PostgreSQL.

Snapshot batches run under writers on two tables; the stream takes over; then a sequence of
DDL (add with a default, add AFTER, widen VARCHAR, widen INT -> BIGINT, rename, drop, add NOT
NULL without a default) runs on ``orders`` while both writers keep going, each followed by
updates of the new columns. After the writers stop, the sink equals the source row by row:
under ``evolve`` columns included, under ``lenient`` / ``try_evolve`` on the source's
columns (the sink keeps dropped and pre-rename columns), under ``ignore`` on the columns
the sink started with. The table no DDL touched keeps flowing throughout.
"""

from __future__ import annotations

import json
import time

import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.spark.sinks.factory import build_sink
from airflow_provider_mysqlcdc.spark.snapshot.job import run_snapshot_batch
from airflow_provider_mysqlcdc.spark.stream.query import start_stream
from mysqlcdc_harness.sink_compare import (
    delta_rows,
    iceberg_rows,
    mysql_rows,
    postgres_rows,
    sink_config,
    wait_until_equal,
)
from mysqlcdc_harness.tables import VALUE_COLS, VALUE_DDL, create_composite_table, create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark]

# Each statement runs on `orders` with the writers on; the updates give the new columns values.
SEQUENCE = [
    "ALTER TABLE orders ADD COLUMN extra INT NULL DEFAULT 7",
    "UPDATE orders SET extra = id % 100 WHERE id % 5 = 0",
    "ALTER TABLE orders ADD COLUMN note VARCHAR(10) NULL AFTER a",
    "UPDATE orders SET note = LEFT(CONCAT('n', id), 10) WHERE id % 3 = 0",
    "ALTER TABLE orders MODIFY note VARCHAR(100) NULL",
    "UPDATE orders SET note = CONCAT('a longer note ', id) WHERE id % 7 = 0",
    "ALTER TABLE orders MODIFY extra BIGINT NULL",
    "UPDATE orders SET extra = 5000000000 + id WHERE id % 11 = 0",
    "ALTER TABLE orders RENAME COLUMN note TO remark",
    "UPDATE orders SET remark = CONCAT('r', id) WHERE id % 13 = 0",
    "ALTER TABLE orders DROP COLUMN extra",
    "ALTER TABLE orders ADD COLUMN flag TINYINT NOT NULL DEFAULT 3",
    "UPDATE orders SET flag = 1 WHERE id % 17 = 0",
]
FINAL_COLUMNS = ("id", "a", "remark", "s", "amount", "ts", "flag")
INITIAL_COLUMNS = ("id",) + VALUE_COLS

# lenient on PostgreSQL takes the same plan as on Delta (the unit tests check each behaviour's plan)
CASES = [
    ("postgres", "evolve"),
    ("postgres", "ignore"),
    ("delta", "lenient"),
    ("delta", "try_evolve"),
    ("iceberg", "lenient"),
]


def _sink_columns(kind: str, postgres, tmp_dir, schema_name: str | None, t: TableId) -> list[str]:
    if kind == "delta":
        from deltalake import DeltaTable

        return [f.name for f in DeltaTable(str(tmp_dir / "lake" / t.database / t.table)).schema().fields]
    if kind == "iceberg":
        from airflow_provider_mysqlcdc.spark.sinks.iceberg import catalog as cat

        props = cat.check_catalog_options(str((tmp_dir / "lake").resolve()), None)
        table = cat.load(cat.DEFAULT_CATALOG_NAME, props).load_table(cat.identifier(t))
        return [f.name for f in table.schema().fields]
    rows = postgres.query(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND "
        "table_name = %s AND column_name NOT LIKE '\\_mysqlcdc%%' ORDER BY ordinal_position",
        (schema_name, f"{t.database}__{t.table}"),
    )
    return [r[0] for r in rows]


@pytest.mark.parametrize("kind,behavior", CASES, ids=[f"{k}-{b}" for k, b in CASES])
def test_ddl_sequence_under_writers(mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, kind, behavior):
    specs = [
        create_int_table(mariadb, fresh_db, 3_000, "orders"),
        create_composite_table(mariadb, fresh_db, 2_000, "tenant_items"),
    ]
    src = mariadb.source_config()
    sink_cfg = sink_config(kind, tmp_dir, postgres, monkeypatch)
    config = PipelineConfig(
        name=f"ddl-{kind}-{behavior}",
        source=src,
        include=(f"{fresh_db}.orders", f"{fresh_db}.tenant_items"),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        split=SplitOptions(chunk_size=1000),
        stream=StreamOptions(max_events_per_batch=2000, heartbeat_s=1.0, trigger_interval_s=0.3),
        schema_change_behavior=behavior,
    )
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=2)
    state = StateStore(config.state_location)
    state.write_plan(plan)
    writers = [
        ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=i, threads=1, pause_s=0.003)
        for i, spec in enumerate(specs)
    ]
    for w in writers:
        w.start()
    query = None
    try:
        for b in plan.batches:
            run_snapshot_batch(spark, config, b.batch_id, plan=plan)
        state.write_finished(state.finished_from_results())
        sink = build_sink(config.sink)
        query = start_stream(spark, config, sink, list(plan.schemas.values()))
        time.sleep(2)
        for statement in SEQUENCE:
            mariadb.execute(statement, database=fresh_db)
            time.sleep(0.4)
        time.sleep(1)
    finally:
        changes = sum(w.stop().total for w in writers)
    assert changes > 100, "the writers must really write while the DDL runs"
    orders, items = TableId(fresh_db, "orders"), TableId(fresh_db, "tenant_items")
    schema_name = sink_cfg.options.get("schema")
    try:
        compare = {
            "evolve": FINAL_COLUMNS,
            "lenient": FINAL_COLUMNS,
            "try_evolve": FINAL_COLUMNS,
            "ignore": INITIAL_COLUMNS,
        }[behavior]
        for t, cols, ident in (
            (orders, compare, ("id",)),
            (items, tuple(specs[1].key_columns) + VALUE_COLS, tuple(specs[1].key_columns)),
        ):

            def expected():
                return mysql_rows(mariadb, t, [c for c in cols if c in FINAL_COLUMNS or t != orders], ident)

            if kind in ("delta", "iceberg"):
                read = delta_rows if kind == "delta" else iceberg_rows

                def actual():
                    want = [c for c in cols if c in FINAL_COLUMNS or t != orders]
                    return {k: {c: r[c] for c in want} for k, r in read(tmp_dir / "lake", t, ident).items()}
            else:

                def actual():
                    want = [c for c in cols if c in FINAL_COLUMNS or t != orders]
                    return postgres_rows(postgres, f"{t.database}__{t.table}", want, ident, schema_name)

            problem = wait_until_equal(expected, actual, timeout_s=120)
            assert not problem, f"{kind}/{behavior} {t} after {changes} changes:\n{problem}"
        assert query.exception() is None
        columns = _sink_columns(kind, postgres, tmp_dir, schema_name, orders)
        if behavior == "evolve":  # PostgreSQL adds columns at the end (no AFTER / FIRST)
            assert sorted(columns) == sorted(FINAL_COLUMNS), columns
        elif behavior == "ignore":
            assert columns == list(INITIAL_COLUMNS)
        else:  # lenient: nothing is dropped, the renamed column's old name stays
            assert set(columns) == set(FINAL_COLUMNS) | {"note", "extra"}, columns
    finally:
        if query is not None:
            query.stop()


# --- DDL and the snapshot window --------------------------------------------------------------


def _one_table_pipeline(mariadb, fresh_db, tmp_dir):
    from airflow_provider_mysqlcdc.cdc.pipeline import SinkConfig

    create_int_table(mariadb, fresh_db, 2_000, "orders")
    src = mariadb.source_config()
    config = PipelineConfig(
        name="ddl-window",
        source=src,
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=SinkConfig("delta", {"root": str(tmp_dir / "lake")}),
    )
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=10)
    StateStore(config.state_location).write_plan(plan)
    return config, plan


def test_a_table_changed_since_the_plan_fails_the_batch_before_writing(mariadb, fresh_db, spark, tmp_dir):
    from airflow_provider_mysqlcdc.cdc.errors import TableChangedError

    config, plan = _one_table_pipeline(mariadb, fresh_db, tmp_dir)
    mariadb.execute("ALTER TABLE orders ADD COLUMN late INT", database=fresh_db)
    with pytest.raises(TableChangedError, match="changed since the plan") as ei:
        run_snapshot_batch(spark, config, plan.batches[0].batch_id, plan=plan)
    assert "reset=true" in str(ei.value)
    assert not (tmp_dir / "lake" / fresh_db / "orders" / "_snapshot").exists()
    assert StateStore(config.state_location).read_batch_result(plan.batches[0].batch_id) is None


def test_a_ddl_inside_the_snapshot_window_fails_the_batch_before_writing(
    mariadb, fresh_db, spark, tmp_dir, monkeypatch
):
    """The DDL lands after the SELECTs and before HW: the batch's binlog window holds it."""
    from airflow_provider_mysqlcdc.cdc.errors import TableChangedError
    from airflow_provider_mysqlcdc.spark.snapshot import batch_reader

    config, plan = _one_table_pipeline(mariadb, fresh_db, tmp_dir)
    real = batch_reader.ConsistentBatchReader._high_watermark

    def ddl_then_hw(self, conn, version):
        mariadb.execute(
            "UPDATE orders SET a = a + 1 WHERE id < 100", "ALTER TABLE orders DROP COLUMN amount", database=fresh_db
        )
        return real(self, conn, version)

    monkeypatch.setattr(batch_reader.ConsistentBatchReader, "_high_watermark", ddl_then_hw)
    with pytest.raises(TableChangedError, match="changed while the batch read it") as ei:
        run_snapshot_batch(spark, config, plan.batches[0].batch_id, plan=plan)
    assert "ALTER TABLE orders DROP COLUMN amount" in str(ei.value)
    assert not (tmp_dir / "lake" / fresh_db / "orders" / "_snapshot").exists()
    assert StateStore(config.state_location).read_batch_result(plan.batches[0].batch_id) is None


# --- kill -9 inside the flush / apply / commit sequence -----------------------------------------

KILL_CASES = [
    ("delta", "schema-recorded"),
    ("delta", "between-steps"),
    ("postgres", "between-steps"),
    ("postgres", "schema-applied"),
]


@pytest.mark.slow
@pytest.mark.parametrize("kind,point", KILL_CASES, ids=[f"{k}-{p}" for k, p in KILL_CASES])
def test_a_crash_inside_a_schema_change_restarts_exactly(
    mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, kind, point
):
    """The stream job kills itself (SIGKILL, its whole process group) at one point of a DDL's
    micro-batch; started again, it applies the change once and the sink equals the source."""
    from mysqlcdc_harness.stream_job import committed, kill_job, start_job

    spec = create_int_table(mariadb, fresh_db, 2_000, "orders")
    src = mariadb.source_config(server_id_range="6400-6499")
    sink_cfg = sink_config(kind, tmp_dir, postgres, monkeypatch)
    config = PipelineConfig(
        name=f"ddl-kill-{kind}",
        source=src,
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        split=SplitOptions(chunk_size=1000),
        stream=StreamOptions(max_events_per_batch=500, heartbeat_s=1.0, trigger_interval_s=0.2),
        schema_change_behavior="evolve" if kind == "postgres" else "lenient",
    )
    cfg_path = tmp_dir / "pipeline.json"
    cfg_path.write_text(config.to_json())
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=2)
    state = StateStore(config.state_location)
    state.write_plan(plan)
    for b in plan.batches:
        run_snapshot_batch(spark, config, b.batch_id, plan=plan)
    state.write_finished(state.finished_from_results())
    log = tmp_dir / "job.log"
    checkpoint = tmp_dir / "state" / "stream" / "checkpoint"
    writer = ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=3, threads=1, pause_s=0.01).start()
    writing, proc = True, None
    try:
        proc = start_job(cfg_path, log, src.password, extra_env={"MYSQLCDC_CRASH_AT": point})
        deadline = time.time() + 180
        while committed(checkpoint) is None:
            assert time.time() < deadline and proc.poll() is None, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        mariadb.execute(
            "ALTER TABLE orders ADD COLUMN extra INT NULL DEFAULT 7",
            "UPDATE orders SET extra = id WHERE id % 3 = 0",
            database=fresh_db,
        )
        assert proc.wait(120) == -9, "the job must kill itself at the crash point"
        proc = start_job(cfg_path, log, src.password)
        time.sleep(2)
        writer.stop()
        writing = False
        cols = ["id", *VALUE_COLS, "extra"]
        t = TableId(fresh_db, "orders")

        def expected():
            return mysql_rows(mariadb, t, cols, ("id",))

        if kind == "delta":

            def actual():
                return {k: {c: r[c] for c in cols} for k, r in delta_rows(tmp_dir / "lake", t, ("id",)).items()}
        else:

            def actual():
                return postgres_rows(postgres, f"{fresh_db}__orders", cols, ("id",), sink_cfg.options["schema"])

        problem = wait_until_equal(expected, actual, timeout_s=120)
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        assert not problem, f"{kind} crash at {point}:\n{problem}\njob log:\n{tail}"
        assert _sink_columns(kind, postgres, tmp_dir, sink_cfg.options.get("schema"), t).count("extra") == 1
    finally:
        if writing:
            writer.stop()
        if proc is not None:
            kill_job(proc)


# --- a start before a DDL ---------------------------------------------------------------------


@pytest.mark.parametrize("kind,behavior", [("postgres", "evolve"), ("delta", "lenient")])
def test_a_stream_started_before_a_ddl_reads_both_shapes(
    mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, kind, behavior
):
    """startup specific-offset at a point before an ALTER: the stream only knows today's schema;
    the rows logged before the ALTER (old shape) and after it (new shape) both land right."""
    from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema

    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, a INT, s VARCHAR(20))", database=fresh_db)
    file, position = mariadb.master_status()
    mariadb.execute(
        *[f"INSERT INTO orders VALUES ({i}, {i * 10}, 'old {i}')" for i in range(1, 41)],
        "UPDATE orders SET a = a + 1 WHERE id % 4 = 0",
        "DELETE FROM orders WHERE id % 9 = 0",
        "ALTER TABLE orders ADD COLUMN extra INT NULL DEFAULT 5 AFTER a",
        database=fresh_db,
    )
    mariadb.execute(
        *[f"INSERT INTO orders VALUES ({i}, {i}, {i % 3}, 'new {i}')" for i in range(41, 61)],
        "UPDATE orders SET extra = 100 + id WHERE id % 5 = 0",
        database=fresh_db,
    )
    end_file, end_position = mariadb.master_status()
    sink_cfg = sink_config(kind, tmp_dir, postgres, monkeypatch)
    config = PipelineConfig(
        name="ddl-before",
        source=mariadb.source_config(),
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        startup_mode="specific-offset",
        startup_offset={"file": file, "position": position},
        stream=StreamOptions(heartbeat_s=1.0, trigger_interval_s=0.2),
        schema_change_behavior=behavior,
    )
    t = TableId(fresh_db, "orders")
    with mariadb.connect() as conn:
        today = read_table_schema(conn, t)
    assert "extra" in today.column_names
    query = start_stream(spark, config, build_sink(config.sink), [today])
    cols = ["id", "a", "extra", "s"]
    try:

        def expected():
            return mysql_rows(mariadb, t, cols, ("id",))

        if kind == "delta":

            def actual():
                return {k: {c: r[c] for c in cols} for k, r in delta_rows(tmp_dir / "lake", t, ("id",)).items()}
        else:

            def actual():
                return postgres_rows(postgres, f"{fresh_db}__orders", cols, ("id",), sink_cfg.options["schema"])

        problem = wait_until_equal(expected, actual, timeout_s=90)
        assert not problem, f"{kind}/{behavior} from {file}:{position} to {end_file}:{end_position}:\n{problem}"
        assert query.exception() is None
    finally:
        query.stop()


# --- stops ---------------------------------------------------------------------------------------

STOPS = [
    ("postgres", "exception", "ALTER TABLE orders ADD COLUMN extra INT", "stopped at a schema change"),
    ("delta", "evolve", "ALTER TABLE orders RENAME COLUMN s TO s2", "delta cannot rename column s to s2"),
]


@pytest.mark.parametrize("kind,behavior,ddl,message", STOPS, ids=[f"{k}-{b}" for k, b, _, _ in STOPS])
def test_a_ddl_the_settings_refuse_stops_the_stream_after_every_change_before_it(
    mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, kind, behavior, ddl, message
):
    """Everything logged before the DDL is in the sink, nothing after it; the error names the
    statement and its offset, and says the watchdog will not relaunch the stream."""
    from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
    from airflow_provider_mysqlcdc.cdc.source.statements import NOT_EXACT_MARKER

    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, a INT, s VARCHAR(20))", database=fresh_db)
    file, position = mariadb.master_status()
    mariadb.execute(*[f"INSERT INTO orders VALUES ({i}, {i}, 'v{i}')" for i in range(1, 31)], database=fresh_db)
    before = mysql_rows(mariadb, TableId(fresh_db, "orders"), ["id", "a", "s"], ("id",))
    mariadb.execute(ddl, *[f"INSERT INTO orders (id, a) VALUES ({i}, {i})" for i in range(31, 41)], database=fresh_db)
    sink_cfg = sink_config(kind, tmp_dir, postgres, monkeypatch)
    config = PipelineConfig(
        name="ddl-stop",
        source=mariadb.source_config(),
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        startup_mode="specific-offset",
        startup_offset={"file": file, "position": position},
        stream=StreamOptions(max_events_per_batch=20, heartbeat_s=1.0, trigger_interval_s=0.2),
        schema_change_behavior=behavior,
    )
    t = TableId(fresh_db, "orders")
    with mariadb.connect() as conn:
        schema = read_table_schema(conn, t)
    from dataclasses import replace as _replace

    # the stream starts with the shape before the DDL (as after a snapshot)
    original = _replace(schema, columns=tuple(c for c in schema.columns if c.name in ("id", "a", "s")))
    if behavior == "evolve":  # RENAME: today's column is s2; the shape at the start had s
        from airflow_provider_mysqlcdc.cdc.model import Column

        original = _replace(
            schema,
            columns=tuple(
                Column.from_dict({**c.to_dict(), "name": "s"}) if c.name == "s2" else c for c in schema.columns
            ),
        )
    query = start_stream(spark, config, build_sink(config.sink), [original])
    try:
        with pytest.raises(Exception) as stopped:
            query.awaitTermination(90)
        error = str(stopped.value)
        assert message in error and NOT_EXACT_MARKER in error, error[-2000:]
        assert ddl in error and file in error
        if kind == "delta":
            got = {k: {c: r[c] for c in ("id", "a", "s")} for k, r in delta_rows(tmp_dir / "lake", t, ("id",)).items()}
        else:
            got = postgres_rows(postgres, f"{fresh_db}__orders", ["id", "a", "s"], ("id",), sink_cfg.options["schema"])
        assert got == before
    finally:
        query.stop()


# --- the changelog: rows and schema changes in order, enough to rebuild the table -----------------


def _replay(lines: list[dict], decode) -> dict[int, dict]:
    """Rebuild a table from changelog-json lines, following the schema change lines' actions."""
    state: dict[int, dict] = {}
    for line in lines:
        if line["op"] == "SC":
            for a in line["schema_change"]["actions"]:
                for row in state.values():
                    if a["kind"] == "add_column":
                        name = a["column"]["name"]
                        if a.get("copy_from"):
                            row[name] = row.get(a["copy_from"])
                        elif a.get("refill") or name not in row:
                            row[name] = a.get("fill")
                    elif a["kind"] == "drop_column":
                        row.pop(a["name"], None)
                    elif a["kind"] == "rename_column":
                        row[a["new_name"]] = row.pop(a["name"], None)
                if a["kind"] in ("truncate_table", "drop_table", "create_table"):
                    state.clear()
            continue
        data = line["data"]
        if line["op"] in ("+I", "+U"):
            state[data["id"]] = dict(data)
        else:  # -D, and -U: the before-image is retracted (a key change moves the row)
            state.pop(data["id"], None)
    return {k: decode(v) for k, v in state.items()}


def test_the_changelog_holds_rows_and_schema_changes_in_order(mariadb, fresh_db, spark, tmp_dir):
    """Into the changelog under writers: replaying its lines, schema change lines included, gives the
    source table -- the new columns' values too."""
    from airflow_provider_mysqlcdc.cdc.pipeline import SinkConfig
    from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
    from airflow_provider_mysqlcdc.spark.sinks.json_values import read_json_lines, row_decoder

    spec = create_int_table(mariadb, fresh_db, 0, "orders")
    file, position = mariadb.master_status()
    t = TableId(fresh_db, "orders")
    with mariadb.connect() as conn:
        start_schema = read_table_schema(conn, t)
    root = tmp_dir / "changelog"
    config = PipelineConfig(
        name="ddl-changelog",
        source=mariadb.source_config(),
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=SinkConfig("changelog", {"root": str(root)}),
        startup_mode="specific-offset",
        startup_offset={"file": file, "position": position},
        stream=StreamOptions(max_events_per_batch=500, heartbeat_s=1.0, trigger_interval_s=0.2),
        schema_change_behavior="evolve",
    )
    writer = ConcurrentWriter(
        lambda: mariadb.connect(fresh_db), spec, seed=7, threads=1, pause_s=0.003, weights=(0.6, 0.25, 0.1, 0.05)
    ).start()
    query = start_stream(spark, config, build_sink(config.sink), [start_schema])
    try:
        time.sleep(1.5)
        for statement in SEQUENCE:
            mariadb.execute(statement, database=fresh_db)
            time.sleep(0.3)
        time.sleep(1)
    finally:
        writer.stop()
    try:
        with mariadb.connect() as conn:
            final = read_table_schema(conn, t)
        decode = row_decoder(final)
        cols = list(FINAL_COLUMNS)

        def expected():
            return mysql_rows(mariadb, t, cols, ("id",))

        def actual():
            lines = [
                line
                for f in sorted((root / t.database / t.table / "stream").glob("batch-*.jsonl"))
                for line in read_json_lines(str(f))
            ]
            rows = _replay(lines, lambda r: decode({c: r.get(c) for c in cols}))
            return {(k,): v for k, v in rows.items()}

        problem = wait_until_equal(expected, actual, timeout_s=90)
        assert not problem, problem
        lines = [
            line
            for f in sorted((root / t.database / t.table / "stream").glob("batch-*.jsonl"))
            for line in read_json_lines(str(f))
        ]
        ddl = [line["schema_change"]["ddl"] for line in lines if line["op"] == "SC"]
        assert ddl == [s for s in SEQUENCE if s.startswith("ALTER")]
        seqs = [(line["meta"]["batch"], line["meta"]["seq"]) for line in lines]
        assert seqs == sorted(seqs), "lines and schema changes in binlog order"
        # Every data line names its layout; the registry's document says its columns, so a
        # reader decodes each line alone: its data keys are the layout's names, in order.
        registry = root / t.database / t.table / "_schemas"
        layouts = {p.stem: json.loads(p.read_text()) for p in registry.glob("*.json")}
        data = [line for line in lines if line["op"] != "SC"]
        assert data and all(line["meta"]["schema_id"] in layouts for line in data)
        for line in data:
            assert list(line["data"]) == [c["name"] for c in layouts[line["meta"]["schema_id"]]["columns"]], line
        # one layout per shape the table had while rows came: the ids change at (and only at) DDLs
        # that changed the columns, in binlog order
        ids = [line["meta"]["schema_id"] for line in lines if line["op"] != "SC"]
        runs = [i for k, i in enumerate(ids) if k == 0 or ids[k - 1] != i]
        assert len(runs) == len(set(runs)) >= 4, runs
        names = [tuple(c["name"] for c in layouts[i]["columns"]) for i in runs]
        assert names[-1] == FINAL_COLUMNS and names[0] == tuple(c.name for c in start_schema.columns)
        assert query.exception() is None
    finally:
        query.stop()


def test_rows_of_a_shape_no_ddl_explains_stop_the_stream_naming_table_and_place(
    mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch
):
    """An ALTER run with sql_log_bin=0 never reaches the binlog: the rows after it come with a
    TABLE_MAP the schema history cannot explain, and the stream stops instead of guessing."""
    from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
    from airflow_provider_mysqlcdc.cdc.source.statements import NOT_EXACT_MARKER

    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, a INT)", database=fresh_db)
    file, position = mariadb.master_status()
    t = TableId(fresh_db, "orders")
    with mariadb.connect() as conn:
        schema = read_table_schema(conn, t)
    mariadb.execute(*[f"INSERT INTO orders VALUES ({i}, {i})" for i in range(1, 11)], database=fresh_db)
    mariadb.execute("SET SESSION sql_log_bin = 0", "ALTER TABLE orders ADD COLUMN hidden INT", database=fresh_db)
    mariadb.execute("INSERT INTO orders VALUES (11, 11, 11)", database=fresh_db)
    sink_cfg = sink_config("postgres", tmp_dir, postgres, monkeypatch)
    config = PipelineConfig(
        name="ddl-unexplained",
        source=mariadb.source_config(),
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        startup_mode="specific-offset",
        startup_offset={"file": file, "position": position},
        stream=StreamOptions(heartbeat_s=1.0, trigger_interval_s=0.2),
        schema_change_behavior="lenient",
    )
    query = start_stream(spark, config, build_sink(config.sink), [schema])
    try:
        with pytest.raises(Exception) as stopped:
            query.awaitTermination(90)
        error = str(stopped.value)
        assert "no DDL in the binlog explains the difference" in error and str(t) in error, error[-2000:]
        assert f"{file}:" in error and NOT_EXACT_MARKER in error
    finally:
        query.stop()


def test_the_console_prints_rows_and_schema_changes_in_order(mariadb, fresh_db, spark, tmp_dir):
    import io

    from airflow_provider_mysqlcdc.cdc.pipeline import SinkConfig
    from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
    from airflow_provider_mysqlcdc.spark.sinks.console.sink import ConsoleSink

    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, a INT)", database=fresh_db)
    file, position = mariadb.master_status()
    t = TableId(fresh_db, "orders")
    with mariadb.connect() as conn:
        schema = read_table_schema(conn, t)
    mariadb.execute(
        "INSERT INTO orders VALUES (1, 10)",
        "UPDATE orders SET a = 11 WHERE id = 1",
        "ALTER TABLE orders ADD COLUMN note VARCHAR(10) DEFAULT 'x'",
        "INSERT INTO orders VALUES (2, 20, 'two')",
        "DELETE FROM orders WHERE id = 1",
        database=fresh_db,
    )
    config = PipelineConfig(
        name="ddl-console",
        source=mariadb.source_config(),
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=SinkConfig("console", {}),
        startup_mode="specific-offset",
        startup_offset={"file": file, "position": position},
        stream=StreamOptions(heartbeat_s=1.0, trigger_interval_s=0.2),
    )
    out = io.StringIO()
    query = start_stream(spark, config, ConsoleSink(out), [schema])
    try:
        deadline = time.time() + 60
        while out.getvalue().count("\n") < 6 and time.time() < deadline:
            time.sleep(0.2)
        lines = out.getvalue().splitlines()
        assert [line.split(" ")[0] for line in lines] == ["+I", "-U", "+U", "SC", "+I", "-D"], lines
        assert lines[3].startswith(f"SC {t} ") and "ADD COLUMN note" in lines[3]
        assert json.loads(lines[4].split(" ", 2)[2]) == {"id": 2, "a": 20, "note": "two"}
    finally:
        query.stop()


# --- table-level DDL: truncate, rename away and back, a pt-osc style swap, drop and create ------

_COLS = "id, " + ", ".join(VALUE_COLS)
TABLE_SEQUENCE = [
    ("truncate", ["TRUNCATE TABLE orders"]),
    ("rename away and back", ["RENAME TABLE orders TO orders_parked", "RENAME TABLE orders_parked TO orders"]),
    # pt-online-schema-change's shape: a copy with a new column, filled, then swapped in at once
    (
        "swap",
        [
            "CREATE TABLE orders_new LIKE orders",
            "ALTER TABLE orders_new ADD COLUMN pt INT NULL",
            f"INSERT INTO orders_new ({_COLS}) SELECT {_COLS} FROM orders",
            "RENAME TABLE orders TO orders_old, orders_new TO orders",
            "DROP TABLE orders_old",
        ],
    ),
    (
        "drop and create",
        ["DROP TABLE orders", f"CREATE TABLE orders (id BIGINT NOT NULL PRIMARY KEY, {VALUE_DDL}, born INT NULL)"],
    ),
]
TABLE_CASES = [("postgres", "evolve"), ("delta", "try_evolve"), ("changelog", "evolve")]


def _changelog_rows(root, t: TableId, cols, decode) -> dict:
    from airflow_provider_mysqlcdc.spark.sinks.json_values import read_json_lines

    lines = [
        line
        for f in sorted((root / t.database / t.table / "stream").glob("batch-*.jsonl"))
        for line in read_json_lines(str(f))
    ]
    snapshot = [
        line
        for f in sorted((root / t.database / t.table / "snapshot").rglob("*.jsonl"))
        for line in read_json_lines(str(f))
    ]
    return {(k,): v for k, v in _replay(snapshot + lines, lambda r: decode({c: r.get(c) for c in cols})).items()}


@pytest.mark.parametrize("kind,behavior", TABLE_CASES, ids=[f"{k}-{b}" for k, b in TABLE_CASES])
def test_table_level_ddl_under_writers(mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, kind, behavior):
    """TRUNCATE, a rename away and back, a pt-osc style swap and DROP + CREATE on ``orders``, with
    writers on both tables (the one on ``orders`` holds still while its table is gone, as an
    application would fail then). Afterwards the sink equals the source on today's columns; a
    sink that cannot drop a table (Delta under try_evolve) keeps the dropped table's rows, and
    only those."""
    from airflow_provider_mysqlcdc.cdc.pipeline import SinkConfig
    from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
    from airflow_provider_mysqlcdc.spark.sinks.json_values import row_decoder

    specs = [
        create_int_table(mariadb, fresh_db, 2_000, "orders"),
        create_composite_table(mariadb, fresh_db, 1_000, "tenant_items"),
    ]
    src = mariadb.source_config()
    sink_cfg = (
        SinkConfig("changelog", {"root": str(tmp_dir / "log")})
        if kind == "changelog"
        else sink_config(kind, tmp_dir, postgres, monkeypatch)
    )
    config = PipelineConfig(
        name=f"tables-{kind}-{behavior}",
        source=src,
        include=(f"{fresh_db}.orders", f"{fresh_db}.tenant_items"),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        split=SplitOptions(chunk_size=1000),
        stream=StreamOptions(max_events_per_batch=2000, heartbeat_s=1.0, trigger_interval_s=0.3),
        schema_change_behavior=behavior,
    )
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=2)
    state = StateStore(config.state_location)
    state.write_plan(plan)
    writers = [
        ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=20 + i, threads=1, pause_s=0.003)
        for i, spec in enumerate(specs)
    ]
    for w in writers:
        w.start()
    orders, items = TableId(fresh_db, "orders"), TableId(fresh_db, "tenant_items")
    stale: set = set()  # keys of the dropped table, which a sink that drops no table keeps
    query = None
    try:
        for b in plan.batches:
            run_snapshot_batch(spark, config, b.batch_id, plan=plan)
        state.write_finished(state.finished_from_results())
        query = start_stream(spark, config, build_sink(config.sink), list(plan.schemas.values()))
        time.sleep(2)
        for name, statements in TABLE_SEQUENCE:
            writers[0].pause()
            if name == "drop and create":
                stale = set(mysql_rows(mariadb, orders, ["id"], ("id",)))
            mariadb.execute(*statements, database=fresh_db)
            writers[0].resume(reload_keys=True)
            time.sleep(1.5)
    finally:
        changes = sum(w.stop().total for w in writers)
    assert changes > 100, "the writers must really write while the DDL runs"
    assert query is not None
    try:
        with mariadb.connect() as conn:
            final = read_table_schema(conn, orders)
        cols = list(final.column_names)
        assert cols == ["id", *VALUE_COLS, "born"]
        schema_name = sink_cfg.options.get("schema")
        for t, want, ident in (
            (orders, cols, ("id",)),
            (items, [*specs[1].key_columns, *VALUE_COLS], tuple(specs[1].key_columns)),
        ):
            if kind == "delta":

                def actual(t=t, want=want, ident=ident):
                    return {k: {c: r.get(c) for c in want} for k, r in delta_rows(tmp_dir / "lake", t, ident).items()}
            elif kind == "postgres":

                def actual(t=t, want=want, ident=ident):
                    return postgres_rows(postgres, f"{t.database}__{t.table}", want, ident, schema_name)
            else:
                with mariadb.connect() as conn:
                    decode = row_decoder(read_table_schema(conn, t))

                def actual(t=t, want=want, decode=decode):
                    if t == items:
                        rows = {}
                        from airflow_provider_mysqlcdc.spark.sinks.json_values import read_json_lines

                        paths = sorted((tmp_dir / "log" / t.database / t.table / "snapshot").rglob("*.jsonl"))
                        paths += sorted((tmp_dir / "log" / t.database / t.table / "stream").glob("batch-*.jsonl"))
                        for p in paths:
                            for line in read_json_lines(str(p)):
                                k = tuple(line["data"][c] for c in ident)
                                if line["op"] in ("+I", "+U"):
                                    rows[k] = decode({c: line["data"].get(c) for c in want})
                                elif line["op"] in ("-D", "-U"):
                                    rows.pop(k, None)
                        return rows
                    return _changelog_rows(tmp_dir / "log", t, want, decode)

            def expected(t=t, want=want, ident=ident):
                return mysql_rows(mariadb, t, want, ident)

            if kind == "delta" and t == orders:
                # the drop was logged, not applied: the sink holds the source plus stale keys only
                def compare(expected=expected, actual=actual):
                    exp, act = expected(), actual()
                    extra = set(act) - set(exp)
                    # (a key the sink does not hold yet shows as missing, and the wait goes on)
                    return ({k: act[k] for k in exp if k in act}, exp) if extra <= stale else (act, exp)

                deadline = time.time() + 120
                while True:
                    got, exp = compare()
                    if got == exp or time.time() > deadline:
                        break
                    time.sleep(1)
                assert got == exp, f"{kind}/{behavior} {t}: {len(got)} vs {len(exp)} rows"
                continue
            problem = wait_until_equal(expected, actual, timeout_s=120)
            assert not problem, f"{kind}/{behavior} {t} after {changes} changes:\n{problem}"
        assert query.exception() is None
    finally:
        query.stop()
