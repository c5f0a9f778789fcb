"""A batch read again while the stream runs: its rows are handed to the stream, which replaces the
batch's key ranges exactly (issue: live table set and exact re-snapshot).

Two tables with writers on both throughout; every batch snapshotted; the stream takes over.
Then the sink is damaged inside one batch's range the way a bad load or a manual fix leaves
it (rows missing, rows with wrong values, rows the source never had), and that batch is run
again. Its job must not write the sink (the stream owns it): it hands its rows over, the stream
corrects them with the binlog to the end of a micro-batch and replaces the range there. After
the writers stop, the sink equals the source row by row, in PostgreSQL, Delta and the
changelog (replayed, ``RS`` lines included).
"""

from __future__ import annotations

import json
import time

import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.snapshot.resnapshot import read_applied
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
from mysqlcdc_harness.tables import VALUE_COLS, create_composite_table, create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark]

KINDS = ["postgres", "delta", "changelog", "iceberg"]


def _wait_applied(state, ids, query=None, proc=None, log=None, timeout_s: float = 90) -> list[dict]:
    """Every hand-off's applied.json (none superseded)."""
    deadline = time.time() + timeout_s
    out = []
    for hid in ids:
        while (applied := read_applied(state, hid)) is None:
            assert time.time() < deadline, f"hand-off {hid} not taken over"
            if query is not None:
                assert query.exception() is None, query.exception()
            if proc is not None:
                assert proc.poll() is None, log.read_text(errors="replace")[-3000:] if log else ""
            time.sleep(0.5)
        assert "superseded" not in applied, applied
        out.append(applied)
    return out


def _damage(kind: str, tmp_dir, postgres, schema_name: str | None, t: TableId, lo: int, hi: int) -> int:
    """Inside ``[lo, hi)`` of ``orders``' id: delete some rows, garble some, add rows the source
    never had. Returns how many rows were touched."""
    if kind == "postgres":
        table = f'"{schema_name}"."{t.database}__{t.table}"'
        postgres.execute(
            f"DELETE FROM {table} WHERE id >= {lo} AND id < {hi} AND id % 8 = 0",
            f"UPDATE {table} SET a = -1, s = 'garbled' WHERE id >= {lo} AND id < {hi} AND id % 8 = 2",
            f"INSERT INTO {table} (id, a, s) SELECT g, -2, 'ghost' FROM generate_series({lo + 1}, "
            f"{min(hi, lo + 200)}, 2) g ON CONFLICT DO NOTHING",
        )
        return 1
    if kind == "iceberg":
        return _damage_iceberg(tmp_dir, t, lo, hi)
    from deltalake import DeltaTable, write_deltalake

    dt = DeltaTable(str(tmp_dir / "lake" / t.database / t.table))
    dt.delete(f"id >= {lo} AND id < {hi} AND id % 8 = 0")
    dt.update(updates={"a": "-1", "s": "'garbled'"}, predicate=f"id >= {lo} AND id < {hi} AND id % 8 = 2")
    present = set(dt.to_pyarrow_table(columns=["id"]).column("id").to_pylist())
    ghosts = [
        {"id": i, "a": -2, "s": "ghost", "amount": None, "ts": None}
        for i in range(lo + 1, min(hi, lo + 200), 2)
        if i not in present
    ]
    import pyarrow as pa

    schema = dt.schema().to_arrow()
    write_deltalake(dt, pa.Table.from_pylist(ghosts, schema=pa.schema(schema)), mode="append")
    return 1


def _damage_iceberg(tmp_dir, t: TableId, lo: int, hi: int) -> int:
    """``_damage`` on the Iceberg sink's table, through pyiceberg (as another writer would)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.expressions import In

    from airflow_provider_mysqlcdc.spark.sinks.iceberg import catalog as cat

    props = cat.check_catalog_options(str((tmp_dir / "lake").resolve()), None)
    table = cat.load(cat.DEFAULT_CATALOG_NAME, props).load_table(cat.identifier(t))
    rows = table.scan().to_arrow()
    ids = rows.column("id").to_pylist()
    gone = [i for i in ids if lo <= i < hi and i % 8 == 0]
    garbled = [i for i in ids if lo <= i < hi and i % 8 == 2]
    garbled_rows = rows.filter(pc.is_in(rows.column("id"), pa.array(garbled, rows.schema.field("id").type)))
    garbled_rows = garbled_rows.set_column(
        garbled_rows.schema.get_field_index("a"),
        "a",
        pa.array([-1] * garbled_rows.num_rows, rows.schema.field("a").type),
    )
    garbled_rows = garbled_rows.set_column(
        garbled_rows.schema.get_field_index("s"), "s", pa.array(["garbled"] * garbled_rows.num_rows, pa.string())
    )
    table.delete(In("id", gone + garbled))
    present = set(ids)
    ghosts = [
        {"id": i, "a": -2, "s": "ghost", "amount": None, "ts": None}
        for i in range(lo + 1, min(hi, lo + 200), 2)
        if i not in present
    ]
    table = table.refresh()
    table.append(pa.concat_tables([garbled_rows, pa.Table.from_pylist(ghosts, schema=rows.schema)]))
    return 1


def _replay_changelog(root, t: TableId, ident, cols) -> dict:
    from airflow_provider_mysqlcdc.cdc.chunks import KeyRange
    from airflow_provider_mysqlcdc.spark.sinks.json_values import read_json_lines

    files = sorted((root / t.database / t.table / "snapshot").rglob("*.jsonl"))
    files += sorted((root / t.database / t.table / "stream").glob("batch-*.jsonl"))
    state: dict = {}
    for f in files:
        for line in read_json_lines(str(f)):
            if line["op"] == "RS":  # replace the ranges: what follows as "r" is all they hold
                for d in line["resnapshot"]["ranges"]:
                    r = KeyRange.from_dict(d)
                    for k in [
                        k
                        for k in state
                        if (r.start is None or k >= tuple(r.start)) and (r.end is None or k < tuple(r.end))
                    ]:
                        del state[k]
                continue
            data = line["data"]
            k = tuple(data[c] for c in ident)
            if line["op"] in ("+I", "+U", "r"):
                state[k] = {c: data.get(c) for c in cols}
            elif line["op"] in ("-D", "-U"):
                state.pop(k, None)
    return state


@pytest.mark.parametrize("kind", KINDS)
def test_a_batch_read_again_while_streaming_replaces_its_range_exactly(
    mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, kind
):
    specs = [
        create_int_table(mariadb, fresh_db, 4_000, "orders"),
        create_composite_table(mariadb, fresh_db, 2_000, "tenant_items"),
    ]
    src = mariadb.source_config()
    sink_cfg = (
        SinkConfig("changelog", {"root": str(tmp_dir / "log")})
        if kind == "changelog"
        else sink_config(kind, tmp_dir, postgres, monkeypatch)
    )
    config = PipelineConfig(
        name=f"resnap-{kind}",
        source=src,
        include=(f"{fresh_db}.orders", f"{fresh_db}.tenant_items"),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        split=SplitOptions(chunk_size=1000),
        # pieces of one chunk each, one piece per micro-batch: a big batch's way through the stream
        stream=StreamOptions(
            max_events_per_batch=2000,
            heartbeat_s=1.0,
            trigger_interval_s=0.3,
            handoff_piece_rows=700,
            takeover_rows_per_batch=1,
        ),
    )
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=2)
    state = StateStore(config.state_location)
    state.write_plan(plan)
    writers = [
        ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=40 + i, threads=1, pause_s=0.003)
        for i, spec in enumerate(specs)
    ]
    for w in writers:
        w.start()
    orders, items = TableId(fresh_db, "orders"), TableId(fresh_db, "tenant_items")
    victim = next(b for b in plan.batches if orders in b.tables and b.batch_id != plan.batches[0].batch_id)
    (rng,) = [r for r in victim.ranges() if r.table_id == orders]
    lo, hi = (rng.start or (0,))[0], (rng.end or (10**9,))[0]
    query = None
    try:
        for b in plan.batches:
            run_snapshot_batch(spark, config, b.batch_id, plan=plan)
        state.write_finished(state.finished_from_results())
        query = start_stream(spark, config, build_sink(config.sink), list(plan.schemas.values()))
        time.sleep(3)
        schema_name = sink_cfg.options.get("schema")
        if kind != "changelog":  # with the stream stopped: a Delta update beside its merge would conflict
            query.stop()
            _damage(kind, tmp_dir, postgres, schema_name, orders, lo, hi)
            query = start_stream(spark, config, build_sink(config.sink), list(plan.schemas.values()))
        before = state.read_batch_result(victim.batch_id)
        result = run_snapshot_batch(spark, config, victim.batch_id, plan=plan)
        assert len(result["handoff"]) == len(victim.chunks) == 2
        assert result["written"][str(orders)]["rows_written"] == 0
        assert result["high_watermark"] != before["high_watermark"]
        applied = _wait_applied(state, result["handoff"], query=query)
        assert all(a["rows"] > 0 for a in applied)
        assert len({a["micro_batch"] for a in applied}) == 2, "one piece per micro-batch"
        time.sleep(2)
    finally:
        changes = sum(w.stop().total for w in writers)
    assert changes > 100
    try:
        for t, spec in ((orders, specs[0]), (items, specs[1])):
            ident = tuple(spec.key_columns)
            cols = list(ident) + list(VALUE_COLS)
            if kind in ("delta", "iceberg"):
                read = delta_rows if kind == "delta" else iceberg_rows

                def actual(t=t, ident=ident, cols=cols, read=read):
                    return {k: {c: r[c] for c in cols} for k, r in read(tmp_dir / "lake", t, ident).items()}
            elif kind == "postgres":

                def actual(t=t, ident=ident, cols=cols):
                    return postgres_rows(postgres, f"{t.database}__{t.table}", cols, ident, schema_name)
            else:
                from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
                from airflow_provider_mysqlcdc.spark.sinks.json_values import row_decoder

                with mariadb.connect() as conn:
                    decode = row_decoder(read_table_schema(conn, t))

                def actual(t=t, ident=ident, cols=cols, decode=decode):
                    return {k: decode(v) for k, v in _replay_changelog(tmp_dir / "log", t, ident, cols).items()}

            problem = wait_until_equal(
                lambda t=t, cols=cols, ident=ident: mysql_rows(mariadb, t, cols, ident), actual, timeout_s=120
            )
            assert not problem, f"{kind} {t} after {changes} changes:\n{problem}"
        assert query.exception() is None
        if kind == "changelog":
            lines = [
                json.loads(x)
                for f in sorted((tmp_dir / "log" / fresh_db / "orders" / "stream").glob("*.jsonl"))
                for x in f.read_text().splitlines()
            ]
            rs = [x for x in lines if x["op"] == "RS"]
            assert len(rs) == 2 and {x["resnapshot"]["batch"] for x in rs} == {victim.batch_id}
            assert sum(1 for x in lines if x["op"] == "r") == sum(x["resnapshot"]["rows"] for x in rs) > 0
    finally:
        query.stop()


# each crash point once, each on a sink where it means something different (a PostgreSQL transaction
# never begun; a Delta merge committed, the hand-off unmarked)
CRASHES = [("postgres", "resnapshot-taken"), ("delta", "resnapshot-applied")]


@pytest.mark.parametrize("kind,point", CRASHES, ids=[f"{k}-{p}" for k, p in CRASHES])
def test_a_stream_killed_while_it_takes_a_resnapshot_over_restarts_exactly(
    mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, kind, point
):
    """The stream job kills itself (SIGKILL, its process group) once it has built a re-snapshot's
    records (nothing written), or once the sink committed them (the hand-off not yet marked):
    started again, it takes the hand-off over once more, marks it, and the sink equals the source."""
    from mysqlcdc_harness.stream_job import committed, kill_job, start_job

    spec = create_int_table(mariadb, fresh_db, 3_000, "orders")
    src = mariadb.source_config(server_id_range="6500-6599")
    sink_cfg = sink_config(kind, tmp_dir, postgres, monkeypatch)
    config = PipelineConfig(
        name=f"resnap-kill-{kind}",
        source=src,
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        split=SplitOptions(chunk_size=1000),
        stream=StreamOptions(max_events_per_batch=500, heartbeat_s=1.0, trigger_interval_s=0.2),
    )
    cfg_path = tmp_dir / "pipeline.json"
    cfg_path.write_text(config.to_json())
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=1)
    state = StateStore(config.state_location)
    state.write_plan(plan)
    for b in plan.batches:
        run_snapshot_batch(spark, config, b.batch_id, plan=plan)
    state.write_finished(state.finished_from_results())
    log = tmp_dir / "job.log"
    checkpoint = tmp_dir / "state" / "stream" / "checkpoint"
    writer = ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=8, threads=1, pause_s=0.01).start()
    writing, proc = True, None
    t = TableId(fresh_db, "orders")
    try:
        proc = start_job(cfg_path, log, src.password, extra_env={"MYSQLCDC_CRASH_AT": point})
        deadline = time.time() + 180
        while committed(checkpoint) is None:
            assert time.time() < deadline and proc.poll() is None, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        result = run_snapshot_batch(spark, config, plan.batches[1].batch_id, plan=plan)
        assert proc.wait(120) == -9, "the job must kill itself at the crash point"
        assert all(read_applied(state, h) is None for h in result["handoff"])
        proc = start_job(cfg_path, log, src.password)
        applied = _wait_applied(state, result["handoff"], proc=proc, log=log, timeout_s=120)
        assert all(a["rows"] > 0 for a in applied)
        time.sleep(1)
        writer.stop()
        writing = False
        cols = ["id", *VALUE_COLS]
        if kind == "delta":

            def actual():
                return {k: {c: r[c] for c in cols} for k, r in delta_rows(tmp_dir / "lake", t, ("id",)).items()}
        else:

            def actual():
                return postgres_rows(postgres, f"{fresh_db}__orders", cols, ("id",), sink_cfg.options["schema"])

        problem = wait_until_equal(lambda: mysql_rows(mariadb, t, cols, ("id",)), actual, timeout_s=120)
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        assert not problem, f"{kind} crash at {point}:\n{problem}\njob log:\n{tail}"
    finally:
        if writing:
            writer.stop()
        if proc is not None:
            kill_job(proc)


@pytest.mark.parametrize("point", ["handoff-rows-written", "handoff-piece-handed"])
def test_a_snapshot_job_killed_while_it_hands_a_batch_over_leaves_nothing_wrong(
    mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, point
):
    """A batch read again while the stream runs, by the snapshot job as the operator starts it,
    killed (SIGKILL, its process group) once a piece's rows are written but not its manifest, or
    once its first piece is handed over and the second not read. The stream takes over what has
    a manifest and nothing else; the batch's rerun hands every piece over; the sink equals the
    source (PostgreSQL: the take-over path is the sinks' common one). Writers on."""
    from airflow_provider_mysqlcdc.cdc.snapshot.resnapshot import pending
    from mysqlcdc_harness.stream_job import kill_job, start_snapshot_job

    spec = create_int_table(mariadb, fresh_db, 4_000, "orders")
    src = mariadb.source_config(server_id_range="6300-6399")
    sink_cfg = sink_config("postgres", tmp_dir, postgres, monkeypatch)
    config = PipelineConfig(
        name="handoff-kill",
        source=src,
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        split=SplitOptions(chunk_size=1000),
        stream=StreamOptions(
            max_events_per_batch=2000,
            heartbeat_s=1.0,
            trigger_interval_s=0.3,
            handoff_piece_rows=700,
            takeover_rows_per_batch=1,
        ),
    )
    cfg_path = tmp_dir / "pipeline.json"
    cfg_path.write_text(config.to_json())
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=2)
    state = StateStore(config.state_location)
    state.write_plan(plan)
    t = TableId(fresh_db, "orders")
    victim = plan.batches[1]
    (rng,) = victim.ranges()
    lo, hi = (rng.start or (0,))[0], (rng.end or (10**9,))[0]
    writer = ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=90, threads=1, pause_s=0.005).start()
    writing, query, proc = True, None, None
    log = tmp_dir / "snapshot.log"
    try:
        for b in plan.batches:
            run_snapshot_batch(spark, config, b.batch_id, plan=plan)
        state.write_finished(state.finished_from_results())
        query = start_stream(spark, config, build_sink(config.sink), list(plan.schemas.values()))
        time.sleep(2)
        touched = _damage("postgres", tmp_dir, postgres, sink_cfg.options["schema"], t, lo, hi)
        assert touched > 0
        proc = start_snapshot_job(cfg_path, victim.batch_id, log, src.password, {"MYSQLCDC_CRASH_AT": point})
        assert proc.wait(240) == -9, "the job must kill itself at the crash point:\n" + log.read_text()[-3000:]
        handed = [h.handoff_id for h in pending(state)]
        if point == "handoff-rows-written":  # rows without a manifest: never a hand-off
            assert handed == [] and any((tmp_dir / "state" / "handoffs").iterdir())
        else:  # the first piece is the stream's to take
            assert len(handed) == 1, handed
            _wait_applied(state, handed, query=query)
        assert not state.exists(StateStore.batch_result_rel(victim.batch_id)), "a killed job leaves no result"
        proc = start_snapshot_job(cfg_path, victim.batch_id, log, src.password)
        assert proc.wait(240) == 0, log.read_text()[-3000:]
        result = state.read_batch_result(victim.batch_id)
        assert len(result["handoff"]) == 2
        _wait_applied(state, result["handoff"], query=query)
        time.sleep(1)
        writer.stop()
        writing = False
        cols = ["id", *VALUE_COLS]
        problem = wait_until_equal(
            lambda: mysql_rows(mariadb, t, cols, ("id",)),
            lambda: postgres_rows(postgres, f"{fresh_db}__orders", cols, ("id",), sink_cfg.options["schema"]),
            timeout_s=120,
        )
        assert not problem, f"snapshot job killed at {point}:\n{problem}"
        assert query.exception() is None
    finally:
        if writing:
            writer.stop()
        if proc is not None:
            kill_job(proc)
        if query is not None:
            query.stop()


@pytest.mark.parametrize("kind", ["postgres"])  # the take-over path is the sinks' common one (tested above on each)
def test_a_table_added_while_streaming_is_snapshotted_into_the_stream_and_captured_from_there(
    mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, kind
):
    """A longer table list while the stream job runs: only the new table is planned, its batches
    are read and handed to the stream, which takes the table over, starts again from its
    checkpoint to read it, and from then on streams its changes. Writers on both tables
    throughout; both equal the source afterwards."""
    from dataclasses import replace

    from airflow_provider_mysqlcdc.cdc.snapshot.planning import extend_plan
    from mysqlcdc_harness.stream_job import committed, kill_job, start_job

    specs = [
        create_int_table(mariadb, fresh_db, 3_000, "orders"),
        create_composite_table(mariadb, fresh_db, 2_000, "tenant_items"),
    ]
    src = mariadb.source_config(server_id_range="6600-6699")
    sink_cfg = sink_config(kind, tmp_dir, postgres, monkeypatch)
    config = PipelineConfig(
        name=f"add-{kind}",
        source=src,
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        split=SplitOptions(chunk_size=1000),
        stream=StreamOptions(max_events_per_batch=1000, heartbeat_s=1.0, trigger_interval_s=0.3),
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
    writers = [
        ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=60 + i, threads=1, pause_s=0.005)
        for i, spec in enumerate(specs)
    ]
    for w in writers:
        w.start()
    writing, proc = True, None
    items = TableId(fresh_db, "tenant_items")
    try:
        proc = start_job(cfg_path, log, src.password)
        deadline = time.time() + 180
        while committed(checkpoint) is None:
            assert time.time() < deadline and proc.poll() is None, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        # what the plan task does with the longer list: plan the new table, rewrite the settings
        wider = replace(config, include=(f"{fresh_db}.orders", f"{fresh_db}.tenant_items"))
        grown, added, removed = extend_plan(plan, src, wider.include, split=wider.split)
        assert added == [items] and not removed and grown.batches[: len(plan.batches)] == plan.batches
        state.write_plan(grown)
        cfg_path.write_text(wider.to_json())
        new = grown.batches[len(plan.batches) :]
        assert new and all(b.tables == (items,) for b in new)
        results = [run_snapshot_batch(spark, wider, b.batch_id, plan=grown) for b in new]
        _wait_applied(state, [h for r in results for h in r["handoff"]], proc=proc, log=log, timeout_s=180)
        time.sleep(3)
        for w in writers:
            w.stop()
        writing = False
        text = log.read_text(errors="replace")
        assert "starting again from its checkpoint to capture the tables it took over" in text, text[-3000:]
        for t, spec in ((TableId(fresh_db, "orders"), specs[0]), (items, specs[1])):
            ident = tuple(spec.key_columns)
            cols = list(ident) + list(VALUE_COLS)
            if kind == "delta":

                def actual(t=t, ident=ident, cols=cols):
                    return {k: {c: r[c] for c in cols} for k, r in delta_rows(tmp_dir / "lake", t, ident).items()}
            else:

                def actual(t=t, ident=ident, cols=cols):
                    return postgres_rows(postgres, f"{t.database}__{t.table}", cols, ident, sink_cfg.options["schema"])

            problem = wait_until_equal(
                lambda t=t, cols=cols, ident=ident: mysql_rows(mariadb, t, cols, ident), actual, timeout_s=120
            )
            assert not problem, f"{kind} {t}:\n{problem}\njob log:\n{log.read_text(errors='replace')[-3000:]}"
        assert proc.poll() is None, "the stream job keeps running"

        # Then orders leaves the list (what the plan task does): the stream stops reading it, its sink
        # table stays as it was, tenant_items keeps flowing.
        orders = TableId(fresh_db, "orders")
        narrower = replace(config, include=(f"{fresh_db}.tenant_items",))
        cfg_path.write_text(narrower.to_json())
        state.request_stream_restart("tables removed from the pipeline: orders")
        deadline = time.time() + 120
        while "removed from the pipeline are not read any more" not in log.read_text(errors="replace"):
            assert time.time() < deadline and proc.poll() is None, log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        ocols = ["id", *VALUE_COLS]

        def sink_orders():
            if kind == "delta":
                return {k: {c: r[c] for c in ocols} for k, r in delta_rows(tmp_dir / "lake", orders, ("id",)).items()}
            return postgres_rows(postgres, f"{fresh_db}__orders", ocols, ("id",), sink_cfg.options["schema"])

        time.sleep(2)
        frozen = sink_orders()
        writers = [
            ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=70 + i, threads=1, pause_s=0.005)
            for i, spec in enumerate(specs)
        ]
        for w in writers:
            w.start()
        writing = True
        time.sleep(4)
        for w in writers:
            w.stop()
        writing = False
        assert mysql_rows(mariadb, orders, ocols, ("id",)) != frozen, "the writer changed orders"
        icols = [*specs[1].key_columns, *VALUE_COLS]
        ident = tuple(specs[1].key_columns)
        if kind == "delta":

            def items_sink():
                return {k: {c: r[c] for c in icols} for k, r in delta_rows(tmp_dir / "lake", items, ident).items()}
        else:

            def items_sink():
                return postgres_rows(postgres, f"{fresh_db}__tenant_items", icols, ident, sink_cfg.options["schema"])

        problem = wait_until_equal(lambda: mysql_rows(mariadb, items, icols, ident), items_sink, timeout_s=120)
        assert not problem, f"{kind} tenant_items after orders left:\n{problem}"
        assert sink_orders() == frozen, "a removed table's sink table stays as it was"
        assert proc.poll() is None
    finally:
        if writing:
            for w in writers:
                w.stop()
        if proc is not None:
            kill_job(proc)


@pytest.mark.parametrize("kind", ["postgres", "delta"])  # Delta creates the table before the steps; PostgreSQL in them
def test_tables_created_under_a_captured_pattern_are_streamed_from_their_creation(
    mariadb, postgres, fresh_db, spark, tmp_dir, monkeypatch, kind
):
    """The table list is a pattern; while the stream job runs, CREATE TABLE makes a table it
    matches (then written to), and CREATE TABLE ... SELECT another one with rows. The stream
    takes both up from their DDL (its query starts again from the checkpoint to read them), with
    no run and no snapshot: their rows are all in the binlog after the DDL. Then two RENAMEs
    bring rows the binlog does not hold: a table of another database renamed into the pattern
    (a name the stream never read), and one renamed onto a captured table's name after a DROP
    (the sink still holds the dropped table's rows). The stream job reads both itself and takes
    them over, with writers on them. Writers on throughout."""
    import dataclasses

    from mysqlcdc_harness.stream_job import committed, kill_job, start_job

    spec = create_int_table(mariadb, fresh_db, 2_000, "orders")
    create_int_table(mariadb, fresh_db, 600, "archive")
    side = fresh_db + "_side"
    mariadb.execute(f"DROP DATABASE IF EXISTS `{side}`", f"CREATE DATABASE `{side}`")
    stash = dataclasses.replace(create_int_table(mariadb, side, 3_000, "stash"), database=fresh_db)
    create_int_table(mariadb, side, 900, "archive2")
    mariadb.execute("UPDATE archive2 SET a = -a - 7, s = CONCAT('other ', id)", database=side)
    src = mariadb.source_config(server_id_range="6700-6799")
    sink_cfg = sink_config(kind, tmp_dir, postgres, monkeypatch)
    config = PipelineConfig(
        name=f"created-{kind}",
        source=src,
        include=(fresh_db + r"\..*",),
        state_location=str(tmp_dir / "state"),
        sink=sink_cfg,
        split=SplitOptions(chunk_size=1000),
        stream=StreamOptions(max_events_per_batch=1000, heartbeat_s=1.0, trigger_interval_s=0.3),
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
    writers = [ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=80, threads=1, pause_s=0.005).start()]
    writing, proc = True, None
    try:
        proc = start_job(cfg_path, log, src.password)
        deadline = time.time() + 180
        while committed(checkpoint) is None:
            assert time.time() < deadline and proc.poll() is None, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        refunds = create_int_table(mariadb, fresh_db, 0, "refunds")  # CREATE TABLE, empty
        writers.append(
            ConcurrentWriter(
                lambda: mariadb.connect(fresh_db),
                refunds,
                seed=81,
                threads=1,
                pause_s=0.005,
                weights=(0.7, 0.2, 0.05, 0.05),
            ).start()
        )
        mariadb.execute(
            "CREATE TABLE copies (PRIMARY KEY (id)) AS SELECT id, a, s FROM orders WHERE id < 800", database=fresh_db
        )
        mariadb.execute("UPDATE copies SET a = -a WHERE id % 3 = 0", database=fresh_db)
        mariadb.execute(f"RENAME TABLE `{side}`.stash TO `{fresh_db}`.stash")
        writers.append(
            ConcurrentWriter(lambda: mariadb.connect(fresh_db), stash, seed=82, threads=1, pause_s=0.005).start()
        )
        mariadb.execute("DROP TABLE archive", database=fresh_db)
        mariadb.execute(f"RENAME TABLE `{side}`.archive2 TO `{fresh_db}`.archive")
        mariadb.execute(
            "UPDATE archive SET a = a + 1 WHERE id % 5 = 0", "DELETE FROM archive WHERE id % 7 = 0", database=fresh_db
        )
        reads = tmp_dir / "state" / "stream" / "table_reads"
        deadline = time.time() + 180

        def both_read() -> bool:  # each table read and handed over, no request left
            return (
                log.read_text(errors="replace").count("rows read and handed to the stream") >= 2
                and reads.exists()
                and not any(reads.iterdir())
            )

        while not both_read():
            assert time.time() < deadline and proc.poll() is None, (
                list(reads.iterdir()) if reads.exists() else None,
                log.read_text(errors="replace")[-4000:],
            )
            time.sleep(0.5)
        time.sleep(2)
        for w in writers:
            w.stop()
        writing = False
        text = log.read_text(errors="replace")
        assert "was created under the pipeline's table list" in text, text[-3000:]
        assert "starting again from its checkpoint" in text, text[-3000:]
        assert f"{fresh_db}.stash came under the pipeline's table list with rows of its own" in text, text[-3000:]
        assert f"{fresh_db}.archive: a table was renamed onto it" in text, text[-3000:]
        assert "rows read and handed to the stream" in text, text[-3000:]
        cases = [
            (TableId(fresh_db, "orders"), ["id", *VALUE_COLS]),
            (TableId(fresh_db, "refunds"), ["id", *VALUE_COLS]),
            (TableId(fresh_db, "copies"), ["id", "a", "s"]),
            (TableId(fresh_db, "stash"), ["id", *VALUE_COLS]),
            (TableId(fresh_db, "archive"), ["id", *VALUE_COLS]),
        ]
        for t, cols in cases:
            if kind == "delta":

                def actual(t=t, cols=cols):
                    return {k: {c: r[c] for c in cols} for k, r in delta_rows(tmp_dir / "lake", t, ("id",)).items()}
            else:

                def actual(t=t, cols=cols):
                    return postgres_rows(
                        postgres, f"{t.database}__{t.table}", cols, ("id",), sink_cfg.options["schema"]
                    )

            expected = mysql_rows(mariadb, t, cols, ("id",))
            assert expected, t
            problem = wait_until_equal(
                lambda t=t, cols=cols: mysql_rows(mariadb, t, cols, ("id",)), actual, timeout_s=120
            )
            assert not problem, f"{kind} {t}:\n{problem}\njob log:\n{log.read_text(errors='replace')[-3000:]}"
        assert proc.poll() is None, "the stream job keeps running"
    finally:
        if writing:
            for w in writers:
                w.stop()
        if proc is not None:
            kill_job(proc)
        mariadb.execute(f"DROP DATABASE IF EXISTS `{side}`")
