"""The changelog and Iceberg sinks and the state location on S3, through the jobs as the operators run them.

moto's S3 server on localhost (harness/mysqlcdc_harness/s3.py). The snapshot jobs and the stream job run
as their own processes with the credentials in their environment only (what the operators
give them from the ``aws`` connection); the test process holds none outside ``aws_env``
blocks. Writers run throughout; the stream is killed with SIGKILL mid-run and started again,
resuming from its checkpoint on S3 (its local working copy deleted); the changelog replayed
from S3 equals the source row by row.
"""

from __future__ import annotations

import json
import re
import shutil
import time

import pytest

from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.snapshot.planning import build_plan
from airflow_provider_mysqlcdc.cdc.source.config import SplitOptions
from mysqlcdc_harness.mariadb import ROOT_PASSWORD
from mysqlcdc_harness.s3 import aws_env, credentials, s3_server
from mysqlcdc_harness.sink_compare import mysql_rows, wait_until_equal
from mysqlcdc_harness.stream_job import kill_job, start_job, start_snapshot_job
from mysqlcdc_harness.tables import VALUE_COLS, create_composite_table, create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with s3_server(tmp_path_factory.mktemp("moto")) as info:
        yield info


def _replay(info, root: str, t: TableId, ident, cols) -> dict:
    """The changelog on S3 read back into the rows it describes (snapshot parts, then micro-batches)."""
    import fsspec

    from airflow_provider_mysqlcdc.cdc.chunks import KeyRange

    with aws_env(info):
        fs = fsspec.filesystem("s3")
        base = f"{root.removeprefix('s3://')}/{t.database}/{t.table}"
        files = sorted(p for p in fs.find(f"{base}/snapshot") if p.endswith(".jsonl"))
        files += sorted(p for p in fs.glob(f"{base}/stream/batch-*.jsonl"))
        texts = [fs.cat_file(p).decode() for p in files]
    state: dict = {}
    for text in texts:
        for line in (json.loads(x) for x in text.splitlines() if x.strip()):
            if line["op"] == "RS":
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


def _as_logged(row: dict) -> dict:
    """A source row as the changelog writes it: DECIMAL as its string, DATETIME in ISO form."""
    import datetime as dt
    import decimal

    def enc(v):
        if isinstance(v, decimal.Decimal):
            return str(v)
        if isinstance(v, dt.datetime):
            return v.strftime("%Y-%m-%dT%H:%M:%S.%f")
        return v

    return {k: enc(v) for k, v in row.items()}


def _wait_for_commits(info, checkpoint_url: str, at_least: int, proc, log, timeout_s: float = 180) -> int:
    import fsspec

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with aws_env(info):
            fs = fsspec.filesystem("s3")
            fs.invalidate_cache()
            path = f"{checkpoint_url.removeprefix('s3://')}/commits"
            n = len([p for p in fs.ls(path, detail=False) if p.rsplit("/", 1)[-1].isdigit()]) if fs.exists(path) else 0
        if n >= at_least:
            return n
        assert proc.poll() is None, f"the stream job died: {log.read_text(errors='replace')[-3000:]}"
        time.sleep(1)
    pytest.fail(f"fewer than {at_least} commits reached S3: {log.read_text(errors='replace')[-3000:]}")


def test_changelog_and_state_on_s3_through_the_jobs_with_a_killed_stream(mariadb, fresh_db, s3, tmp_dir):
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.cdc.store.pipeline_file import write_config
    from airflow_provider_mysqlcdc.spark.stream.offsets.checkpoint_mirror import local_copy_dir

    specs = [
        create_int_table(mariadb, fresh_db, 12_000, "orders"),
        create_composite_table(mariadb, fresh_db, 6_000, "tenant_items"),
    ]
    src = mariadb.source_config()
    prefix = f"s3://{s3['bucket']}/{fresh_db}"
    config = PipelineConfig(
        name=f"s3-{fresh_db}",
        source=src,
        include=(f"{fresh_db}.orders", f"{fresh_db}.tenant_items"),
        state_location=f"{prefix}/state",
        sink=SinkConfig("changelog", {"root": f"{prefix}/log"}),
        split=SplitOptions(chunk_size=2000),
        stream=StreamOptions(max_events_per_batch=3000, heartbeat_s=1.0, trigger_interval_s=0.5),
    )
    plan = build_plan(src, config.include, split=config.split, chunks_per_batch=10)
    with aws_env(s3):
        state = StateStore(config.state_location)
        state.write_plan(plan)
        cfg_url = write_config(state, config)
        checkpoint = state.checkpoint_url()
    env = credentials(s3).env()
    writers = [
        ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=70 + i, threads=1, pause_s=0.01)
        for i, spec in enumerate(specs)
    ]
    for w in writers:
        w.start()
    stream = None
    log = tmp_dir / "jobs.log"
    try:
        for b in plan.batches:
            job = start_snapshot_job(cfg_url, b.batch_id, log, ROOT_PASSWORD, extra_env=env)
            assert job.wait(300) == 0, log.read_text(errors="replace")[-3000:]
        with aws_env(s3):
            state.write_finished(state.finished_from_results())
        stream = start_job(cfg_url, log, ROOT_PASSWORD, extra_env=env)
        _wait_for_commits(s3, checkpoint, 3, stream, log)
        kill_job(stream)  # mid-run: micro-batches commit every 0.5 s under the writers
        shutil.rmtree(local_copy_dir(checkpoint), ignore_errors=True)
        # the killed job may have uploaded more commits than the 3 waited for: the restarted one
        # must add its own (a fixed count passed at once under load, before it had restored)
        before = _wait_for_commits(s3, checkpoint, 0, stream, log)
        stream = start_job(cfg_url, log, ROOT_PASSWORD, extra_env=env)
        _wait_for_commits(s3, checkpoint, before + 3, stream, log)
        time.sleep(3)
    finally:
        changes = sum(w.stop().total for w in writers)
    try:
        assert changes > 200, "the writers must change rows during snapshot and stream"
        text = log.read_text(errors="replace")
        restored = [int(n) for n in re.findall(r"restored from \S+ \((\d+) files\)", text)]
        assert "checkpoints to" in text and len(restored) == 2 and restored[1] > 0, restored
        for spec in specs:
            t = TableId(fresh_db, spec.table)
            cols = list(spec.key_columns) + list(VALUE_COLS)
            problem = wait_until_equal(
                lambda: {k: _as_logged(r) for k, r in mysql_rows(mariadb, t, cols, spec.key_columns).items()},
                lambda: _replay(s3, config.sink.options["root"], t, spec.key_columns, cols),
                timeout_s=120,
            )
            assert not problem, f"{t} after {changes} changes:\n{problem}"
    finally:
        if stream is not None:
            kill_job(stream)


def _bucket_keys(info, prefix: str) -> list[str]:
    import fsspec

    with aws_env(info):
        fs = fsspec.filesystem("s3")
        fs.invalidate_cache()
        return fs.find(prefix.removeprefix("s3://"))


def test_iceberg_on_s3_with_a_postgresql_catalog_through_the_jobs_with_a_killed_stream(
    mariadb, fresh_db, s3, postgres, tmp_dir, monkeypatch
):
    """The warehouse on S3 (keys from the aws connection's environment), the catalog in PostgreSQL
    (password as $PGPASSWORD, the sink connection's): snapshot jobs under writers, the stream
    SIGKILLed once and restarted, then compacted and expired beside the running stream and writers
    (the watchdog's maintenance); the table equals the source row by row, its files are all in
    the bucket, and neither secret is in the stored settings or the jobs' log."""
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.cdc.store.pipeline_file import write_config
    from airflow_provider_mysqlcdc.operators.maintenance import maintain_pipeline
    from airflow_provider_mysqlcdc.spark.sinks.iceberg import catalog as cat
    from airflow_provider_mysqlcdc.spark.sinks.iceberg.apply import BATCH_KEY
    from airflow_provider_mysqlcdc.spark.sinks.iceberg.maintenance import MaintenancePolicy
    from airflow_provider_mysqlcdc.spark.stream.offsets.checkpoint_mirror import local_copy_dir
    from mysqlcdc_harness.sink_compare import iceberg_rows
    from mysqlcdc_harness.stream_job import REPO

    monkeypatch.delenv("PGPASSWORD", raising=False)  # this process's reads hand the password in memory
    specs = [
        create_int_table(mariadb, fresh_db, 12_000, "orders"),
        create_composite_table(mariadb, fresh_db, 6_000, "tenant_items"),
    ]
    catalog_db = f"ice_{fresh_db}"
    postgres.execute(f'CREATE DATABASE "{catalog_db}"')
    stream = None
    try:
        catalog = {"type": "sql", "uri": f"postgresql+psycopg://mysqlcdc@127.0.0.1:{postgres.port}/{catalog_db}"}
        src = mariadb.source_config()
        prefix = f"s3://{s3['bucket']}/{fresh_db}"
        root = f"{prefix}/warehouse"
        config = PipelineConfig(
            name=f"s3-ice-{fresh_db}",
            source=src,
            include=(f"{fresh_db}.orders", f"{fresh_db}.tenant_items"),
            state_location=f"{prefix}/state",
            sink=SinkConfig("iceberg", {"root": root, "catalog": catalog}),
            split=SplitOptions(chunk_size=2000),
            stream=StreamOptions(max_events_per_batch=3000, heartbeat_s=1.0, trigger_interval_s=0.5),
        )
        plan = build_plan(src, config.include, split=config.split, chunks_per_batch=10)
        with aws_env(s3):
            state = StateStore(config.state_location)
            state.write_plan(plan)
            cfg_url = write_config(state, config)
            checkpoint = state.checkpoint_url()
        local_before = {p.name for p in REPO.iterdir()}
        env = {**credentials(s3).env(), "PGPASSWORD": postgres.password}  # as the operators hand them on
        writers = [
            ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=90 + i, threads=1, pause_s=0.01)
            for i, spec in enumerate(specs)
        ]
        for w in writers:
            w.start()
        log = tmp_dir / "jobs.log"
        try:
            for b in plan.batches:
                job = start_snapshot_job(cfg_url, b.batch_id, log, ROOT_PASSWORD, extra_env=env)
                assert job.wait(300) == 0, log.read_text(errors="replace")[-3000:]
            with aws_env(s3):
                state.write_finished(state.finished_from_results())
            stream = start_job(cfg_url, log, ROOT_PASSWORD, extra_env=env)
            _wait_for_commits(s3, checkpoint, 3, stream, log)
            kill_job(stream)  # mid-run: micro-batches commit every 0.5 s under the writers
            shutil.rmtree(local_copy_dir(checkpoint), ignore_errors=True)
            before = _wait_for_commits(s3, checkpoint, 0, stream, log)
            stream = start_job(cfg_url, log, ROOT_PASSWORD, extra_env=env)
            _wait_for_commits(s3, checkpoint, before + 3, stream, log)
            with aws_env(s3):  # compaction and expiry beside the running stream and the writers
                reports = maintain_pipeline(
                    config.state_location,
                    sink_password=postgres.password,
                    storage=credentials(s3),
                    policy=MaintenancePolicy(min_files=2, snapshot_max_age_s=0, retain_last=3),
                )
            _wait_for_commits(s3, checkpoint, before + 6, stream, log)
            time.sleep(3)
        finally:
            changes = sum(w.stop().total for w in writers)
        assert changes > 200, "the writers must change rows during snapshot and stream"
        # the stream's commits keep these tables a file or two (writers change rows anywhere), so the
        # run mostly expires; compaction beside the stream is the unit tests' (test_iceberg_maintenance)
        assert len(reports) == 2 and all(r["files_after"] <= r["files_before"] for r in reports), reports
        assert all(r["snapshots_expired"] > 0 and r["files_deleted"]["manifest lists"] > 0 for r in reports), reports
        text = log.read_text(errors="replace")
        restored = [int(n) for n in re.findall(r"restored from \S+ \((\d+) files\)", text)]
        assert len(restored) == 2 and restored[1] > 0, restored
        storage = credentials(s3).storage_options()
        for spec in specs:
            t = TableId(fresh_db, spec.table)
            cols = list(spec.key_columns) + list(VALUE_COLS)
            problem = wait_until_equal(
                lambda: mysql_rows(mariadb, t, cols, spec.key_columns),
                lambda: {
                    k: {c: r[c] for c in cols}
                    for k, r in iceberg_rows(root, t, spec.key_columns, catalog, postgres.password, storage).items()
                },
                timeout_s=120,
            )
            assert not problem, f"{t} after {changes} changes:\n{problem}"
        # the catalog is PostgreSQL's, every file the table references is an object in the bucket
        props = {**cat.storage_properties(root, storage), **cat.check_catalog_options(root, catalog)}
        keys = set(_bucket_keys(s3, root))
        for spec in specs:
            table = cat.load(cat.DEFAULT_CATALOG_NAME, props, postgres.password).load_table((fresh_db, spec.table))
            assert table.metadata_location.startswith(f"{root}/"), table.metadata_location
            paths = [task.file.file_path for task in table.scan().plan_files()]
            assert paths and all(p.startswith(f"{root}/") and p.removeprefix("s3://") in keys for p in paths), paths
            assert int(table.properties[BATCH_KEY]) >= 3, "the stream's commits record their micro-batch"
        assert any("/data/_snapshot/" in k for k in keys), "the snapshot's executors wrote into the bucket"
        with postgres.connect(catalog_db) as c:
            listed = c.execute("SELECT table_name, metadata_location FROM iceberg_tables").fetchall()
        assert sorted(n for n, _ in listed) == ["orders", "tenant_items"] and all(m.startswith(root) for _, m in listed)
        # nothing landed on the local disk (a warehouse path taken for a local one, a SQLite catalog)
        assert {p.name for p in REPO.iterdir()} == local_before
        assert not list(tmp_dir.rglob("*.parquet")) and not list(tmp_dir.rglob("catalog.db"))
        # neither secret is stored with the pipeline or logged
        with aws_env(s3):
            state.fs.invalidate_cache()
            stored = "".join(state.fs.cat_file(p).decode(errors="replace") for p in state.fs.find(state.root))
        assert '"catalog"' in stored, "the stored settings were read"
        for secret in (s3["secret"], postgres.password):
            assert secret not in stored and secret not in text
    finally:
        if stream is not None:
            kill_job(stream)
        # the catalog database is this test's alone (FORCE: this process's catalog engines still hold connections)
        postgres.execute(f'DROP DATABASE IF EXISTS "{catalog_db}" WITH (FORCE)')
