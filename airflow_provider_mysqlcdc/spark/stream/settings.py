"""What the binlog source's driver and executors share: its options, parsed once on the driver.

``StreamSettings`` is pickled to the executors with the reader, so it holds the password; it is
never logged. The server id slots are fixed here: slot 0 the executor's reader, slot 1 the
driver's scans; catch-up ranges take ids from the top of ``server_id_range`` down.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ...cdc.chunks import FinishedBatch
from ...cdc.errors import REPORT_BUG, ConfigError
from ...cdc.model import TableId, TableSchema
from ...cdc.pipeline import PipelineConfig
from ...cdc.plan import FIRST_BATCH_SLOT
from ...cdc.source.config import PASSWORD_ENV, SourceConfig
from ...cdc.state import StateStore
from .reading.change_rows import SourceLayout

FORMAT_NAME = "mysqlcdc-binlog"
STREAM_READER_SLOT = 0  # the executor's binlog reader (range 0 of a micro-batch)
OFFSET_SCAN_SLOT = 1  # the driver's latestOffset / startup scans
DEFAULT_RECONNECT_TIMEOUT_S = 120.0
# gh-ost and pt-online-schema-change helper tables (see StreamSettings.new_table)
_OSC_HELPER = re.compile(r"^_.+_(gho|ghc|del|new|old)$")


def is_osc_helper(table: str) -> bool:
    """A helper table of gh-ost or pt-online-schema-change (``_t_gho``, ``_t_new``, ...)."""
    return bool(_OSC_HELPER.match(table))


@dataclass(frozen=True)
class StreamSettings:
    """Everything the driver and the executor need, picklable (holds the password: never log it)."""

    source: SourceConfig
    schemas: tuple[TableSchema, ...]
    finished: tuple[FinishedBatch, ...]
    max_events_per_batch: int
    heartbeat_s: float
    reconnect_timeout_s: float
    startup_mode: str
    startup_offset: Mapping[str, Any] | None
    startup_timestamp: float | None
    state_location: str
    catchup_parallelism: int = 1
    catchup_min_bytes: int = 16 << 20
    catchup_batch_bytes: int = 256 << 20
    direct_write: str | None = None  # a sink's DirectSpec JSON (sinks/direct.py): tasks yield its records
    checkpoint_location: str | None = None  # the query's checkpoint (keeps a moving initial offset)
    include: tuple[str, ...] = ()  # the pipeline's table list: a table created under it is reported
    exclude: tuple[str, ...] = ()
    allow_gtid_gaps: bool = False  # stream_options.allow_gtid_gaps (cdc/binlog/gtid_watch.py)
    first_plan_dir: str | None = None  # where the launcher leaves the first catch-up plan (first_plan.py)

    def new_table(self, table_id: TableId) -> bool:
        """Whether the pipeline's table list captures ``table_id`` (a table created while streaming).
        The helper tables of online schema change tools (gh-ost's ``_t_gho``/``_t_ghc``/``_t_del``,
        pt-online-schema-change's ``_t_new``/``_t_old``) never are: they come and go around a swap
        whose result the stream follows on the real table."""
        from ...cdc.source.table_patterns import matches

        if is_osc_helper(table_id.table):
            return False
        return bool(self.include) and matches(table_id, self.include, self.exclude)

    @property
    def tables(self) -> list[TableId]:
        return [s.table_id for s in self.schemas]

    def catchup_server_id(self, part: int) -> int:
        """Range 0 of a micro-batch reads with the stream's id; range i > 0 with the i-th id from
        the top of the range (snapshot batches take theirs from slot 2 upwards)."""
        ids = self.source.server_id_range
        if part == 0:
            return ids.pick(STREAM_READER_SLOT)
        return ids.pick(len(ids) - part)

    def check(self) -> None:
        ids = self.source.server_id_range
        extra = self.catchup_parallelism - 1
        if extra and len(ids) - extra <= FIRST_BATCH_SLOT:
            raise ConfigError(
                f"stream_options.catchup_parallelism {self.catchup_parallelism} needs {extra} server ids beyond "
                f"the stream's two and one for snapshot batches, but server_id_range {ids} has {len(ids)}. "
                "Fix: widen server_id_range or lower catchup_parallelism."
            )


def source_layout(options: Mapping[str, str]) -> SourceLayout:
    """The source's schema from its options (the driver asks before any reader exists)."""
    opts = {str(k).lower(): v for k, v in options.items()}
    if "config" not in opts or "schemas" not in opts:
        raise ConfigError(
            f"{FORMAT_NAME}: options 'config' and 'schemas' are required. Fix: pass both, as the stream job does."
        )
    config = json.loads(opts["config"])
    tz = (config.get("source") or {}).get("server_time_zone") or "UTC"
    return SourceLayout([TableSchema.from_dict(d) for d in json.loads(opts["schemas"])], tz)


def settings_from_options(options: Mapping[str, str]) -> StreamSettings:
    """Parse the (lower-cased) options; the finished-batch list is read once, here, on the driver."""
    opts = {str(k).lower(): v for k, v in options.items()}
    if "config" not in opts or "schemas" not in opts:
        raise ConfigError(
            f"{FORMAT_NAME}: options 'config' and 'schemas' are required. Fix: pass both, as the stream job does."
        )
    password = opts.get("password")
    if password is None:
        password = os.environ.get(PASSWORD_ENV)
    if password is None:
        raise ConfigError(f"{FORMAT_NAME}: no source password. Fix: pass the 'password' option or set ${PASSWORD_ENV}.")
    config = PipelineConfig.from_json(opts["config"], password=password)
    schemas = tuple(TableSchema.from_dict(d) for d in json.loads(opts["schemas"]))
    if not schemas:
        raise ConfigError(f"{FORMAT_NAME}: no captured table schemas given. {REPORT_BUG}")
    finished: tuple[FinishedBatch, ...] = ()
    if config.startup_mode == "initial":
        finished = tuple(StateStore(config.state_location).read_finished() or ())
    return StreamSettings(
        source=config.source,
        schemas=schemas,
        finished=finished,
        max_events_per_batch=int(config.stream.max_events_per_batch),
        heartbeat_s=float(config.stream.heartbeat_s),
        reconnect_timeout_s=float(opts.get("reconnect_timeout_s") or DEFAULT_RECONNECT_TIMEOUT_S),
        startup_mode=config.startup_mode,
        startup_offset=config.startup_offset,
        startup_timestamp=config.startup_timestamp,
        state_location=config.state_location,
        catchup_parallelism=int(config.stream.catchup_parallelism),
        catchup_min_bytes=int(config.stream.catchup_min_bytes),
        catchup_batch_bytes=int(config.stream.catchup_batch_bytes),
        direct_write=opts.get("direct_write") or None,
        checkpoint_location=opts.get("checkpoint_location") or None,
        include=tuple(config.include),
        exclude=tuple(config.exclude),
        allow_gtid_gaps=bool(config.stream.allow_gtid_gaps),
        first_plan_dir=opts.get("first_plan_dir") or None,
    )
