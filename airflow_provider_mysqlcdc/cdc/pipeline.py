"""The pipeline's configuration: one JSON document shared by the Spark jobs and the operators.

It holds everything but the password, which reaches jobs through ``$MYSQLCDC_PASSWORD`` or a
file only the user can read (never a command-line argument, a log line or the Spark UI).
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import ConfigError
from .schema.behavior import DEFAULT_BEHAVIOR, check_behavior
from .sinks import DEFAULT_SINK, SINK_TYPES
from .source.config import PASSWORD_ENV, SourceConfig, SplitOptions
from .transform.table_views import Rules

STARTUP_MODES = ("initial", "snapshot", "latest-offset", "earliest-offset", "specific-offset", "timestamp")


@dataclass(frozen=True)
class SinkConfig:
    """``type`` is one of SINK_TYPES; ``options`` are that sink's constructor arguments."""

    type: str = DEFAULT_SINK
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.type not in SINK_TYPES:
            raise ConfigError(
                f"sink.type: found {self.type!r}, need one of {', '.join(SINK_TYPES)}. "
                "Fix: pick one of those (the form's Sink field lists them)."
            )


@dataclass(frozen=True)
class StreamOptions:
    """How the stream paces itself.

    Near the binlog's head, ``max_events_per_batch`` bounds a micro-batch in row changes
    (admission control: the driver counts them). Further behind than ``catchup_min_bytes``
    of binlog, counting would mean reading the backlog twice, so micro-batches are planned
    by bytes instead (``catchup_batch_bytes``, ending at a transaction start the server
    names) and split into ``catchup_parallelism`` ranges decoded by parallel Spark tasks,
    each with its own server id (see ``cdc/binlog/catchup.py``). A catch-up micro-batch costs
    0.3-0.5 s beyond its reading (the server's walk, Spark's offset log and commit, task
    start, the sink's commit), so ``catchup_batch_bytes`` is large (docs/stream.md, "Stream
    behaviour", has the measurements). ``heartbeat_s`` keeps offsets
    moving while captured tables are idle; ``trigger_interval_s`` paces micro-batches.
    """

    max_events_per_batch: int = 20_000
    heartbeat_s: float = 5.0
    trigger_interval_s: float = 1.0
    catchup_parallelism: int = 2
    catchup_min_bytes: int = 16 << 20
    catchup_batch_bytes: int = 256 << 20
    # A batch read again while the stream runs is handed over in pieces of about this many rows
    # (the plan's estimate), and one micro-batch takes pieces over up to ``takeover_rows_per_batch``
    # rows (at least one): bigger pieces finish a re-snapshot in fewer micro-batches, each of them
    # longer (bench/resnapshot_latency.py: 25,000 rows cost a micro-batch ~0.5 s).
    handoff_piece_rows: int = 25_000
    takeover_rows_per_batch: int = 25_000
    # A GTID number skipped in the binlog stops the stream (cdc/binlog/gtid_watch.py); true lets a user
    # whose binlog has harmless gaps (gtid_seq_no set on purpose, filtered transactions) go on.
    allow_gtid_gaps: bool = False
    # The running stream holds a lease in the state location and renews it every third of this
    # (cdc/store/lease.py): a second launcher on any host refuses while it is valid, and takes a dead
    # stream's lease over once it expired.
    lease_ttl_s: float = 60.0

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any] | None) -> "StreamOptions":
        """From user input: unknown keys fail naming the accepted ones (not a TypeError)."""
        options = dict(options or {})
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ConfigError(
                f"stream_options: unknown key{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}. Fix: use only {', '.join(known)}."
            )
        return cls(**options)

    def __post_init__(self) -> None:
        checks = [
            ("max_events_per_batch", self.max_events_per_batch, 1),
            ("catchup_parallelism", self.catchup_parallelism, 1),
            ("catchup_min_bytes", self.catchup_min_bytes, 1 << 16),
            ("catchup_batch_bytes", self.catchup_batch_bytes, 1 << 16),
            ("handoff_piece_rows", self.handoff_piece_rows, 1),
            ("takeover_rows_per_batch", self.takeover_rows_per_batch, 1),
        ]
        for name, value, least in checks:
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ConfigError(
                    f"stream_options.{name}: found {value!r}, need an integer >= {least}. "
                    f"Fix: give {name} a whole number of at least {least}, or leave it out."
                )
        if not isinstance(self.allow_gtid_gaps, bool):
            raise ConfigError(
                f"stream_options.allow_gtid_gaps: found {self.allow_gtid_gaps!r}, need true or false. "
                "Fix: give a JSON boolean, or leave it out (false: a gap stops the stream)."
            )
        if (
            isinstance(self.lease_ttl_s, bool)
            or not isinstance(self.lease_ttl_s, (int, float))
            or not 3 <= self.lease_ttl_s <= 3600
        ):
            raise ConfigError(
                f"stream_options.lease_ttl_s: found {self.lease_ttl_s!r}, need seconds from 3 to 3600. "
                "Fix: leave it out (60) or give a number in that range, well above the hosts' clock "
                "skew."
            )
        if self.catchup_parallelism > 64:
            raise ConfigError(
                f"stream_options.catchup_parallelism: found {self.catchup_parallelism}, "
                "need at most 64 (each range holds a replication connection and a server id). "
                "Fix: use 1 to 64 (2 suits most clusters)."
            )


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    source: SourceConfig
    include: tuple[str, ...]
    state_location: str
    sink: SinkConfig = field(default_factory=SinkConfig)
    exclude: tuple[str, ...] = ()
    split: SplitOptions = field(default_factory=SplitOptions)
    startup_mode: str = "initial"
    startup_offset: Mapping[str, Any] | None = None
    startup_timestamp: float | None = None
    stream: StreamOptions = field(default_factory=StreamOptions)
    schema_change_behavior: str = DEFAULT_BEHAVIOR
    # A pipeline file's route and transform rules (cdc/transform/table_views.py), applied by both paths.
    rules: Rules = field(default_factory=Rules)

    def __post_init__(self) -> None:
        object.__setattr__(self, "schema_change_behavior", check_behavior(self.schema_change_behavior))
        if not self.include:
            raise ConfigError(
                "tables: no include pattern given. Fix: list tables as 'db.table' or regular expressions."
            )
        if self.startup_mode not in STARTUP_MODES:
            raise ConfigError(
                f"startup_mode: found {self.startup_mode!r}, need one of {', '.join(STARTUP_MODES)}. "
                "Fix: pick one of those."
            )
        if self.startup_mode == "specific-offset" and not self.startup_offset:
            raise ConfigError(
                "startup_mode 'specific-offset' needs startup_offset: "
                "{'file': 'mysql-bin.000003', 'position': 4} or {'gtid': '<gtid set>'}. Fix: fill Startup "
                "offset, or choose another startup mode."
            )
        if self.startup_mode == "timestamp" and self.startup_timestamp is None:
            raise ConfigError(
                "startup_mode 'timestamp' needs startup_timestamp. Fix: fill Startup timestamp (a "
                "date-time in UTC, or epoch seconds), or choose another startup mode."
            )
        if not self.state_location:
            raise ConfigError("state_location: empty. Fix: a directory or fsspec URL the jobs can write.")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source.to_dict(),
            "include": list(self.include),
            "exclude": list(self.exclude),
            "state_location": self.state_location,
            "sink": {"type": self.sink.type, "options": dict(self.sink.options)},
            "split": {
                "chunk_size": self.split.chunk_size,
                "distribution_factor_lower": self.split.distribution_factor_lower,
                "distribution_factor_upper": self.split.distribution_factor_upper,
                "chunk_key_columns": dict(self.split.chunk_key_columns),
                "boundary_query_pause_s": self.split.boundary_query_pause_s,
            },
            "startup_mode": self.startup_mode,
            "startup_offset": dict(self.startup_offset) if self.startup_offset else None,
            "startup_timestamp": self.startup_timestamp,
            "stream": self.stream.__dict__.copy(),
            "schema_change_behavior": self.schema_change_behavior,
            **(self.rules.to_dict() if self.rules else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], password: str | None = None) -> "PipelineConfig":
        if "password" in d.get("source", {}):
            raise ConfigError(
                "source.password must not be in the pipeline config. Fix: remove it from there and pass it "
                f"through ${PASSWORD_ENV} or a password file readable only by you."
            )
        sink = d.get("sink") or {}
        return cls(
            name=d["name"],
            source=SourceConfig.from_dict(d["source"], password=password),
            include=tuple(d["include"]),
            exclude=tuple(d.get("exclude") or ()),
            state_location=d["state_location"],
            sink=SinkConfig(sink.get("type", DEFAULT_SINK), sink.get("options") or {}),
            split=SplitOptions(**(d.get("split") or {})),
            startup_mode=d.get("startup_mode", "initial"),
            startup_offset=d.get("startup_offset"),
            startup_timestamp=d.get("startup_timestamp"),
            stream=StreamOptions.from_mapping(d.get("stream")),
            schema_change_behavior=d.get("schema_change_behavior") or DEFAULT_BEHAVIOR,
            rules=Rules.from_values(d.get("route"), d.get("transform")),
        )

    @classmethod
    def from_json(cls, text: str, password: str | None = None) -> "PipelineConfig":
        return cls.from_dict(json.loads(text), password=password)


def load_pipeline_config(location: str, password: str | None = None) -> PipelineConfig:
    """Read a pipeline config JSON from a local path or an fsspec URL (jobs on a cluster read
    it from the state location, where the plan step wrote it)."""
    import fsspec

    try:
        with fsspec.open(location, "r", encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigError(
            f"pipeline config {location} not found. Fix: run the plan step first, "
            "or pass the path the plan step wrote (<state_location>/pipeline.json)."
        ) from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ConfigError(
            f"pipeline config {location} is not valid JSON ({e}). Fix: write it again with the plan "
            "step (trigger the pipeline), or correct the file by hand."
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"pipeline config {location}: found a JSON {type(data).__name__}, need an object. "
            "Fix: write it again with the plan step."
        )
    try:
        return PipelineConfig.from_dict(data, password=password)
    except KeyError as e:
        raise ConfigError(
            f"pipeline config {location} lacks the key {e}. Fix: write it again with the plan step, or add the key."
        ) from None
    except TypeError as e:
        raise ConfigError(
            f"pipeline config {location}: {e}. Fix: write it again with the plan step, or remove "
            "the keys this version does not know."
        ) from None


def read_password(password_file: str | None = None) -> str:
    """The source password: from a file only its owner can read, else ``$MYSQLCDC_PASSWORD``."""
    if password_file:
        st = os.stat(password_file)
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(
                f"password file {password_file} is readable by group or others (mode {oct(st.st_mode & 0o777)}). "
                f"Fix: chmod 600 {password_file}."
            )
        with open(password_file, encoding="utf-8") as f:
            return f.read().rstrip("\n")
    pw = os.environ.get(PASSWORD_ENV)
    if pw is None:
        raise ConfigError(f"no source password. Fix: set ${PASSWORD_ENV} or pass --password-file (mode 600).")
    return pw
