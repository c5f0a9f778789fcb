"""Iceberg table maintenance: compaction of the stream's small files, snapshot expiry, and the
cleanup of files no kept snapshot reads.

Why it is needed: the stream commits once per micro-batch, and each commit adds at least one
data file, a manifest, a manifest list and a metadata file. After a day of one commit a second
a table has ~86,000 small files and every snapshot listed in a metadata file that each commit
rewrites: reads plan through thousands of manifests, and commits slow down. Nothing of this
changes what a reader sees:

* ``compact``: per partition, the data files below ``3/4`` of ``target_file_bytes`` are read and
  written again as few files, in ONE replace commit (the same rows, so it records no
  micro-batch). It runs beside a live stream: when a stream commit lands first, the compaction
  is committed on the new state if every file it replaces is still there, else planned again
  on the new state (a stream that keeps rewriting the same files wins; compaction retries
  ``attempts`` times and reports what it did not do). The stream's own commit, when the
  compaction lands first, is applied again on the new state (``apply.py``).
* ``expire``: snapshots older than ``snapshot_max_age_s`` are removed from the metadata, always
  keeping the ``retain_last`` newest and the current one; then the data files, manifests and
  manifest lists that only those snapshots read are deleted, and metadata files older than
  the metadata log (and older than ``METADATA_GRACE_S``, so a commit in flight keeps its own).
  The stream's exactly-once record lives in the table's properties, not in old snapshots, so
  expiry never makes a replay apply twice; the consistency check reads the snapshot of the
  last committed micro-batch, which is among the newest.

Orphan files of commits that failed (a killed job's written but never committed files) are not
looked for: finding them means listing the whole table location.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ....cdc.errors import ConfigError

log = logging.getLogger(__name__)

MAINTENANCE_KEY = "mysqlcdc.maintenance"
# Kept metadata files (Iceberg's own property; pyiceberg's SQL catalog does not delete old ones).
PREVIOUS_VERSIONS_MAX = 20
# A metadata file younger than this is never deleted: a commit in flight may have just written it.
METADATA_GRACE_S = 900.0


@dataclass(frozen=True)
class MaintenancePolicy:
    """What ``maintain`` does; the defaults suit a stream committing every second or so."""

    target_file_bytes: int = 128 * 1024 * 1024
    min_files: int = 16  # compact a partition once it has this many small files
    snapshot_max_age_s: float = 3600.0
    retain_last: int = 10
    attempts: int = 5

    def __post_init__(self) -> None:
        problems = []
        if self.target_file_bytes < 1024 * 1024:
            problems.append(f"target_file_bytes {self.target_file_bytes}: need at least 1048576 (1 MiB)")
        if self.min_files < 2:
            problems.append(f"min_files {self.min_files}: need at least 2 (one file is already compact)")
        if self.snapshot_max_age_s < 0:
            problems.append(f"snapshot_max_age_s {self.snapshot_max_age_s}: need 0 or more seconds")
        if self.retain_last < 1:
            problems.append(f"retain_last {self.retain_last}: need at least 1 (the current snapshot)")
        if problems:
            raise ConfigError(f"Iceberg maintenance: {'; '.join(problems)}. Fix: give values in those ranges.")


@dataclass
class TableMaintenance:
    """What one run did to one table (returned to the task as XCom, logged as one line)."""

    table: str
    files_before: int = 0
    files_after: int = 0
    files_compacted: int = 0
    partitions_compacted: int = 0
    partitions_left: int = 0  # due, but a concurrent commit kept replacing their files
    snapshots_expired: int = 0
    snapshots_kept: int = 0
    files_deleted: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def line(self) -> str:
        deleted = ", ".join(f"{n} {kind}" for kind, n in self.files_deleted.items() if n) or "no files"
        left = f", {self.partitions_left} partition(s) left for the next run" if self.partitions_left else ""
        return (
            f"iceberg {self.table}: data files {self.files_before} -> {self.files_after} "
            f"({self.files_compacted} compacted in {self.partitions_compacted} partition(s){left}); "
            f"{self.snapshots_expired} snapshot(s) expired, {self.snapshots_kept} kept; deleted {deleted} "
            f"({self.seconds:.1f} s)"
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def maintain(table: Any, policy: MaintenancePolicy, now: float | None = None) -> TableMaintenance:
    """Compact, then expire, one table (a pyiceberg ``Table``)."""
    started = time.monotonic()
    report = TableMaintenance(".".join(table.name()[-2:]))
    table = _with_metadata_limits(table)
    compact(table, policy, report)
    table.refresh()
    expire(table, policy, report, now=time.time() if now is None else now)
    report.seconds = time.monotonic() - started
    log.info("%s", report.line())
    return report


def expire_beyond(table: Any, keep: int) -> TableMaintenance | None:
    """Expire all but the newest ``keep`` snapshots once the table lists ``keep * 3 / 2`` or more
    (the stream's own bound on its history; see ``IcebergSink._bound_history``)."""
    if len(table.metadata.snapshots) < keep + max(1, keep // 2):
        return None
    started = time.monotonic()
    report = TableMaintenance(".".join(table.name()[-2:]))
    expire(table, MaintenancePolicy(snapshot_max_age_s=0, retain_last=keep), report, now=time.time())
    report.seconds = time.monotonic() - started
    log.info("%s", report.line())
    return report


def _with_metadata_limits(table: Any) -> Any:
    """The table with a bounded metadata log (set once, on tables made before this existed)."""
    from pyiceberg.table import TableProperties

    if table.properties.get(TableProperties.METADATA_PREVIOUS_VERSIONS_MAX) is None:
        with table.transaction() as tx:
            tx.set_properties(**{TableProperties.METADATA_PREVIOUS_VERSIONS_MAX: str(PREVIOUS_VERSIONS_MAX)})
        table.refresh()
    return table


# --- compaction ------------------------------------------------------------------------------


def _groups(table: Any, policy: MaintenancePolicy) -> tuple[int, list[list[Any]]]:
    """(data files in the current snapshot, the groups of small files due for compaction: one per
    partition of the current spec)."""
    spec_id = table.metadata.default_spec_id
    small_below = policy.target_file_bytes * 3 // 4
    groups: dict[Any, list[Any]] = {}
    total = 0
    for task in table.scan().plan_files():
        total += 1
        f = task.file
        if task.delete_files or f.spec_id != spec_id or f.file_size_in_bytes >= small_below:
            continue
        groups.setdefault(_partition_key(f.partition), []).append(task)
    return total, [g for g in groups.values() if len(g) >= policy.min_files]


def _partition_key(record: Any) -> tuple[Any, ...]:
    try:
        return tuple(record)
    except TypeError:
        return (repr(record),)


def compact(table: Any, policy: MaintenancePolicy, report: TableMaintenance) -> None:
    """Rewrite each due partition's small files as few large ones, one commit per partition."""
    total, groups = _groups(table, policy)
    report.files_before = report.files_after = total
    for group in groups:
        done = _compact_group(table, group, policy)
        if done is None:
            report.partitions_left += 1
            continue
        removed, added = done
        report.partitions_compacted += 1
        report.files_compacted += removed
        report.files_after -= removed - added


def _compact_group(table: Any, group: list[Any], policy: MaintenancePolicy) -> tuple[int, int] | None:
    """(files removed, files added), or None when concurrent commits kept replacing the group's files."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan
    from pyiceberg.table import TableProperties

    from .apply import overwrite, transaction
    from .partitioning import data_files

    for attempt in range(1, policy.attempts + 1):
        table.refresh()
        live = {t.file.file_path: t.file for t in table.scan().plan_files()}
        paths = [t.file.file_path for t in group]
        if any(p not in live for p in paths):  # a stream commit replaced some: plan again on the new state
            _, regrouped = _groups(table, policy)
            wanted = {_partition_key(group[0].file.partition)}
            group = next((g for g in regrouped if _partition_key(g[0].file.partition) in wanted), [])
            if not group:
                return 0, 0
            paths = [t.file.file_path for t in group]
        meta = table.metadata
        rows = ArrowScan(meta, table.io, meta.schema(), AlwaysTrue()).to_table(group)
        write_uuid, counter = uuid.uuid4(), itertools.count(0)
        sized = meta.model_copy(
            update={
                "properties": {
                    **meta.properties,
                    TableProperties.WRITE_TARGET_FILE_SIZE_BYTES: str(policy.target_file_bytes),
                }
            }
        )
        added = data_files(sized, rows, table.io, write_uuid, counter)
        # commit on the newest state as long as every replaced file is still there
        for _ in range(policy.attempts):
            live = {t.file.file_path: t.file for t in table.scan().plan_files()}
            if any(p not in live for p in paths):
                break
            try:
                with transaction(table) as tx:
                    summary = {MAINTENANCE_KEY: "compact"}
                    with overwrite(tx, summary, write_uuid) as ow:
                        for p in paths:
                            ow.delete_data_file(live[p])
                        for f in added:
                            ow.append_data_file(f)
                return len(paths), len(added)
            except (CommitFailedException, ValidationException) as e:
                log.info("iceberg %s: compaction commit conflict (%s), trying again", table.name(), e)
                table.refresh()
        _delete(table.io, [f.file_path for f in added])  # never committed: nobody reads them
        log.info(
            "iceberg %s: compaction planned again (attempt %d): a commit replaced its files", table.name(), attempt
        )
        time.sleep(min(2.0, 0.1 * 2**attempt))
    return None


# --- expiry ----------------------------------------------------------------------------------


def expire(table: Any, policy: MaintenancePolicy, report: TableMaintenance, now: float) -> None:
    """Expire old snapshots and delete what only they read (see the module docstring)."""
    meta = table.metadata
    snapshots = sorted(meta.snapshots, key=lambda s: s.timestamp_ms)
    keep = {s.snapshot_id for s in snapshots[-policy.retain_last :]}
    keep |= {ref.snapshot_id for ref in meta.refs.values()}
    if meta.current_snapshot_id is not None:
        keep.add(meta.current_snapshot_id)
    cutoff_ms = (now - policy.snapshot_max_age_s) * 1000
    keep |= {s.snapshot_id for s in snapshots if s.timestamp_ms >= cutoff_ms}
    gone = [s for s in snapshots if s.snapshot_id not in keep]
    kept = [s for s in snapshots if s.snapshot_id in keep]
    report.snapshots_kept = len(kept)
    deleted: dict[str, int] = {"data files": 0, "manifests": 0, "manifest lists": 0, "metadata files": 0}
    if gone:
        live_data, live_manifests = _reachable(table, kept)
        dead_manifests: set[str] = set()
        dead_data: set[str] = set()
        for s in gone:
            for m in s.manifests(table.io):
                if m.manifest_path in live_manifests:
                    continue
                dead_manifests.add(m.manifest_path)
                dead_data |= {p for p in _entries(table, m) if p not in live_data}
        lists = {s.manifest_list for s in gone if s.manifest_list} - {s.manifest_list for s in kept}
        _commit_expiry(table, [s.snapshot_id for s in gone], policy.attempts)
        report.snapshots_expired = len(gone)
        # only after the commit: a failed expiry deletes nothing
        deleted["data files"] = _delete(table.io, dead_data)
        deleted["manifests"] = _delete(table.io, dead_manifests)
        deleted["manifest lists"] = _delete(table.io, lists)
        table.refresh()
    deleted["metadata files"] = _old_metadata(table, now)
    report.files_deleted = deleted


def _commit_expiry(table: Any, snapshot_ids: list[int], attempts: int) -> None:
    """Remove the snapshots from the table's metadata (a stream commit in between: try again)."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    for attempt in range(1, attempts + 1):
        try:
            table.maintenance.expire_snapshots().by_ids(snapshot_ids).commit()
            return
        except (CommitFailedException, ValidationException):
            if attempt == attempts:
                raise
            table.refresh()
            time.sleep(0.05 * attempt)


_ENTRY_CACHE: dict[str, frozenset[str]] = {}


def _entries(table: Any, manifest: Any) -> frozenset[str]:
    """The data files a manifest holds live (ADDED/EXISTING); a manifest never changes, so once read
    it is remembered."""
    got = _ENTRY_CACHE.get(manifest.manifest_path)
    if got is None:
        entries = manifest.fetch_manifest_entry(table.io, discard_deleted=True)
        got = frozenset(e.data_file.file_path for e in entries)
        if len(_ENTRY_CACHE) > 50_000:
            _ENTRY_CACHE.clear()
        _ENTRY_CACHE[manifest.manifest_path] = got
    return got


def _reachable(table: Any, snapshots: Sequence[Any]) -> tuple[set[str], set[str]]:
    """(data files, manifests) a reader of any of ``snapshots`` may open."""
    data: set[str] = set()
    manifests: set[str] = set()
    for s in snapshots:
        for m in s.manifests(table.io):
            if m.manifest_path not in manifests:
                manifests.add(m.manifest_path)
                data |= _entries(table, m)
    return data, manifests


def _old_metadata(table: Any, now: float) -> int:
    """Delete metadata files that are neither current nor in the metadata log, once older than the grace."""
    import pyarrow.fs as pafs

    from ..files.arrow import FsSpec

    current = table.metadata_location
    listed = {e.metadata_file for e in table.metadata.metadata_log} | {current}
    base = current.rsplit("/", 1)[0]
    options = _storage_options(table)
    try:
        fs, prefix = FsSpec("uri", base, options).open()
        infos = fs.get_file_info(pafs.FileSelector(prefix.rstrip("/"), recursive=False))
    except (OSError, ValueError) as e:
        log.info("iceberg %s: metadata files not listed (%s)", table.name(), e)
        return 0
    names = {p.rsplit("/", 1)[-1] for p in listed}
    old = [
        i.path
        for i in infos
        if i.type == pafs.FileType.File
        and i.path.endswith(".metadata.json")
        and i.path.rsplit("/", 1)[-1] not in names
        and i.mtime is not None
        and i.mtime.timestamp() < now - METADATA_GRACE_S
    ]
    for path in old:
        fs.delete_file(path)
    return len(old)


def _storage_options(table: Any) -> dict[str, str] | None:
    """delta-rs style S3 options from the table's FileIO properties (for listing its metadata folder)."""
    props = getattr(table.io, "properties", {}) or {}
    names = {
        "s3.access-key-id": "AWS_ACCESS_KEY_ID",
        "s3.secret-access-key": "AWS_SECRET_ACCESS_KEY",
        "s3.session-token": "AWS_SESSION_TOKEN",
        "s3.region": "AWS_REGION",
        "s3.endpoint": "AWS_ENDPOINT_URL",
    }
    got = {env: str(props[key]) for key, env in names.items() if props.get(key)}
    return got or None


def _delete(io: Any, paths: Iterable[str]) -> int:
    n = 0
    for p in paths:
        try:
            io.delete(p)
            n += 1
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("could not delete %s: %s", p, e)
    return n
