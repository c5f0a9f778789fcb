"""One pipeline file: its sections as pydantic models, every value checked like the trigger form.

    source:     where the rows come from: an Airflow connection id (never a password) and tables
    sink:       where they go: type + options, or a connection id (PostgreSQL)
    route:      source table pattern -> sink table (merging shards into one table)
    transform:  projection / filter / primary keys per table (cdc/transform/table_views.py)
    pipeline:   name (the DAG id), schedule, snapshot parallelism and every other run setting

The run settings are those of ``cdc/settings.py``, under the section of the trigger form
they sit in: Source settings under ``source``, Sink settings under ``sink``, every other one
under ``pipeline``, by their setting names; four are shorter in a file (``mysql_cdc_conn_id`` is
``source.conn_id``, ``sink_type``/``sink_options``/``sink_conn_id`` are ``sink.type``/
``sink.options``/``sink.conn_id``). A value passes the JSON schema the setting declares (what
the form checks) and the engine's own checks where they need no server (table entries,
stream options, startup settings). ``reset`` and ``reread_batches`` are choices for one run
and stay in the trigger form. Unknown keys are errors.

Every error names the key path (``pipeline.chunk_size``, ``route[0].sink_table``), the value
found and the fix; ``loader`` adds the file. No Airflow import here.
"""

from __future__ import annotations

import copy
import difflib
import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterable, Mapping, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model, model_validator

from ..cdc.errors import ConfigError
from ..cdc.settings import SETTINGS, SINK, SOURCE, TABLE_ENTRY_PATTERN, Setting
from ..cdc.sinks import accepts_connection, connection_sinks, needs_root, takes_connection
from ..cdc.source.table_patterns import _quoted_parts, is_regex
from ..cdc.store.object_store import refuse_secret_options
from .spec_checks import (
    DAG_ID_PATTERN,
    REQUIRED,
    annotated_type,
    checked,
    invalid,
    setting_annotation,
    setting_check,
    show,
    table_entry,
)


@dataclass(frozen=True)
class Problem:
    """One problem of one pipeline file: ``<file>:<line>: <key>: <message>`` (the message ends with
    its fix; the line as editors and CI annotations read it, when the key can be found)."""

    file: str
    key: str
    message: str
    line: int | None = None  # where the key (or the nearest section that holds it) is written

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.key}: {self.message}"


WHOLE_FILE = "(file)"  # the key of a problem of the whole file (not YAML, not a mapping, ...)


class PipelineFileError(ValueError):
    """Problems of pipeline files. Its text: a first line naming the file(s), then one line per problem."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        files = list(dict.fromkeys(p.file for p in self.problems))
        n = len(self.problems)
        head = (
            f"pipeline file {files[0]}" if len(files) == 1 else f"pipeline files {', '.join(files)}"
        ) + f" has {n} problem{'s' if n != 1 else ''}, so its pipeline has no DAGs:"
        super().__init__("\n".join([head, *map(str, self.problems)]))


SOURCE_SECTION, SINK_SECTION, PIPELINE_SECTION = "source", "sink", "pipeline"
RENAMED = {
    "mysql_cdc_conn_id": (SOURCE_SECTION, "conn_id"),
    "sink_type": (SINK_SECTION, "type"),
    "sink_options": (SINK_SECTION, "options"),
    "sink_conn_id": (SINK_SECTION, "conn_id"),
}
# Settings that are a choice for one run: a file sets the form's defaults, and a default here
# would act on every run (a scheduled one too).
RUN_ONLY = {
    "reset": "a reset is a choice for one run (it drops the sink tables and loads everything again), so a file "
    "does not set it. Fix: remove the key; to reset, tick 'Reset' in the trigger form of that one run",
    "reread_batches": "reading finished batches again is a choice for one run, so a file does not set it. Fix: "
    "remove the key; fill 'Read finished batches again' in the trigger form of that one run, "
    "or clear the batch's snapshot task",
}


def _file_key(s: Setting) -> tuple[str, str]:
    if s.name in RENAMED:
        return RENAMED[s.name]
    return {SOURCE: SOURCE_SECTION, SINK: SINK_SECTION}.get(s.section, PIPELINE_SECTION), s.name


FILE_KEYS: dict[str, tuple[str, str]] = {s.name: _file_key(s) for s in SETTINGS if s.name not in RUN_ONLY}


def file_key(setting_name: str) -> str:
    """``chunk_size`` -> ``pipeline.chunk_size``; ``mysql_cdc_conn_id`` -> ``source.conn_id``."""
    section, key = FILE_KEYS[setting_name]
    return f"{section}.{key}"


def watchdog_dag_id(dag_id: str) -> str:
    """The stream watchdog's DAG id: ``<name>_stream_watchdog``, a trailing ``_pipeline`` of the
    name dropped first (``mysql_cdc_pipeline`` -> ``mysql_cdc_stream_watchdog``)."""
    base = dag_id[: -len("_pipeline")] if dag_id.endswith("_pipeline") and dag_id != "_pipeline" else dag_id
    return f"{base}_stream_watchdog"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _setting_fields(section: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for s in SETTINGS:
        if FILE_KEYS.get(s.name, ("",))[0] != section:
            continue
        annotation = annotated_type(setting_annotation(s.schema), BeforeValidator(functools.partial(setting_check, s)))
        if s.name in REQUIRED:
            fields[FILE_KEYS[s.name][1]] = (annotation, Field(title=s.title, description=s.description))
        else:
            fields[FILE_KEYS[s.name][1]] = (
                annotation,
                Field(
                    default_factory=functools.partial(copy.deepcopy, s.default),
                    title=s.title,
                    description=s.description,
                ),
            )
    return fields


if TYPE_CHECKING:  # mypy sees the base; the setting fields create_model adds are looked up as Any

    class SourceSection(_Section):
        def __getattr__(self, name: str) -> Any: ...

else:
    SourceSection = create_model(
        "SourceSection",
        __base__=_Section,
        __module__=__name__,
        __doc__="``source``: the Source settings of the trigger form (``conn_id`` is ``mysql_cdc_conn_id``).",
        **_setting_fields(SOURCE_SECTION),
    )


class _SinkBase(_Section):
    @model_validator(mode="after")
    def _sink_fits_its_type(self) -> "_SinkBase":
        kind, options, conn_id = self.type, self.options, self.conn_id  # type: ignore[attr-defined]
        if conn_id and not accepts_connection(kind):
            raise invalid(
                f"found {show(conn_id)} with sink type {kind}: a sink connection is the PostgreSQL "
                "sink's database's or an Iceberg sink's catalog's. Fix: remove sink.conn_id, or set sink.type to "
                f"one that takes a connection ({connection_sinks()})",
                ".conn_id",
            )
        if takes_connection(kind) and not conn_id and "dsn" not in options:
            raise invalid(
                "found none: the postgres sink needs its database. Fix: set sink.conn_id to an Airflow "
                "connection of type Postgres (host, database, user, password)",
                ".conn_id",
            )
        if needs_root(kind) and not options.get("root"):
            raise invalid(
                f"found {show(options.get('root'))}: the {kind} sink writes its tables under a root. "
                "Fix: set sink.options.root to a directory or URL every Spark node reaches, e.g. "
                "s3://lake/cdc",
                ".options.root",
            )
        return self


if TYPE_CHECKING:  # mypy sees the base; the setting fields create_model adds are looked up as Any

    class SinkSection(_SinkBase):
        def __getattr__(self, name: str) -> Any: ...

else:
    SinkSection = create_model(
        "SinkSection",
        __base__=_SinkBase,
        __module__=__name__,
        __doc__="``sink``: ``type``, ``options`` and ``conn_id`` (``sink_type``, ``sink_options``, ``sink_conn_id``).",
        **_setting_fields(SINK_SECTION),
    )
SCHEDULE_PRESETS = ("@once", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly")


def _schedule(value: str) -> None:
    if value.startswith("@"):
        if value not in SCHEDULE_PRESETS:
            raise invalid(
                f"found {show(value)}, need null (runs are triggered by hand), a preset "
                f"({', '.join(SCHEDULE_PRESETS)}) or a cron expression. Fix: use one of those, e.g. "
                "'0 3 * * *'"
            )
        return
    try:
        from croniter import croniter
    except ImportError:  # pragma: no cover - Airflow depends on croniter
        ok = len(value.split()) in (5, 6)
    else:
        ok = croniter.is_valid(value)
    if not ok:
        raise invalid(
            f"found {show(value)}, not a cron expression (minute hour day-of-month month day-of-week). "
            "Fix: e.g. '0 3 * * *' (daily at 03:00 UTC), a preset such as @daily, or null"
        )


def _startup_settings(section: Any) -> None:
    """The engine's checks of the startup settings (cdc/pipeline.py), on the file's values."""
    from ..cdc.coerce import epoch_seconds
    from ..cdc.pipeline import PipelineConfig
    from ..cdc.source.config import SourceConfig

    try:
        PipelineConfig(
            name=section.name,
            source=SourceConfig(),
            include=("db.table",),
            state_location=section.state_location,
            startup_mode=section.startup_mode,
            startup_offset=section.startup_offset,
            startup_timestamp=epoch_seconds(section.startup_timestamp, "startup_timestamp"),
            schema_change_behavior=section.schema_change_behavior,
        )
    except ConfigError as e:
        text = str(e)
        name = next(
            (
                n
                for n in (
                    "startup_mode",
                    "startup_offset",
                    "startup_timestamp",
                    "schema_change_behavior",
                    "state_location",
                )
                if text.startswith(n)
            ),
            "startup_mode",
        )
        value = getattr(section, name)
        text = text.replace("fill Startup offset", "set pipeline.startup_offset").replace(
            "fill Startup timestamp", "set pipeline.startup_timestamp"
        )
        raise invalid(f"found {show(value)}: {text}", f".{name}") from None


class _PipelineBase(_Section):
    name: Annotated[str, checked({"type": "string", "minLength": 1, "maxLength": 200, "pattern": DAG_ID_PATTERN})] = (
        Field(
            description="The pipeline DAG's id; its stream watchdog is <name>_stream_watchdog (a trailing _pipeline "
            "dropped first). Unique among the pipeline files."
        )
    )
    description: Annotated[Optional[str], checked({"type": ["null", "string"]}, None)] = Field(
        None, description="One line: the DAG's description in the DAG list."
    )
    schedule: Annotated[Optional[str], checked({"type": ["null", "string"], "minLength": 1}, None, _schedule)] = Field(
        None,
        description="null (the default: runs are triggered by hand), a preset such as @daily, or a "
        "cron expression. A run resumes the plan, skips finished batches and leaves a "
        "running stream alone.",
    )
    snapshot_parallelism: Annotated[int, checked({"type": "integer", "minimum": 1, "maximum": 1024}, 1)] = Field(
        1, description="Snapshot tasks that run at once; the plan makes the batch count a multiple of it."
    )
    tags: Annotated[
        tuple[str, ...],
        checked({"type": "array", "uniqueItems": True, "items": {"type": "string", "minLength": 1}}, []),
    ] = Field((), description="Tags added to the DAGs' own (mysqlcdc, cdc).")

    @model_validator(mode="after")
    def _startup(self) -> "_PipelineBase":
        _startup_settings(self)
        return self


if TYPE_CHECKING:  # mypy sees the base; the setting fields create_model adds are looked up as Any

    class PipelineSection(_PipelineBase):
        def __getattr__(self, name: str) -> Any: ...

else:
    PipelineSection = create_model(
        "PipelineSection",
        __base__=_PipelineBase,
        __module__=__name__,
        __doc__="``pipeline``: name, schedule, snapshot parallelism, and the Snapshot, Stream and state settings.",
        **_setting_fields(PIPELINE_SECTION),
    )
_TABLE_TEXT = {"type": "string", "pattern": TABLE_ENTRY_PATTERN}
_SQL_TEXT = {"type": ["null", "string"], "minLength": 1, "pattern": TABLE_ENTRY_PATTERN}


def _sink_table(text: str) -> None:
    """An exact ``db.table`` (quoted names allowed), not a pattern."""
    try:
        parts = _quoted_parts(text)
    except ConfigError as e:
        raise invalid(f"found {show(text)}: {e}") from None
    if parts is None:
        if is_regex(text):
            raise invalid(
                f"found {show(text)}, need one table's name, not a pattern. Fix: write the sink table "
                "as db.table, e.g. shop.orders (quote names with special characters: `db`.`my$table`)"
            )
        parts = text.split(".", 1) if "." in text else [text]
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise invalid(
            f"found {show(text)}, need db.table. Fix: name the sink table with its database, e.g. shop.orders"
        )


def _spark_sql(what: str) -> Callable[[str], None]:
    """A projection (select list) or filter (predicate) that Spark SQL can read: parsed with sqlglot."""

    def check(text: str) -> None:
        import sqlglot
        from sqlglot import expressions as exp
        from sqlglot.errors import ParseError, TokenError

        prefix = "SELECT " if what == "projection" else "SELECT * FROM __t WHERE "
        sql = f"{prefix}{text} FROM __t" if what == "projection" else f"{prefix}{text}"
        example = "id, upper(name) AS name" if what == "projection" else "status <> 'deleted' AND amount > 0"
        try:
            trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
            if what == "projection" and re.search(r"^\s*,|,\s*,|,\s*$", text):  # sqlglot skips empty items
                raise ParseError("an empty item between commas")
        except (ParseError, TokenError) as e:
            reason = str(e).splitlines()[0]
            col = re.search(r"\.? ?Line \d+, Col: (\d+)\.?", reason)
            if col:  # the column in the file's text, not in the statement around it
                reason = reason[: col.start()] + f" near character {max(1, int(col.group(1)) - len(prefix))}"
            raise invalid(
                f"found {show(text)}: not a Spark SQL {what} ({reason}). Fix: write a {what} such as {example}"
            ) from None
        extra = sorted(
            k
            for k, v in (trees[0].args.items() if trees else ())
            if v and k not in ("expressions", "from", "from_", "where")
        )
        if len(trees) != 1 or not isinstance(trees[0], exp.Select) or extra:
            raise invalid(
                f"found {show(text)}: more than a {what} ({', '.join(extra) or 'a second statement'}). "
                f"Fix: write only the {what}, such as {example}"
            )

    return check


class RouteRule(_Section):
    """One route: the tables ``source_table`` matches land in ``sink_table`` (several tables, e.g.
    shards ``shop\\.orders_\\d+``, merge into one)."""

    source_table: Annotated[str, checked(_TABLE_TEXT, then=table_entry)] = Field(
        description="A table entry as in source.tables: db.table or a regular expression over db.table."
    )
    sink_table: Annotated[str, checked(_TABLE_TEXT, then=_sink_table)] = Field(description="The sink table, db.table.")
    description: Annotated[Optional[str], checked({"type": ["null", "string"]}, None)] = Field(
        None, description="Why the route exists; shown on the pipeline DAG's page."
    )


def _partition_keys(entries: list[Any]) -> None:
    """Each entry a column name or a partition transform over one (``cdc/transform/partitioning.py``);
    whether the sink table has the columns, in types the transforms take, is the plan step's check."""
    from ..cdc.transform.partitioning import parse_partition_keys

    try:
        parse_partition_keys(entries)
    except ConfigError as e:
        text = str(e)
        sub, _, message = text.partition(": ")
        raise invalid(message, sub) from None


class TransformRule(_Section):
    """One transform of the tables ``source_table`` matches: ``projection`` (Spark SQL select list),
    ``filter`` (Spark SQL predicate), ``primary_keys`` (the sink's key instead of the source's),
    ``partition_keys`` (how the sink table is partitioned: Iceberg's partition transforms)."""

    source_table: Annotated[str, checked(_TABLE_TEXT, then=table_entry)] = Field(
        description="A table entry as in source.tables: db.table or a regular expression over db.table."
    )
    projection: Annotated[Optional[str], checked(_SQL_TEXT, None, _spark_sql("projection"))] = Field(
        None, description="A Spark SQL select list over the table's columns: the sink table's columns."
    )
    filter: Annotated[Optional[str], checked(_SQL_TEXT, None, _spark_sql("filter"))] = Field(
        None,
        description="A Spark SQL predicate: rows it keeps are in the sink; a change that moves a row out "
        "deletes it there.",
    )
    primary_keys: Annotated[
        Optional[tuple[str, ...]],
        checked({"type": ["null", "array"], "minItems": 1, "uniqueItems": True, "items": _TABLE_TEXT}, None),
    ] = Field(None, description="The sink table's key columns instead of the source's primary key.")
    partition_keys: Annotated[
        Optional[tuple[str, ...]],
        checked(
            {
                "type": ["null", "array"],
                "minItems": 1,
                "uniqueItems": True,
                "items": {"type": "string", "minLength": 1},
            },
            None,
            _partition_keys,
        ),
    ] = Field(
        None,
        description="How the sink table is partitioned (Iceberg sink): each entry a column of the sink table, or "
        "year(col), month(col), day(col), hour(col), bucket(N, col), truncate(W, col).",
    )
    description: Annotated[Optional[str], checked({"type": ["null", "string"]}, None)] = Field(
        None, description="Why the transform exists; shown on the pipeline DAG's page."
    )

    @model_validator(mode="after")
    def _does_something(self) -> "TransformRule":
        if self.projection is None and self.filter is None and self.primary_keys is None and not self.partition_keys:
            raise invalid(
                f"found only source_table {show(self.source_table)}: a transform changes nothing "
                "without projection, filter, primary_keys or partition_keys. Fix: add one of them, or remove the rule"
            )
        return self


class PipelineSpec(_Section):
    """One pipeline file, checked. ``settings()`` are the run settings it sets (the trigger form's
    defaults of its DAG); ``route`` and ``transform`` are handed on as typed rules."""

    source: SourceSection
    sink: SinkSection = Field(default_factory=SinkSection)
    route: tuple[RouteRule, ...] = ()
    transform: tuple[TransformRule, ...] = ()
    pipeline: PipelineSection

    @model_validator(mode="before")
    @classmethod
    def _empty_sections(cls, data: Any) -> Any:
        """``sink:`` or ``route:`` with nothing under it means none (YAML reads it as null)."""
        if isinstance(data, Mapping):
            return {k: v for k, v in data.items() if not (v is None and k in cls.model_fields)}
        return data

    def settings(self) -> dict[str, Any]:
        """Every run setting (``cdc/settings.py`` name -> value): the file's, else the default."""
        return {name: copy.deepcopy(getattr(getattr(self, section), key)) for name, (section, key) in FILE_KEYS.items()}

    @property
    def dag_id(self) -> str:
        return self.pipeline.name

    @property
    def watchdog_dag_id(self) -> str:
        return watchdog_dag_id(self.pipeline.name)

    def dag_arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``dag_builder.build_pipeline_dags`` for this pipeline."""
        p = self.pipeline
        return {
            "dag_id": p.name,
            "settings": self.settings(),
            "snapshot_parallelism": p.snapshot_parallelism,
            "schedule": p.schedule,
            "description": p.description,
            "tags": tuple(p.tags),
            "watchdog_dag_id": self.watchdog_dag_id,
            "route": [r.model_dump(exclude_none=True) for r in self.route],
            "transform": [t.model_dump(exclude_none=True) for t in self.transform],
        }


SECTIONS: dict[tuple[Any, ...], type[BaseModel]] = {
    (): PipelineSpec,
    ("source",): SourceSection,
    ("sink",): SinkSection,
    ("pipeline",): PipelineSection,
}
_RULES: dict[str, type[BaseModel]] = {"route": RouteRule, "transform": TransformRule}
# Flink CDC's source keys, and what they are here.
_CONNECTION_KEYS = ("hostname", "host", "port", "username", "user", "password")
_FOREIGN_SOURCE_KEYS = {
    **{
        k: "the source server is an Airflow connection: host, port, user and password are the connection's, and a "
        "pipeline file never holds a password. Fix: remove the key; put them in the connection named by "
        "source.conn_id (Admin > Connections, type MySQL CDC)"
        for k in _CONNECTION_KEYS
    },
    **{
        k: "the replication server ids are the connection's (extra server_id_range, 'Replication server ids' in "
        "the connection form), so every task and the stream use one range. Fix: remove the key; set them on "
        "the connection named by source.conn_id"
        for k in ("server-id", "server_id", "server_id_range", "server-id-range")
    },
    **{
        k: "the server's time zone is the connection's (extra server_time_zone, 'Server time zone' in the "
        "connection form). Fix: remove the key; set it on the connection named by source.conn_id"
        for k in ("server-time-zone", "server_time_zone")
    },
    "type": "the source is always a MySQL or MariaDB server, reached through source.conn_id. Fix: remove the key",
}
_EXAMPLES: dict[tuple[Any, ...], str] = {
    ("source",): "a source section, e.g. source: {conn_id: mysql_cdc_default, tables: [shop.orders]}",
    ("pipeline",): "a pipeline section, e.g. pipeline: {name: shop_orders, state_location: s3://cdc/state/shop}",
    ("tables",): "tables: [shop.orders] (db.table entries or regular expressions over db.table)",
    ("state_location",): "state_location: a directory or URL of its own for this pipeline, e.g. s3://cdc/state/shop",
    ("name",): "name: the pipeline's DAG id, e.g. shop_orders",
    ("source_table",): r"source_table: a table entry, e.g. shop\.orders_\d+",
    ("sink_table",): "sink_table: db.table, e.g. shop.orders",
}


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    if loc in SECTIONS:
        return SECTIONS[loc]
    if len(loc) == 2 and loc[0] in _RULES and isinstance(loc[1], int):
        return _RULES[loc[0]]
    return None


def key_path(loc: Iterable[Any]) -> str:
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    return text or WHOLE_FILE


def _where_else(key: str) -> str | None:
    """A key written in the wrong section, or by its setting name."""
    name = key.replace("-", "_")
    if name in RUN_ONLY:
        return RUN_ONLY[name]
    if name in FILE_KEYS:
        return f"a pipeline file writes this setting as {file_key(name)}. Fix: write it there"
    for section, model in (("source", SourceSection), ("sink", SinkSection), ("pipeline", PipelineSection)):
        if name in model.model_fields:
            return f"it belongs in the {section} section. Fix: move it to {section}.{name}"
    return None


def _unknown_key(loc: tuple[Any, ...], value: Any) -> str:
    parent, key = loc[:-1], str(loc[-1])
    model = _model_at(parent)
    known = list(model.model_fields) if model else []
    in_rule = bool(parent) and parent[0] in _RULES
    if parent == ("source",) and key in _FOREIGN_SOURCE_KEYS:
        why = _FOREIGN_SOURCE_KEYS[key]
    elif "-" in key and key.replace("-", "_") in known:
        why = f"keys are written with '_'. Fix: write {key.replace('-', '_')}"
    elif parent == ("pipeline",) and key == "parallelism":
        why = "did you mean snapshot_parallelism (snapshot tasks at once)? Fix: rename it"
    elif not in_rule and (elsewhere := _where_else(key)) is not None:
        why = elsewhere
    else:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        why = (f"did you mean {close[0]}? Fix: rename it, or use only " if close else "Fix: use only ") + ", ".join(
            known
        )
    return f"unknown key ({_value_of(key, value)}): {why}."


def _value_of(key: str, value: Any) -> str:
    """An unknown key's value, unless the key names a credential (never echoed into a CI log)."""
    try:
        refuse_secret_options({key: None}, key)
    except ConfigError:
        return "its value is not shown: the key names a credential"
    return f"its value: {show(value)}"


def _shape_message(loc: tuple[Any, ...], error: Mapping[str, Any]) -> str:
    found = show(error.get("input"))
    if error["type"] in ("model_type", "dict_type", "model_attributes_type"):
        what = "a rule" if len(loc) == 2 and loc[0] in _RULES else "a section"
        return f"found {found}, need a mapping (key: value lines indented under it). Fix: write {what} of keys here."
    if error["type"] in ("tuple_type", "list_type"):
        return (
            f"found {found}, need a list of rules. Fix: start each rule with '- ', e.g. '- source_table: shop.orders'."
        )
    return f"found {found}: {error.get('msg')}. Fix: correct the value (docs: Pipeline files)."


def problems_from(error: ValidationError, file: str) -> list[Problem]:
    out: list[Problem] = []
    for e in error.errors(include_url=False):
        loc = tuple(e["loc"])
        key = key_path(loc)
        if e["type"] == "mysqlcdc":
            ctx = e.get("ctx") or {}
            key = (key if loc else "") + ctx.get("sub", "")
            message = str(ctx.get("m", e["msg"]))
            out.append(
                Problem(file, key.lstrip(".") or WHOLE_FILE, message if message.endswith(".") else message + ".")
            )
        elif e["type"] == "extra_forbidden":
            out.append(Problem(file, key, _unknown_key(loc, e.get("input"))))
        elif e["type"] == "missing":
            example = _EXAMPLES.get(loc if len(loc) == 1 and loc in _EXAMPLES else (loc[-1],), f"{loc[-1]}: ...")
            out.append(Problem(file, key, f"missing, found nothing. Fix: add {example}."))
        else:
            out.append(Problem(file, key, _shape_message(loc, e)))
    return out


def parse_spec(data: Any, file: str) -> tuple[PipelineSpec | None, list[Problem]]:
    """The spec of one file's data (what YAML read), or the problems."""
    if not isinstance(data, Mapping):
        kind = "nothing" if data is None else f"a {type(data).__name__}"
        return None, [
            Problem(
                file,
                WHOLE_FILE,
                f"found {kind}, need a mapping with the sections source, sink, "
                "route, transform, pipeline. Fix: start from an example file "
                "(examples/platform_repo/pipelines/).",
            )
        ]
    bad_keys = [k for k in data if not isinstance(k, str)]
    if bad_keys:
        return None, [
            Problem(
                file,
                WHOLE_FILE,
                f"found the key {show(bad_keys[0])}, need names of sections. Fix: "
                "use source, sink, route, transform, pipeline.",
            )
        ]
    try:
        return PipelineSpec.model_validate(data), []
    except ValidationError as e:
        return None, problems_from(e, file)


__all__ = [
    "FILE_KEYS",
    "PipelineFileError",
    "PipelineSpec",
    "Problem",
    "RouteRule",
    "TransformRule",
    "WHOLE_FILE",
    "file_key",
    "parse_spec",
    "watchdog_dag_id",
]
