"""Every setting a pipeline run accepts, in one list: name, form section, help, JSON schema.

The DAG template's trigger form, the operators' arguments and the errors that name a setting
all come from here, so they cannot drift apart (a test checks that the template offers each
one and that the plan/validate operators accept each one). The schemas are JSON Schema as
Airflow's trigger form reads it: ``section`` groups fields, ``values_display`` labels enum
values, ``description_md`` is the help under a field. Optional settings are nullable: the
form treats a non-nullable empty field as missing and will not submit.

No Airflow import here: pipeline files (YAML) can be checked against the same list.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from .pipeline import STARTUP_MODES, StreamOptions
from .schema.behavior import BEHAVIORS, DEFAULT_BEHAVIOR
from .sinks import DEFAULT_SINK, SINK_TYPES, SINKS
from .source.config import ZERO_DATES

SOURCE = "Source"
SINK = "Sink"
SNAPSHOT = "Snapshot"
STREAM = "Stream"
STATE = "Pipeline state"
DANGER = "Danger zone: reset"

# A table entry: no leading or trailing blanks, nothing empty. Whether a regex compiles and
# whether a name exists is checked by validate against the server (it names every bad entry).
TABLE_ENTRY_PATTERN = r"^\S(.*\S)?$"

STARTUP_MODE_LABELS = {
    "initial": "initial: snapshot every table, then stream the binlog (the usual choice)",
    "snapshot": "snapshot: snapshot every table once, start no stream",
    "latest-offset": "latest-offset: no snapshot, stream changes from now on",
    "earliest-offset": "earliest-offset: no snapshot, stream from the oldest binlog the server keeps",
    "specific-offset": "specific-offset: no snapshot, stream from Startup offset",
    "timestamp": "timestamp: no snapshot, stream from the first binlog event at or after Startup timestamp",
}
SCHEMA_CHANGE_LABELS = {
    "lenient": "lenient: keep every change, never break readers (add columns, keep dropped ones; default)",
    "evolve": "evolve: the sink follows every DDL; stop where the sink cannot",
    "try_evolve": "try_evolve: follow every DDL; where the sink cannot, the lenient way",
    "ignore": "ignore: the sink tables never change shape",
    "exception": "exception: stop the stream at the first DDL on a captured table",
}
SINK_LABELS = {name: kind.label for name, kind in SINKS.items()}


@dataclass(frozen=True)
class Setting:
    """One run setting. ``schema`` is its JSON Schema (``type`` and the checks); ``default`` is
    what the template ships (a DAG file may pass its own)."""

    name: str
    section: str
    title: str
    description: str
    default: Any
    schema: Mapping[str, Any] = field(default_factory=dict)

    def json_schema(self) -> dict[str, Any]:
        return {"title": self.title, "section": self.section, **copy.deepcopy(dict(self.schema))}


def _nullable(kind: str) -> list[str]:
    return ["null", kind]


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "mysql_cdc_conn_id",
        SOURCE,
        "MySQL connection",
        "The Airflow connection of the source server (type **MySQL CDC**, or a plain MySQL one), the "
        "operators' `mysql_cdc_conn_id`. Create it under *Admin > Connections*; "
        "`python -m airflow_provider_mysqlcdc check-connection <id>` (or the form's **Test** button, where "
        "`[core] test_connection` is enabled) runs every server check. Formerly `mysql_conn_id`.",
        "mysql_cdc_default",
        {"type": "string", "minLength": 1},
    ),
    Setting(
        "tables",
        SOURCE,
        "Tables",
        "One entry per line: `db.table`, a bare `table` (takes the connection's Default database), or a "
        "regular expression over `db.table` such as `shop\\.order_.*`. **validate** names every entry that "
        "matches no table on the server.",
        ["shop.orders"],
        {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": TABLE_ENTRY_PATTERN}},
    ),
    Setting(
        "exclude",
        SOURCE,
        "Exclude tables",
        "Tables to leave out, same forms as Tables (e.g. `shop\\.tmp_.*`). Empty: none.",
        [],
        {"type": _nullable("array"), "items": {"type": "string", "pattern": TABLE_ENTRY_PATTERN}},
    ),
    Setting(
        "chunk_key_columns",
        SOURCE,
        "Chunk key columns",
        'For tables without a primary key: `{"db.table": "column"}`, a NOT NULL unique column to split '
        "the table on. validate says which tables need one.",
        {},
        {"type": _nullable("object")},
    ),
    Setting(
        "zero_dates",
        SOURCE,
        "Zero dates",
        "What a zero or invalid date (`0000-00-00`, `2024-00-10`) becomes in the sink. NULL (default): "
        "such values are NULL and date columns keep their date types. Text: every DATE, DATETIME and "
        "TIMESTAMP column is captured as text (`2024-01-02 03:04:05`, TIMESTAMP in UTC), zero dates kept "
        "as they are. Changing it needs a reset (the sink's column types change).",
        "null",
        {
            "type": "string",
            "enum": list(ZERO_DATES),
            "values_display": {"null": "NULL (date types kept)", "text": "Text (literal kept)"},
        },
    ),
    Setting(
        "sink_type",
        SINK,
        "Sink",
        "Where the rows go.",
        DEFAULT_SINK,
        {"type": "string", "enum": list(SINK_TYPES), "values_display": dict(SINK_LABELS)},
    ),
    Setting(
        "sink_options",
        SINK,
        "Sink options",
        'Delta and changelog: `{"root": "<directory or URL>"}` (where the tables are written; every Spark '
        'node must reach it; on S3 also `"storage_options": {"AWS_REGION": ...}`). PostgreSQL: `{"schema": '
        '"cdc"}` (the target schema). Passwords and keys never go here: use the PostgreSQL sink connection '
        "or the object storage connection.",
        {"root": "/tmp/mysqlcdc-lake"},
        {"type": "object"},
    ),
    Setting(
        "sink_conn_id",
        SINK,
        "PostgreSQL sink connection",
        "For the PostgreSQL sink: the Airflow connection (type Postgres) with host, database, user and "
        "password. For an Iceberg sink whose catalog is on PostgreSQL: the connection whose password that "
        "database takes. Leave empty for the other sinks.",
        None,
        {"type": _nullable("string")},
    ),
    Setting(
        "chunk_size",
        SNAPSHOT,
        "Chunk size (rows)",
        "Rows per chunk: the key ranges a table is split into (Flink CDC's default is 8096). A batch is a run "
        "of whole chunks, and the snapshot reads consecutive chunks together (about 250,000 rows a query), "
        "so this sets how finely batches are cut and how many boundary queries planning a table whose key "
        "cannot be split evenly costs, not the number of SELECTs. At least 1.",
        8096,
        {"type": "integer", "exclusiveMinimum": 0, "maximum": 100_000_000},
    ),
    Setting(
        "rows_per_batch",
        SNAPSHOT,
        "Rows per Spark job",
        "Target rows of one snapshot task (one Spark job reads one batch of chunks). A Spark job costs "
        "seconds to start, so keep it in the millions. The batch count is a multiple of the snapshot "
        "tasks that run at once.",
        5_000_000,
        {"type": "integer", "exclusiveMinimum": 0},
    ),
    Setting(
        "reread_batches",
        SNAPSHOT,
        "Read finished batches again",
        "Batches to snapshot again although they finished: batch ids (`batch-0003`), table names "
        "(`shop.orders`: every batch holding it) or `*` for all. Also while the stream runs: the batch's "
        "rows then go to the stream, which replaces the batch's key ranges with them exactly. Clearing a "
        "finished snapshot task in the grid also reads it again.",
        [],
        {"type": _nullable("array"), "items": {"type": "string", "pattern": TABLE_ENTRY_PATTERN}},
    ),
    Setting(
        "spark_runtime",
        SNAPSHOT,
        "Spark runtime",
        "How the snapshot tasks reach Spark. Spark Connect (default): the run's snapshot tasks share one Spark "
        "application -- the server of the Spark Connect connection below, else a local one the first task "
        "starts (it stops by itself when idle). spark-submit: every batch starts its own Spark application "
        "(the Spark connection `spark_default`), for clusters without Spark Connect.",
        "connect",
        {
            "type": "string",
            "enum": ["connect", "submit"],
            "values_display": {"connect": "Spark Connect (one shared application)", "submit": "spark-submit per batch"},
        },
    ),
    Setting(
        "spark_connect_conn_id",
        SNAPSHOT,
        "Spark Connect connection",
        "Only for the Spark Connect runtime: an Airflow connection of type Spark Connect (host, port, token) "
        "of a running Spark Connect server. Leave empty for a local server on the Airflow worker.",
        None,
        {"type": _nullable("string")},
    ),
    Setting(
        "startup_mode",
        STREAM,
        "Startup mode",
        "What the pipeline reads first.",
        "initial",
        {"type": "string", "enum": list(STARTUP_MODES), "values_display": dict(STARTUP_MODE_LABELS)},
    ),
    Setting(
        "startup_offset",
        STREAM,
        "Startup offset",
        'Only for startup mode specific-offset: `{"file": "mysql-bin.000003", "position": 4}` or '
        '`{"gtid": "<gtid set>"}`.',
        None,
        {"type": _nullable("object")},
    ),
    Setting(
        "startup_timestamp",
        STREAM,
        "Startup timestamp",
        "Only for startup mode timestamp: the stream starts at the first binlog event at or after this time (UTC).",
        None,
        {"type": _nullable("string"), "format": "date-time"},
    ),
    Setting(
        "stream_options",
        STREAM,
        "Stream options",
        'How the stream paces itself, e.g. `{"max_events_per_batch": 20000, "trigger_interval_s": 1}`. '
        f"Keys: {', '.join(f.name for f in dataclasses.fields(StreamOptions))} (docs: The stream, Stream behaviour).",
        {},
        {"type": _nullable("object")},
    ),
    Setting(
        "schema_change_behavior",
        STREAM,
        "Schema changes",
        "What an `ALTER TABLE` (or rename, truncate, drop) on a captured table does to the sink tables. "
        "The docs' *Schema changes* page shows each behaviour per sink.",
        DEFAULT_BEHAVIOR,
        {"type": "string", "enum": list(BEHAVIORS), "values_display": dict(SCHEMA_CHANGE_LABELS)},
    ),
    Setting(
        "state_location",
        STATE,
        "State location",
        "Directory or URL (s3://, abfss://, ...) holding the plan, batch results and the stream's "
        "checkpoint, status and log. Every Spark node must reach it. One per pipeline.",
        "/tmp/mysqlcdc/pipeline",
        {"type": "string", "minLength": 1},
    ),
    Setting(
        "aws_conn_id",
        STATE,
        "Object storage connection",
        "Only when the state location or the sink root is on S3 (or an S3-compatible server): an Airflow "
        "connection of type aws (login = access key id, password = secret access key, extra `endpoint_url`, "
        "`region_name`). Its credentials are read when each task runs and never written to the state "
        "location. Leave empty to use the workers' own credentials (environment, instance role).",
        None,
        {"type": _nullable("string")},
    ),
    Setting(
        "reset",
        DANGER,
        "Reset: forget everything and load again",
        "**Destructive.** Stops the running stream; deletes the sink tables the previous load wrote "
        "(Delta tables, PostgreSQL tables and their bookkeeping, changelog directories) and the plan, "
        "every batch result and the stream's checkpoint in the state location; then every table is "
        "planned and snapshotted from scratch. Leave off to resume or rerun.",
        False,
        {"type": "boolean"},
    ),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    return BY_NAME[name]


#: Settings that were renamed, old name -> new. The old name still works wherever settings are
#: given by name (a run's conf, a DAG file's ``settings``, a pipeline file's ``pipeline`` section)
#: with a deprecation warning; the form, the operators and the docs use the new one.
RENAMED: dict[str, str] = {"mysql_conn_id": "mysql_cdc_conn_id"}


def current_names(values: Mapping[str, Any], where: str = "settings") -> dict[str, Any]:
    """``values`` with every renamed setting under its current name, warning once per old name
    used (``DeprecationWarning``, which names the new one). Both names with different values is
    a configuration error: which one was meant cannot be guessed."""
    import warnings

    from .errors import ConfigError

    out = dict(values)
    for old, new in RENAMED.items():
        if old not in out:
            continue
        value = out.pop(old)
        if new in out and out[new] != value:
            raise ConfigError(
                f"{where}: both {old}={value!r} and {new}={out[new]!r} are given; {old} is the old name of "
                f"{new}. Fix: keep only {new}."
            )
        out[new] = value
        warnings.warn(f"{where}: {old} is deprecated; it is now called {new}", DeprecationWarning, stacklevel=3)
    return out


def defaults(**overrides: Any) -> dict[str, Any]:
    """Every setting's value: the catalogue's defaults with ``overrides`` (unknown names fail;
    renamed ones are taken under their new names, with a deprecation warning)."""
    overrides = current_names(overrides)
    unknown = sorted(set(overrides) - set(BY_NAME))
    if unknown:
        raise KeyError(f"unknown settings {unknown}; known: {sorted(BY_NAME)}")
    return {s.name: copy.deepcopy(overrides.get(s.name, s.default)) for s in SETTINGS}
