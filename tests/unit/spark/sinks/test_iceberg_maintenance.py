"""Iceberg maintenance on a real pyiceberg SQL catalog (SQLite) and warehouse, no Spark: many
micro-batches (one small file each), then compaction and expiry; the table must read the same
rows before and after, as of the current snapshot and of every kept one; the files only expired
snapshots read must be gone from disk and every file a kept snapshot reads still there; a
compaction racing a stream commit must not lose the stream's rows, and the stream's commit
racing a compaction is applied again on the new state. Then the ``maintain`` command: a
pipeline's tables found from its state location; a Delta pipeline and a missing state refused."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import random
import threading

import pyarrow as pa
import pytest

from airflow_provider_mysqlcdc.__main__ import main
from airflow_provider_mysqlcdc.cdc.chunks import Batch, Chunk
from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.model import Column, TableId, TableSchema
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, SourceConfig
from airflow_provider_mysqlcdc.cdc.plan import Plan
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.cdc.store.pipeline_file import write_config
from airflow_provider_mysqlcdc.spark.sinks.base import META_OP

pytest.importorskip("pyiceberg")

from airflow_provider_mysqlcdc.spark.sinks.iceberg.apply import (  # noqa: E402
    BATCH_KEY,
    STEP_KEY,
    apply_changes,
    last_recorded,
    with_op,
)
from airflow_provider_mysqlcdc.spark.sinks.iceberg.maintenance import (  # noqa: E402
    MAINTENANCE_KEY,
    MaintenancePolicy,
    TableMaintenance,
    compact,
    maintain,
)
from airflow_provider_mysqlcdc.spark.sinks.iceberg.sink import STEP_SCALE, IcebergSink  # noqa: E402

D = decimal.Decimal
SCHEMA = TableSchema(
    TableId("shop", "t"),
    (
        Column("id", 1, "bigint", "bigint(20) unsigned", False, numeric_precision=20, numeric_scale=0),
        Column("v", 2, "varchar", "varchar(20)", True, charset="utf8mb4", char_max_length=20),
        Column("ts", 3, "datetime", "datetime(6)", True, datetime_precision=6),
    ),
    ("id",),
    ("id",),
    ("id",),
)


def _rows(changes: list[tuple[int, str | None, str]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([D(c[0]) for c in changes], pa.decimal128(20, 0)),
            "v": pa.array([c[1] for c in changes], pa.string()),
            "ts": pa.array([dt.datetime(2026, 1, 1, 0, 0, 0, 1)] * len(changes), pa.timestamp("us")),
            META_OP: pa.array([c[2] for c in changes]),
        }
    )


def _batch(sink: IcebergSink, batch: int, changes: list[tuple[int, str | None, str]]) -> None:
    table = sink.open_table(SCHEMA.table_id)
    props = {STEP_KEY: str(batch * STEP_SCALE), BATCH_KEY: str(batch)}
    apply_changes(table, SCHEMA, with_op(table, _rows(changes)), props)


def _stream(
    sink: IcebergSink,
    batches: int,
    seed: int,
    first: int = 1,
    want: dict[int, str] | None = None,
    spread: bool = True,
) -> dict[int, str]:
    """``batches`` micro-batches, each inserting 5 new keys and (``spread``) upserting and deleting
    random ones; the expected rows (``want`` moved on). Without ``spread`` each commit adds a file
    no later one touches (the small files compaction is for)."""
    rng = random.Random(seed)
    want = {} if want is None else want
    ids = [0, 1, 2**63 - 1, 2**63, 2**64 - 1, *range(10, 400)]
    for b in range(first, first + batches):
        changes: dict[int, tuple[int, str | None, str]] = {}
        for i in range(1000 + b * 5, 1005 + b * 5):
            changes[i] = (i, f"new{b}", "+I")
            want[i] = f"new{b}"
        for _ in range(rng.randint(1, 12) if spread else 0):
            i = rng.choice(ids)
            if rng.random() < 0.2:
                changes[i] = (i, None, "-D")
                want.pop(i, None)
            else:
                v = f"b{b}-{rng.randint(0, 999)}"
                changes[i] = (i, v, "+U")
                want[i] = v
        _batch(sink, b, list(changes.values()))
    return want


def _read(table, snapshot_id: int | None = None) -> dict[int, str]:
    scan = table.scan(snapshot_id=snapshot_id) if snapshot_id is not None else table.scan()
    rows = scan.to_arrow().to_pylist()
    got = {int(r["id"]): r["v"] for r in rows}
    assert len(got) == len(rows), "a key is held twice"
    return got


def _files_of(table, snapshot) -> set[str]:
    paths = {snapshot.manifest_list}
    for m in snapshot.manifests(table.io):
        paths.add(m.manifest_path)
        paths |= {e.data_file.file_path for e in m.fetch_manifest_entry(table.io, discard_deleted=True)}
    return paths


def _local(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


def test_compaction_and_expiry_keep_every_kept_snapshot_readable_and_delete_the_rest(tmp_path):
    sink = IcebergSink(str(tmp_path / "wh"))
    sink.prepare([SCHEMA])
    want = _stream(sink, 36, seed=3, spread=False)
    table = sink.open_table(SCHEMA.table_id)
    before_files = len(list(table.scan().plan_files()))
    assert before_files >= 20, before_files  # the stream's small files
    assert _read(table) == want
    all_before = set()
    for s in table.metadata.snapshots:
        all_before |= _files_of(table, s)
    history = {s.snapshot_id: _read(table, s.snapshot_id) for s in table.metadata.snapshots[-10:]}

    policy = MaintenancePolicy(min_files=4, snapshot_max_age_s=0, retain_last=1)
    report = maintain(table, policy)
    table = sink.open_table(SCHEMA.table_id)

    assert report.files_before == before_files and report.files_after < before_files
    assert report.partitions_compacted == 1 and report.files_compacted >= 20
    assert len(list(table.scan().plan_files())) == report.files_after <= 2
    assert _read(table) == want, "compaction changed the rows"
    assert table.current_snapshot().summary.additional_properties.get(MAINTENANCE_KEY) == "compact"
    # the stream's record is untouched: a replay of batch 36 is still recognised
    assert last_recorded(table, BATCH_KEY) == 36
    kept = table.metadata.snapshots
    assert len(kept) == 1 and report.snapshots_expired > 30 and report.snapshots_kept == 1
    for s in kept:  # every kept snapshot reads as it did, from files that exist
        if s.snapshot_id in history:
            assert _read(table, s.snapshot_id) == history[s.snapshot_id]
        for p in _files_of(table, s):
            assert os.path.exists(_local(p)), p
    live = set()
    for s in kept:
        live |= _files_of(table, s)
    gone = all_before - live
    assert gone and report.files_deleted["data files"] > 0 and report.files_deleted["manifests"] > 0
    assert not [p for p in gone if os.path.exists(_local(p))], "files only expired snapshots read are left"

    # the stream goes on after maintenance, and a second run compacts no more than is due
    want = _stream(sink, 5, seed=4, first=37, want=want, spread=False)
    table = sink.open_table(SCHEMA.table_id)
    assert _read(table) == want
    files = len(list(table.scan().plan_files()))
    assert files == 1 + 5, files  # the compacted file and one per micro-batch since
    again = maintain(table, MaintenancePolicy(min_files=7, snapshot_max_age_s=0, retain_last=1))
    assert again.partitions_compacted == 0 and again.files_after == again.files_before == files
    assert _read(sink.open_table(SCHEMA.table_id)) == want


def test_old_metadata_files_are_deleted_after_the_grace(tmp_path, monkeypatch):
    import airflow_provider_mysqlcdc.spark.sinks.iceberg.maintenance as m

    sink = IcebergSink(str(tmp_path / "wh"))
    sink.prepare([SCHEMA])
    _stream(sink, 24, seed=1)
    table = sink.open_table(SCHEMA.table_id)
    folder = os.path.dirname(_local(table.metadata_location))
    count = len([f for f in os.listdir(folder) if f.endswith(".metadata.json")])
    assert count >= 24
    monkeypatch.setattr(m, "PREVIOUS_VERSIONS_MAX", 5)
    report = maintain(table, MaintenancePolicy(snapshot_max_age_s=3600), now=None)
    assert report.files_deleted["metadata files"] == 0, "files younger than the grace were deleted"
    table = sink.open_table(SCHEMA.table_id)
    report = maintain(table, MaintenancePolicy(snapshot_max_age_s=3600), now=__import__("time").time() + 3600)
    left = [f for f in os.listdir(folder) if f.endswith(".metadata.json")]
    table = sink.open_table(SCHEMA.table_id)
    assert report.files_deleted["metadata files"] >= count - 10
    assert os.path.basename(_local(table.metadata_location)) in left
    assert len(left) <= 7
    assert _read(table) is not None


def test_a_compaction_racing_stream_commits_loses_nothing(tmp_path):
    sink = IcebergSink(str(tmp_path / "wh"))
    sink.prepare([SCHEMA])
    want = _stream(sink, 20, seed=7)
    errors: list[BaseException] = []
    reports: list[TableMaintenance] = []

    def compactor() -> None:
        try:
            for _ in range(3):
                report = TableMaintenance("shop.t")
                compact(sink.open_table(SCHEMA.table_id), MaintenancePolicy(min_files=2), report)
                reports.append(report)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            errors.append(e)

    t = threading.Thread(target=compactor)
    t.start()
    want = _stream(sink, 20, seed=8, first=21, want=want)  # commits while the compactor runs
    t.join()
    assert not errors, errors
    table = sink.open_table(SCHEMA.table_id)
    assert _read(table) == want, "a compaction racing the stream lost or revived rows"
    assert last_recorded(table, BATCH_KEY) == 40
    assert any(r.partitions_compacted for r in reports), [r.line() for r in reports]


def test_the_policy_refuses_values_out_of_range():
    with pytest.raises(ConfigError, match="min_files 1"):
        MaintenancePolicy(min_files=1)
    with pytest.raises(ConfigError, match="retain_last 0"):
        MaintenancePolicy(retain_last=0)


def _pipeline(tmp_path, kind: str) -> tuple[StateStore, str]:
    state = StateStore(str(tmp_path / "state"))
    root = str(tmp_path / "wh")
    config = PipelineConfig("p", SourceConfig(), ("shop.t",), state.location, sink=SinkConfig(kind, {"root": root}))
    write_config(state, config)
    state.write_plan(Plan({SCHEMA.table_id: SCHEMA}, (Batch("batch-0000", (Chunk(SCHEMA.table_id, 0, None, None),)),)))
    return state, root


def test_maintain_compacts_and_expires_the_pipelines_tables(tmp_path, capsys):
    state, root = _pipeline(tmp_path, "iceberg")
    sink = IcebergSink(root)
    sink.prepare([SCHEMA])
    want = _stream(sink, 12, seed=11, spread=False)
    files = len(list(sink.open_table(SCHEMA.table_id).scan().plan_files()))
    args = ["maintain", state.location, "--min-files", "2", "--snapshot-max-age-s", "0", "--retain-last", "2"]
    assert main(args) == 0, capsys.readouterr().err
    out = capsys.readouterr().out.splitlines()[-1]  # the command's line, after any log lines
    assert out.startswith(f"iceberg shop.t: data files {files} -> 1 ({files} compacted in 1 partition(s)")
    assert "snapshot(s) expired, 2 kept" in out
    table = sink.open_table(SCHEMA.table_id)
    assert _read(table) == want and len(table.metadata.snapshots) == 2
    assert state.exists("maintenance/last.json")


def test_maintain_refuses_a_delta_pipeline_and_a_missing_state(tmp_path, capsys):
    state, _ = _pipeline(tmp_path, "delta")
    assert main(["maintain", state.location]) == 1
    err = capsys.readouterr().err
    assert "writes a delta sink" in err and "Fix:" in err
    assert main(["maintain", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err
    assert "Fix: run the plan task first" in err
    assert main(["maintain", state.location, "--min-files", "1"]) == 1
    assert "min_files 1" in capsys.readouterr().err


def test_the_stream_keeps_its_history_bounded(tmp_path):
    """The sink expires its oldest snapshots itself (snapshots_kept): a commit's cost grows with the
    snapshots listed, so a stream cannot wait for the hourly maintenance."""
    sink = IcebergSink(str(tmp_path / "wh"), snapshots_kept=6)
    sink.prepare([SCHEMA])
    want: dict[int, str] = {}
    counts = []
    for b in range(1, 31):
        want = _stream(sink, 1, seed=b, first=b, want=want)
        sink._bound_history(SCHEMA.table_id)  # what write_changes / publish_steps do after each commit
        counts.append(len(sink.open_table(SCHEMA.table_id).metadata.snapshots))
    assert max(counts) <= 6 + 3 and counts[-1] >= 6, counts
    table = sink.open_table(SCHEMA.table_id)
    assert _read(table) == want
    for s in table.metadata.snapshots:
        for p in _files_of(table, s):
            assert os.path.exists(_local(p)), p
    assert IcebergSink(str(tmp_path / "wh2"), snapshots_kept=0).snapshots_kept == 0
    with pytest.raises(ConfigError, match="snapshots_kept: found -1"):
        IcebergSink(str(tmp_path / "wh3"), snapshots_kept=-1)


def test_an_insert_only_stream_merges_its_small_files_itself(tmp_path, monkeypatch):
    """Commits that only insert add a file each; the commit that finds SMALL_FILES_LIMIT small files
    rewrites them with its own rows (same commit), so the count stays bounded and the rows exact."""
    import airflow_provider_mysqlcdc.spark.sinks.iceberg.apply as apply_mod

    monkeypatch.setattr(apply_mod, "SMALL_FILES_LIMIT", 8)
    sink = IcebergSink(str(tmp_path / "wh"))
    sink.prepare([SCHEMA])
    want: dict[int, str] = {}
    counts = []
    for b in range(1, 26):
        want = _stream(sink, 1, seed=b, first=b, want=want, spread=False)
        counts.append(len(list(sink.open_table(SCHEMA.table_id).scan().plan_files())))
    assert max(counts) <= 8 and min(counts[8:]) == 1, counts
    assert _read(sink.open_table(SCHEMA.table_id)) == want
