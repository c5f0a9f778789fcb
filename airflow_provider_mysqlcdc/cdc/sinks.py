"""The sink registry: every sink type this package has, and what the layers above need to know of it.

One entry per sink, read by the settings (the trigger form's choices and labels), the pipeline
configuration and pipeline files (which types exist, which need a root or a connection), the
route/transform checks (which sinks apply views), the DAG builder (the doc's words), the plan
operator (what to probe) and ``spark/sinks/factory.py`` (which class to build). Adding a sink is
its folder under ``spark/sinks/`` and one entry here.

The engine knows neither Spark nor the sinks' code, so an entry names its class by module and
name (``module`` is relative to ``spark/sinks/``); only the factory imports it, when the sink is
built, so a sink's dependencies load only when it is used.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SinkKind:
    """One sink type: its name in configuration, how the form and the docs speak of it, what its
    options must hold, and where its class lives."""

    name: str
    label: str
    """The trigger form's label of the choice."""
    described_as: str
    """How a DAG's doc names the target (``... load the tables into {described_as}``)."""
    module: str
    """The module under ``spark/sinks/`` that defines the class (imported by the factory only)."""
    class_name: str
    needs_root: bool = False
    """Writes its tables under ``options.root`` (a directory or URL every Spark node reaches)."""
    takes_connection: bool = False
    """Reaches its database through an Airflow connection (``sink_conn_id``; ``options.dsn``)."""
    catalog_connection: bool = False
    """May take an Airflow connection (``sink_conn_id``) whose password only its catalog's database
    uses (the catalog's address stays in its options; no ``options.dsn``)."""
    applies_views: bool = False
    """Applies route and transform rules (with its direct stream write)."""
    logs_changes: bool = False
    """Keeps every change as a log (no table state): its source's tasks transform each change."""
    snapshot_bypasses_jvm: bool = False
    """Its snapshot rows can go from the Arrow reader to its files without Spark's JVM."""
    partitions: bool = False
    """Partitions its tables by a transform rule's ``partition_keys`` (``cdc/transform/partitioning.py``)."""


SINKS: dict[str, SinkKind] = {
    kind.name: kind
    for kind in (
        SinkKind(
            "delta",
            "Delta Lake: one table per source table under Sink options' root (default)",
            "a Delta Lake",
            "delta.sink",
            "DeltaSink",
            needs_root=True,
            applies_views=True,
            snapshot_bypasses_jvm=True,
        ),
        SinkKind(
            "postgres",
            "PostgreSQL: upserts into a schema, via the PostgreSQL sink connection",
            "PostgreSQL",
            "postgres.sink",
            "PostgresSink",
            takes_connection=True,
            applies_views=True,
        ),
        SinkKind(
            "changelog",
            "Changelog: append-only JSON lines of every change (changelog-json), under root",
            "a changelog (JSON lines)",
            "changelog.sink",
            "ChangelogSink",
            needs_root=True,
            applies_views=True,
            logs_changes=True,
        ),
        SinkKind(
            "iceberg",
            "Apache Iceberg: one table per source table in a catalog (SQLite beside root by default)",
            "Apache Iceberg tables",
            "iceberg.sink",
            "IcebergSink",
            needs_root=True,
            catalog_connection=True,
            applies_views=True,
            partitions=True,
            snapshot_bypasses_jvm=True,
        ),
        SinkKind(
            "console",
            "Console: print changes to the Spark log (debugging only)",
            "the Spark log (console sink)",
            "console.sink",
            "ConsoleSink",
        ),
    )
}
SINK_TYPES = tuple(SINKS)
DEFAULT_SINK = "delta"
# The sink types whose writes the views are applied to, with the stream's direct write: the
# merge-based sinks on the driver (last changes), the changelog in the source's tasks (each change).
VIEW_SINKS = tuple(name for name, kind in SINKS.items() if kind.applies_views)
# The sink types that partition their tables by a transform's partition_keys.
PARTITION_SINKS = tuple(name for name, kind in SINKS.items() if kind.partitions)


def sink_kind(name: str | None) -> SinkKind | None:
    """The registry entry of a sink type, or None for a name that is none (checked elsewhere)."""
    return SINKS.get(name) if name else None


def needs_root(name: str | None) -> bool:
    kind = sink_kind(name)
    return kind is not None and kind.needs_root


def takes_connection(name: str | None) -> bool:
    kind = sink_kind(name)
    return kind is not None and kind.takes_connection


def accepts_connection(name: str | None) -> bool:
    """Whether ``sink_conn_id`` means anything for this sink type (its database or its catalog's)."""
    kind = sink_kind(name)
    return kind is not None and (kind.takes_connection or kind.catalog_connection)


def logs_changes(name: str | None) -> bool:
    kind = sink_kind(name)
    return kind is not None and kind.logs_changes


def connection_sinks() -> str:
    """The sink types that take a connection, for the errors (``postgres, iceberg``)."""
    return ", ".join(name for name, kind in SINKS.items() if kind.takes_connection or kind.catalog_connection)
