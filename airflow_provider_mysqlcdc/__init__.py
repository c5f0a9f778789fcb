"""mysqlcdc: Flink-CDC-grade MySQL change data capture for Airflow + Spark.

``get_provider_info()`` is what Airflow's providers manager reads (entry point
``apache_airflow_provider``): the connection type with its form fields, hooks and operators.
Importing this package does not import Airflow, so Spark executors can import the engine.

``PUBLIC_API`` is the declared public surface: every name a user may import, with the module it lives
in, also importable from here (``from airflow_provider_mysqlcdc import MySqlCdcPlanOperator``). A name
is imported on first use (PEP 562 ``__getattr__``), so that still imports no Airflow. Everything not
listed is private and may move between releases; ``docs/api.md`` documents the list, and a unit test
keeps the two equal and imports every name.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

CONN_TYPE = "mysql_cdc"

# name -> the module (below this package) that defines it; grouped as docs/api.md groups them.
PUBLIC_API: dict[str, str] = {
    # Operators and sensor: the pipeline's tasks.
    "MySqlCdcValidateOperator": "operators.validate",
    "MySqlCdcPlanOperator": "operators.plan",
    "MySqlCdcSnapshotOperator": "operators.snapshot",
    "MySqlCdcStreamOperator": "operators.stream",
    "MySqlCdcConsistencyCheckOperator": "operators.consistency",
    "MySqlCdcSinkMaintenanceOperator": "operators.maintenance",
    "MySqlCdcFindPipelinesOperator": "operators.find_pipelines",
    "MySqlCdcStreamSensor": "sensors.stream",
    # Hooks: the source connection, the stream's process, object-storage credentials.
    "MySqlCdcHook": "hooks.mysql_cdc",
    "StreamControl": "hooks.stream",
    "storage_credentials": "hooks.object_storage",
    # DAG builders and pipeline files.
    "pipeline_dags": "pipelines.factory",
    "build_pipeline_dags": "pipelines.dag_builder",
    "build_streams_watchdog": "pipelines.dag_builder",
    "load_pipelines": "pipelines.loader",
    "load_file": "pipelines.loader",
    # Engine entry points (no Airflow).
    "SourceConfig": "cdc.source.config",
    "SplitOptions": "cdc.source.config",
    "PipelineConfig": "cdc.pipeline",
    "load_pipeline_config": "cdc.pipeline",
    "StateStore": "cdc.state",
    "CdcError": "cdc.errors",
    "ConfigError": "cdc.errors",
    "validate_server": "cdc.source.validation",
    "discover_tables": "cdc.source.discovery",
    "ChunkSplitter": "cdc.snapshot.splitter",
    "group_chunks": "cdc.chunks",
    "build_plan": "cdc.snapshot.planning",
    # Spark entry points.
    "ConsistentBatchReader": "spark.snapshot.batch_reader",
    "run_snapshot_batch": "spark.snapshot.job",
    "start_stream": "spark.stream.query",
    "run_check": "spark.consistency",
}

__all__ = ["CONN_TYPE", "PUBLIC_API", "get_provider_info", *PUBLIC_API]


def __getattr__(name: str) -> Any:
    module = PUBLIC_API.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *PUBLIC_API})


def get_provider_info() -> dict[str, Any]:
    text = {"type": ["string", "null"]}
    return {
        "package-name": "airflow-provider-mysqlcdc",
        "name": "MySQL CDC",
        "description": "Lock-free, parallel MySQL/MariaDB change data capture into Delta Lake, PostgreSQL "
        "or a changelog, on Spark: chunked snapshot handed off to a binlog stream.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "MySQL CDC",
                "tags": ["software"],
                "external-doc-url": "https://github.com/mysqlcdc/airflow-provider-mysqlcdc",
            }
        ],
        "hooks": [{"integration-name": "MySQL CDC", "python-modules": ["airflow_provider_mysqlcdc.hooks.mysql_cdc"]}],
        "operators": [
            {
                "integration-name": "MySQL CDC",
                "python-modules": [
                    "airflow_provider_mysqlcdc.operators.validate",
                    "airflow_provider_mysqlcdc.operators.plan",
                    "airflow_provider_mysqlcdc.operators.snapshot",
                    "airflow_provider_mysqlcdc.operators.stream",
                ],
            }
        ],
        "sensors": [{"integration-name": "MySQL CDC", "python-modules": ["airflow_provider_mysqlcdc.sensors.stream"]}],
        "extra-links": ["airflow_provider_mysqlcdc.links.StreamSparkUiLink"],
        "connection-types": [
            {
                "hook-class-name": "airflow_provider_mysqlcdc.hooks.mysql_cdc.MySqlCdcHook",
                "hook-name": "MySQL CDC",
                "connection-type": CONN_TYPE,
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {"schema": "Default database", "login": "User"},
                    "placeholders": {
                        "host": "mysql.example.com",
                        "port": "3306",
                        "login": "cdc_user",
                        "schema": "shop (qualifies table names given without a database)",
                    },
                },
                "conn-fields": {
                    "server_id_range": {
                        "label": "Replication server ids",
                        "description": "Ids this pipeline's binlog readers may use, e.g. 5400-5499: one per concurrent "
                        "reader (stream, each snapshot batch). No other replica of the server may use them.",
                        "schema": {"type": ["string", "null"], "default": "5400-5499"},
                    },
                    "server_time_zone": {
                        "label": "Server time zone",
                        "description": "The server's time zone (IANA name, e.g. Europe/Berlin): how TIMESTAMP values in "
                        "the binlog are read. Must match the server's time_zone.",
                        "schema": {"type": ["string", "null"], "default": "UTC"},
                    },
                    "ssl_mode": {
                        "label": "TLS mode",
                        "description": "With TLS (any TLS field set, or this one): verify-full (default) checks "
                        "the server's certificate and host name, verify-ca the certificate only, "
                        "trust encrypts without checking (a man in the middle can read "
                        "everything). Empty and no TLS field: TLS only if the server offers it.",
                        "schema": {
                            "type": ["string", "null"],
                            "enum": [None, "verify-full", "verify-ca", "trust"],
                            "default": None,
                        },
                    },
                    "ssl_ca": {
                        "label": "TLS CA file",
                        "description": "Path of the CA certificate (PEM) on the workers "
                        "and Spark nodes: the server's certificate is verified against it (without it, against "
                        "the system's CAs).",
                        "schema": text,
                    },
                    "ssl_cert": {
                        "label": "TLS client certificate file",
                        "description": "Path of a client certificate "
                        "(PEM) for the binlog connections. The snapshot's JDBC reads cannot use one: leave "
                        "empty unless the server requires it.",
                        "schema": text,
                    },
                    "ssl_key": {
                        "label": "TLS client key file",
                        "description": "Path of the client certificate's key (PEM), with TLS client certificate file.",
                        "schema": text,
                    },
                    "ssl_verify_identity": {
                        "label": "Verify server host name",
                        "description": "Also check that the certificate names the host you "
                        "connect to (off: as ssl_mode verify-ca).",
                        "schema": {"type": ["boolean", "null"], "default": True},
                    },
                    "jdbc_fetch_size": {
                        "label": "JDBC fetch size",
                        "description": "Rows per round trip of the snapshot's JDBC reads.",
                        "schema": {"type": ["integer", "null"], "default": 10000},
                    },
                    "snapshot_reader": {
                        "label": "Snapshot reader",
                        "description": "How the snapshot's SELECTs are "
                        "read: auto (Arrow through connectorx where it can be used: no TLS, a Delta "
                        "sink; else JDBC), jdbc (Spark's JDBC reader) or arrow.",
                        "schema": {
                            "type": ["string", "null"],
                            "enum": ["auto", "jdbc", "arrow", None],
                            "default": "auto",
                        },
                    },
                },
            }
        ],
    }
