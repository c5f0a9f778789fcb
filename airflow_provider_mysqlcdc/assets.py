"""The sink tables as Airflow Assets, so downstream DAGs (dbt, Spark jobs) run when data lands.

Which tables a pipeline writes is known only when it runs (table patterns, tables added to
the list), so the DAG declares one ``AssetAlias`` per pipeline (``<dag_id>_sink_tables``) and
the tasks attach a concrete Asset per sink table to it at run time:

* a snapshot task, once its batch is committed: one event per table of the batch (``extra``:
  batch id, rows, high watermark);
* the stream watchdog, at every check: one event per captured table (``extra``: the last
  committed micro-batch and offset, lag), so the stream's progress reaches Airflow too.

An Asset's URI is where the sink keeps the table (``Sink.asset_uri``): the Delta table's path
(``file:///...`` or ``s3://...``), the changelog table's directory, or
``postgres://host:port/database/schema/table``. A DAG can be scheduled on one table's Asset
or on the alias (any table of the pipeline).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from airflow.sdk import Asset, AssetAlias

GROUP = "mysqlcdc"


def sink_tables_alias(dag_id: str) -> AssetAlias:
    return AssetAlias(name=f"{dag_id}_sink_tables", group=GROUP)


def table_assets(sink_config: Any, tables: Iterable[Any], rules: Any = None) -> dict[str, str]:
    """``{"db.table": asset uri}`` for the sink tables this sink keeps for the captured ``tables``
    (their routes' sink tables when ``rules`` route them; none for the console sink)."""
    from .cdc.transform.table_views import sink_table_of
    from .spark.sinks.factory import build_sink

    sink = build_sink(sink_config)
    try:
        out = {}
        for t in tables:
            target = sink_table_of(rules, t) if rules else t
            uri = sink.asset_uri(target)
            if uri:
                out[str(target)] = uri
        return out
    finally:
        sink.close()


def emit_table_events(context: Any, outlets: Iterable[Any], uris: Mapping[str, str], extra: Mapping[str, Any]) -> int:
    """One event per table on every alias among ``outlets``; returns how many were added."""
    events = context.get("outlet_events") if hasattr(context, "get") else None
    aliases = [o for o in outlets or () if isinstance(o, AssetAlias)]
    if events is None or not aliases:  # (an accessor with nothing accessed yet is empty, not None)
        return 0
    n = 0
    for alias in aliases:
        for table, uri in uris.items():
            events[alias].add(Asset(name=uri, uri=uri, group=GROUP), extra={**dict(extra), "table": table})
            n += 1
    return n
