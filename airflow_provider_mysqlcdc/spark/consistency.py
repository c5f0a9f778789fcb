"""Run the consistency check of a pipeline: the source at a binlog position against the sink there.

One check (``run_check``):

1. **Where the sink is.** The stream's last committed micro-batch ``B`` (its checkpoint) and that
   batch's end offset ``S``; each sink table is read as of ``B`` (Delta: the version before the
   first commit of a later micro-batch; PostgreSQL: one REPEATABLE READ transaction, which may
   already hold ``B + 1``, whose end is then used). Every table is thus read at a known offset
   ``S_T`` of the binlog while the stream keeps writing.
2. **The source, at one consistent snapshot ``P``** (MariaDB: ``START TRANSACTION WITH CONSISTENT
   SNAPSHOT`` and its ``binlog_snapshot_*`` position; MySQL: the same under a global read lock
   held for the two statements, as ``mysqldump --single-transaction --source-data`` does): every
   range of a table without a baseline, and ``rescan_ranges`` more ranges of each other table
   (the rolling re-verification).
3. **The binlog window** from the oldest position needed (the baseline's, or ``S_T``) to ``P``,
   summed per range with the sums captured at each ``S_T`` (``cdc/snapshot/consistency.py``).
4. **Compare** ``source(S_T)`` with the sink's sums per range; a range that differs names its
   batch: clearing that batch's snapshot task reads it again while the stream runs.
5. **Keep** the source's sums at ``P`` as the next check's baseline, and the report (what the
   watchdog's health line shows) in ``consistency/last.json`` of the state location.

A table whose DDL falls in the window is not compared this time (its sums before and after the
statement do not add up: a TRUNCATE writes no rows) and is scanned in full by the next check.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..cdc.errors import CdcError, ConfigError
from ..cdc.model import TableId
from ..cdc.offsets import BinlogOffset
from ..cdc.snapshot.consistency import (
    BASELINE_REL,
    REPORT_REL,
    Baseline,
    RangeResult,
    RangeSums,
    WindowSums,
    compare,
    scan_range,
    sums_of_keys,
    table_layouts,
)
from ..cdc.state import StateStore

log = logging.getLogger(__name__)


class ConsistencyError(CdcError):
    """The sink differs from the source: the message names the tables and the batches to read again."""


@dataclass
class TableReport:
    table: str
    state: str  # "consistent", "differs" or "not compared"
    source_rows: int = 0
    sink_rows: int = 0
    at: dict[str, Any] | None = None  # the binlog offset both sides were compared at
    scanned_ranges: int = 0
    ranges: list[RangeResult] = field(default_factory=list)
    reason: str = ""
    baseline_drift: list[str] = field(default_factory=list)

    @property
    def differing(self) -> list[RangeResult]:
        return [r for r in self.ranges if not r.ok]

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "state": self.state,
            "source_rows": self.source_rows,
            "sink_rows": self.sink_rows,
            "at": self.at,
            "scanned_ranges": self.scanned_ranges,
            "differing": [r.to_dict() for r in self.differing],
            "reason": self.reason,
            "baseline_drift": self.baseline_drift,
        }


@dataclass
class CheckReport:
    checked_at: float
    micro_batch: int
    position: dict[str, Any]
    tables: list[TableReport]
    seconds: float = 0.0
    binlog_changes: int = 0
    phases: dict[str, float] = field(default_factory=dict)  # seconds: sink, source, binlog

    @property
    def consistent(self) -> bool:
        return all(t.state != "differs" for t in self.tables)

    def batches_to_reread(self) -> list[str]:
        return sorted({r.batch_id for t in self.tables for r in t.differing})

    def summary(self) -> str:
        counts = {s: sum(1 for t in self.tables if t.state == s) for s in ("consistent", "differs", "not compared")}
        text = (
            f"consistency check at micro-batch {self.micro_batch}: {counts['consistent']} table(s) consistent, "
            f"{counts['differs']} differ, {counts['not compared']} not compared ({self.seconds:.1f} s, "
            f"{self.binlog_changes} binlog changes read)"
        )
        for t in self.tables:
            if t.state == "differs":
                text += f"; {t.table}: source {t.source_rows} rows, sink {t.sink_rows}, batch(es) " + ", ".join(
                    sorted({r.batch_id for r in t.differing})
                )
            elif t.state == "not compared":
                text += f"; {t.table} not compared: {t.reason}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked_at": self.checked_at,
            "micro_batch": self.micro_batch,
            "position": self.position,
            "consistent": self.consistent,
            "batches_to_reread": self.batches_to_reread(),
            "seconds": round(self.seconds, 3),
            "binlog_changes": self.binlog_changes,
            "phases": {k: round(v, 3) for k, v in self.phases.items()},
            "summary": self.summary(),
            "tables": [t.to_dict() for t in self.tables],
        }


def read_report(state: StateStore) -> dict[str, Any] | None:
    """The last check's report (for the watchdog's health line), or None."""
    return state.read_json(REPORT_REL) if state.exists(REPORT_REL) else None


# --- the source's snapshot ---------------------------------------------------------------------------


@contextlib.contextmanager
def source_snapshot(conn: Any):
    """A consistent read view and the binlog offset it belongs to (see the module docstring)."""
    from ..cdc.source.server import server_version

    version = server_version(conn)
    with conn.cursor() as cur:
        if version.is_mariadb:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute(
                "SHOW SESSION STATUS WHERE Variable_name IN ('binlog_snapshot_file', 'binlog_snapshot_position')"
            )
            status = {str(k).lower(): v for k, v in cur.fetchall()}
            if not status.get("binlog_snapshot_file"):
                cur.execute("COMMIT")
                raise ConfigError(
                    "the source server has no binary log, so the consistency check has no position to "
                    "compare at. Fix: enable log_bin (the stream needs it too)."
                )
            position = BinlogOffset(str(status["binlog_snapshot_file"]), int(status["binlog_snapshot_position"]))
        else:
            try:
                cur.execute("FLUSH TABLES WITH READ LOCK")
            except Exception as e:  # noqa: BLE001 - the privilege is the usual reason
                raise ConfigError(
                    f"the consistency check on MySQL takes a global read lock for a moment to read the "
                    f"binlog position of its snapshot, and the server refused it ({e}). Fix: grant "
                    "RELOAD to the source connection's user."
                ) from None
            try:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                cur.execute("SHOW BINARY LOG STATUS" if version.at_least(8, 2) else "SHOW MASTER STATUS")
                row = cur.fetchone()
            finally:
                cur.execute("UNLOCK TABLES")
            position = BinlogOffset(str(row[0]), int(row[1]))
    try:
        yield position
    finally:
        with conn.cursor() as cur:
            cur.execute("COMMIT")


def check_server_id(plan: Any, source: Any, config: Any) -> int:
    """The check's binlog reader id: the highest id below the stream's parallel catch-up ids, the
    batch slot least often taken (batches take the slots from the bottom, cycling)."""
    from ..cdc.plan import FIRST_BATCH_SLOT

    ids = source.server_id_range
    slot = len(ids) - max(0, config.stream.catchup_parallelism - 1) - 1
    return ids.pick(max(slot, min(FIRST_BATCH_SLOT, len(ids) - 1)))


# --- the check -----------------------------------------------------------------------------------------


def run_check(
    config: Any, sink: Any, *, tables: Sequence[str] | None = None, rescan_ranges: int = 1, server_id: int | None = None
) -> CheckReport:
    """One consistency check of the pipeline ``config`` (a ``PipelineConfig``) against ``sink``
    (``sinks.routed.pipeline_sink``): see the module docstring. Writes the report and the new
    baseline to the state location and returns the report; raises nothing for a difference (the
    caller decides: the Airflow task fails on it)."""
    from concurrent.futures import ThreadPoolExecutor

    started = time.monotonic()
    state = StateStore(config.state_location)
    plan, checkpoint, committed, end = _checked_stream(config, state)
    layouts = _wanted_layouts(table_layouts(plan.schemas, plan.batches, config.source), tables)
    phases: dict[str, float] = {}
    mark = time.monotonic()
    reports: dict[TableId, TableReport] = {}
    sink_side = _SinkSide()
    # 1. the sink, table by table, at the committed micro-batch (or the one after it); in a
    # thread, while this one scans the source (both sides are pinned: the sink by micro-batch,
    # the source by its snapshot), so the check takes about the longer of the two
    with ThreadPoolExecutor(1, thread_name_prefix="consistency-sink") as pool:
        sink_job = pool.submit(_read_sink, sink, layouts, checkpoint, committed, end, sink_side, reports, phases)
        # 2. the source at one snapshot: full scans where there is no baseline, else a few ranges
        source_side = _scan_source(config.source, state, layouts, rescan_ranges)
        phases["source"] = time.monotonic() - mark
        sink_job.result()
    live = {t: lay for t, lay in layouts.items() if t in sink_side.sums}
    mark = time.monotonic()
    # 3. the binlog window, with the sums captured where each side is wanted
    window = _binlog_window(config, plan, live, sink_side, source_side, server_id)
    phases["binlog"] = time.monotonic() - mark
    # 4. compare, and 5. the next baseline at P
    new_tables: dict[str, dict[str, Any]] = {}
    for t, lay in live.items():
        reports[t] = _compare_table(t, lay, sink_side, source_side, window, new_tables)
    state.write_json(BASELINE_REL, Baseline(source_side.position, new_tables).to_dict())
    result = CheckReport(
        time.time(),
        committed,
        end.to_dict(),
        [reports[t] for t in layouts if t in reports],
        time.monotonic() - started,
        window.changes,
        phases,
    )
    state.write_json(REPORT_REL, result.to_dict())
    log.info("%s", result.summary())
    return result


def _checked_stream(config: Any, state: StateStore) -> tuple[Any, str, int, Any]:
    """The plan, the checkpoint, its last committed micro-batch and that batch's end offset; a
    ConfigError when nothing was loaded or the stream has not committed yet."""
    from .stream.offsets.checkpoint_offsets import _last_id, batch_end_offset

    plan = state.read_plan()
    if plan is None:
        raise ConfigError(
            f"no plan in {config.state_location}: nothing was loaded yet. Fix: trigger the pipeline DAG "
            "first; the check compares a loaded and streaming pipeline."
        )
    checkpoint = state.checkpoint_url()
    committed = _last_id(checkpoint, "commits")
    end = batch_end_offset(checkpoint, committed) if committed is not None else None
    if committed is None or end is None:
        raise ConfigError(
            f"the stream of {config.state_location} has not committed a micro-batch yet, so the sink "
            "holds no state at a known binlog position. Fix: start the stream (the pipeline's stream "
            "task) and check once it runs."
        )
    return plan, checkpoint, committed, end


def _wanted_layouts(layouts: dict[TableId, Any], tables: Sequence[str] | None) -> dict[TableId, Any]:
    """The plan's layouts, only those of ``tables`` when given (each must be a table of the plan)."""
    if not tables:
        return layouts
    wanted = {TableId.parse(t) for t in tables}
    unknown = sorted(str(t) for t in wanted - set(layouts))
    if unknown:
        raise ConfigError(
            f"consistency check: {', '.join(unknown)} is not a table of this pipeline's plan. Fix: "
            f"name tables among {', '.join(sorted(str(t) for t in layouts))}."
        )
    return {t: lay for t, lay in layouts.items() if t in wanted}


@dataclass
class _SinkSide:
    """What the sink's thread read: per table its sums and the binlog offset they stand at, and
    for a mid-transaction offset its transaction's start (where a dump must begin)."""

    sums: dict[TableId, RangeSums] = field(default_factory=dict)
    at: dict[TableId, BinlogOffset] = field(default_factory=dict)
    dump_from: dict[BinlogOffset, BinlogOffset] = field(default_factory=dict)


def _read_sink(
    sink: Any,
    layouts: dict[TableId, Any],
    checkpoint: str,
    committed: int,
    end: Any,
    side: _SinkSide,
    reports: dict[TableId, TableReport],
    phases: dict[str, float],
) -> None:
    """Step 1, in the sink's thread: each table's keys in the sink, summed per range."""
    from .stream.offsets.checkpoint_offsets import batch_end_offset

    started_sink = time.monotonic()
    for t, lay in layouts.items():
        try:
            keys, applied = sink.consistency_keys(lay.schema, committed)
        except ConfigError as e:
            reports[t] = TableReport(t.text, "not compared", reason=str(e))
            continue
        at = end if applied <= committed else batch_end_offset(checkpoint, applied)
        if at is None:
            reports[t] = TableReport(
                t.text,
                "not compared",
                reason=f"micro-batch {applied}'s offsets are gone from the checkpoint; checked next time",
            )
            continue
        side.sums[t] = sums_of_keys(lay, keys)
        side.at[t] = at.at
        side.dump_from[at.at] = at.dump_from
    phases["sink"] = time.monotonic() - started_sink


@dataclass
class _SourceSide:
    """What step 2 read at the source's snapshot ``position``: the baseline still usable (if any),
    its sums per table, the ranges scanned now, and where the next check's rescan begins."""

    position: BinlogOffset
    baseline: Baseline | None
    base: dict[TableId, RangeSums]
    scans: dict[TableId, dict[int, tuple[int, int]]]
    rescan_next: dict[TableId, int]


def _usable_baseline(conn: Any, baseline: Baseline | None) -> Baseline | None:
    """The last check's baseline, unless its binlog position is gone from the server."""
    from ..cdc.binlog.reader import check_start_available

    if baseline is None:
        return None
    try:
        check_start_available(conn, baseline.position)
    except CdcError as e:
        log.warning(
            "consistency check: the baseline's binlog position %s is no longer on the server "
            "(%s): scanning the tables again",
            baseline.position,
            str(e).splitlines()[0],
        )
        return None
    return baseline


def _scan_source(source: Any, state: StateStore, layouts: dict[TableId, Any], rescan_ranges: int) -> _SourceSide:
    """Step 2: the source at one snapshot; full scans where there is no baseline, else the next
    ``rescan_ranges`` ranges of each table (cycling)."""
    scans: dict[TableId, dict[int, tuple[int, int]]] = {}
    rescan_next: dict[TableId, int] = {}
    baseline = Baseline.from_dict(state.read_json(BASELINE_REL)) if state.exists(BASELINE_REL) else None
    with contextlib.closing(source.connect()) as conn:
        baseline = _usable_baseline(conn, baseline)
        base: dict[TableId, RangeSums] = {}
        for t, lay in layouts.items():
            sums = baseline.sums_of(lay) if baseline is not None else None
            if sums is not None:
                base[t] = sums
        with source_snapshot(conn) as position:
            for t, lay in layouts.items():
                n = len(lay.ranges)
                if t in base:
                    first = int((baseline.tables[t.text].get("next_rescan") or 0)) % n if baseline else 0
                    indexes = [(first + k) % n for k in range(min(max(0, rescan_ranges), n))]
                    rescan_next[t] = (first + len(indexes)) % n
                else:
                    indexes = list(range(n))
                    rescan_next[t] = 0
                scans[t] = {i: scan_range(conn, lay, i) for i in indexes}
    return _SourceSide(position, baseline, base, scans, rescan_next)


def _binlog_window(
    config: Any,
    plan: Any,
    live: dict[TableId, Any],
    sink_side: _SinkSide,
    source_side: _SourceSide,
    server_id: int | None,
) -> WindowSums:
    """Step 3: the binlog between the earliest and the latest position either side stands at,
    with each table's sums captured at its sink offset, the source's snapshot and the baseline."""
    from ..cdc.binlog.fast.fallback import changes_with_fallback

    position, baseline, base, sink_at = source_side.position, source_side.baseline, source_side.base, sink_side.at
    starts = [sink_at[t] for t in live] + ([baseline.position] if base and baseline is not None else [])
    window_start = min(starts + [position])
    # a PostgreSQL table may hold a micro-batch planned after the source's snapshot: read up to its end
    window_stop = max([position] + [sink_at[t] for t in live])
    checkpoints = {
        t: [sink_at[t], position] + ([baseline.position] if t in base and baseline is not None else []) for t in live
    }
    window = WindowSums(window_start, live, checkpoints)
    if live and window_start < window_stop:
        source = config.source
        server_id = server_id if server_id is not None else check_server_id(plan, source, config)
        window.feed(
            changes_with_fallback(
                source,
                server_id,
                window_start,
                window_stop,
                [lay.schema for lay in live.values()],
                sink_side.dump_from.get(window_start),
            )
        )
    window.finish()
    return window


def _compare_table(
    t: TableId,
    lay: Any,
    sink_side: _SinkSide,
    source_side: _SourceSide,
    window: WindowSums,
    new_tables: dict[str, dict[str, Any]],
) -> TableReport:
    """Steps 4 and 5 for one table: the source's sums carried to the sink's offset and compared
    with the sink's; the table's entry of the next baseline (at the snapshot's position) into
    ``new_tables`` unless a schema change leaves it uncompared."""
    position, baseline, base = source_side.position, source_side.baseline, source_side.base
    sink_at = sink_side.at[t]
    n = len(lay.ranges)
    scanned = source_side.scans.get(t, {})
    if t in base:
        assert baseline is not None  # base holds the baseline's sums
        at_p = base[t].plus(window.between(t, baseline.position, position))
        drift = []
        for i, (rows, total) in scanned.items():
            if (at_p.counts[i], at_p.sums[i]) != (rows, total):
                drift.append(lay.ranges[i][0])
            at_p.counts[i], at_p.sums[i] = rows, total
    else:
        at_p = RangeSums([scanned[i][0] for i in range(n)], [scanned[i][1] for i in range(n)])
        drift = []
    next_rescan = source_side.rescan_next.get(t, 0)
    report = TableReport(t.text, "consistent", at=sink_at.to_dict(), scanned_ranges=len(scanned), baseline_drift=drift)
    if t in window.ddl:
        report.state, report.reason = (
            "not compared",
            (f"a schema change in the binlog since the last check ({window.ddl[t]!r}); the next check scans it again"),
        )
        return report
    src = at_p.plus(window.between(t, sink_at, position), -1)
    report.ranges = compare(lay, src, sink_side.sums[t])
    report.source_rows, report.sink_rows = sum(src.counts), sum(sink_side.sums[t].counts)
    if report.differing:
        report.state = "differs"
    if drift:
        log.warning(
            "consistency check: %s: the kept source sums of batch(es) %s disagreed with a fresh scan of "
            "the source (replaced)",
            t,
            ", ".join(drift),
        )
    new_tables[t.text] = {"fingerprint": lay.fingerprint(), "sums": at_p.to_dict(), "next_rescan": next_rescan}
    return report


def failure_message(report: CheckReport, dag_id: str | None = None) -> str:
    """The failing task's message: what differs and the batches to read again."""
    batches = report.batches_to_reread()
    where = f"in the {dag_id} DAG" if dag_id else "in the pipeline DAG"
    return (
        f"{report.summary()}. Fix: clear the snapshot task(s) of batch(es) {', '.join(batches)} {where} (Clear "
        "on the mapped task instances): each batch is read again while the stream runs and replaces its key "
        "range in the sink; then run the check again."
    )
