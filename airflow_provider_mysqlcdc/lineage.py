"""OpenLineage for the pipeline's tasks, when Airflow's OpenLineage provider is installed.

The provider asks each operator for ``get_openlineage_facets_on_complete``; the operators
answer with the source tables they read (``mysql://host:port``, ``db.table``, the naming the
OpenLineage spec gives MySQL) and the sink tables they wrote, named after where the sink keeps
them (``assets.py``'s URIs: ``s3://bucket`` + path, ``file`` + path,
``postgres://host:port`` + ``database.schema.table``). Without the provider nothing here is
imported: it is the optional ``[openlineage]`` extra.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit


def dataset_name(uri: str) -> tuple[str, str]:
    """(namespace, name) of a sink table's asset URI, as OpenLineage names datasets."""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return "file", parts.path
    if parts.scheme in ("postgres", "postgresql"):
        return f"postgres://{parts.netloc}", ".".join(p for p in parts.path.split("/") if p)
    return f"{parts.scheme}://{parts.netloc}", parts.path.lstrip("/")


def operator_lineage(source: Any, tables: Iterable[Any], sink_uris: Mapping[str, str] | None = None) -> Any:
    """An ``OperatorLineage`` of the source tables read and the sink tables written."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

    namespace = f"mysql://{source.host}:{source.port}"
    inputs = [Dataset(namespace=namespace, name=str(t)) for t in tables]
    outputs = [
        Dataset(namespace=ns, name=name) for ns, name in (dataset_name(uri) for uri in (sink_uris or {}).values())
    ]
    return OperatorLineage(inputs=inputs, outputs=outputs)


def pipeline_lineage(
    state_location: str, aws_conn_id: str | None, *, batch_id: str | None = None, outputs: bool = True
) -> Any:
    """The lineage of a pipeline task from its state location: the batch's tables (or every
    planned table) read from the source and, with ``outputs``, their sink tables."""
    from .assets import table_assets
    from .cdc.pipeline import load_pipeline_config
    from .cdc.state import StateStore
    from .cdc.store.object_store import use_credentials
    from .hooks.object_storage import storage_credentials

    use_credentials(storage_credentials(aws_conn_id or None))
    state = StateStore(state_location)
    config = load_pipeline_config(state.url("pipeline.json"), password="")
    plan = state.read_plan()
    if plan is None:
        tables: list[Any] = []
    elif batch_id is not None:
        tables = list(plan.batch(batch_id).tables)
    else:
        tables = list(plan.schemas)
    return operator_lineage(config.source, tables, table_assets(config.sink, tables, config.rules) if outputs else None)
