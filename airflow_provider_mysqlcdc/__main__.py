"""``python -m airflow_provider_mysqlcdc``: set up a pipeline's files, and check its source connection.

    python -m airflow_provider_mysqlcdc init .            # ./dags/mysql_cdc_pipeline.py, ./pipelines/shop_orders.yaml
    python -m airflow_provider_mysqlcdc init "$AIRFLOW_HOME" --force
    python -m airflow_provider_mysqlcdc check-connection mysql_cdc_default
    python -m airflow_provider_mysqlcdc maintain s3://lake/state/shop --aws-conn-id aws_default

``maintain``: an Iceberg sink's compaction and snapshot expiry (what the watchdog DAG's
``sink_maintenance`` task does), for the pipeline at a state location, now; safe beside its
running stream. Connections by id, as the tasks take them.

``init``: the files come from the installed package (``airflow_provider_mysqlcdc/templates``), so
they match its version. Existing files are left alone unless ``--force`` is given.

``check-connection``: the connection's *Test* (every server check the validate task runs) from a
shell. Airflow 3 ships with ``[core] test_connection = Disabled``, which greys out the UI's Test
button and makes ``airflow connections test`` refuse; this command needs no such setting and
also resolves connections from the environment (``AIRFLOW_CONN_<ID>``) or a secrets backend.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from .scaffold import ScaffoldError, write_templates


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit code (0 written, 1 refused)."""
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_mysqlcdc", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    init = sub.add_parser("init", help="write the DAG template and an example pipeline file into DIR")
    init.add_argument("dir", type=Path, help="the folder to write dags/ and pipelines/ into (e.g. $AIRFLOW_HOME)")
    init.add_argument("--force", action="store_true", help="overwrite files that exist")
    check = sub.add_parser("check-connection", help="log in to the source and run every server check")
    check.add_argument("conn_id", nargs="?", default="mysql_cdc_default", help="the connection id (mysql_cdc_default)")
    maint = sub.add_parser("maintain", help="compact and expire the Iceberg tables of the pipeline at STATE_LOCATION")
    maint.add_argument("state_location", help="the pipeline's state location")
    maint.add_argument("--sink-conn-id", help="the connection a PostgreSQL Iceberg catalog logs in with")
    maint.add_argument("--aws-conn-id", help="the aws connection of a warehouse or state location on S3")
    maint.add_argument("--tables", nargs="*", help="only these source tables (db.table)")
    maint.add_argument("--target-file-mb", type=int, default=128, help="compacted files' size (MiB, 128)")
    maint.add_argument("--min-files", type=int, default=16, help="small files that make a partition due (16)")
    maint.add_argument("--snapshot-max-age-s", type=float, default=3600, help="expire snapshots older (3600)")
    maint.add_argument("--retain-last", type=int, default=10, help="snapshots always kept (10)")
    args = parser.parse_args(argv)
    if args.command == "check-connection":
        return check_connection(args.conn_id)
    if args.command == "maintain":
        return maintain(args)
    try:
        written = write_templates(args.dir, force=args.force)
    except ScaffoldError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for path, what in written:
        print(f"wrote {path}: {what}")
    print(
        "next: put dags/ in Airflow's DAGs folder (or copy the file there), create the connections "
        "(https://github.com/mysqlcdc/airflow-provider-mysqlcdc/blob/main/docs/connection.md), then trigger mysql_cdc_pipeline in the UI; for the pipeline file: "
        f"python -m airflow_provider_mysqlcdc.pipelines dag-files {args.dir / 'pipelines'} {args.dir / 'dags'}"
    )
    return 0


def check_connection(conn_id: str) -> int:
    """Print the connection's test result; 0 when the server is ready for CDC, 1 otherwise."""
    from .hooks.mysql_cdc import MySqlCdcHook

    try:
        ok, message = MySqlCdcHook(conn_id).test_connection()
    except Exception as e:  # noqa: BLE001 - a missing connection or a bad extra is this command's answer
        if type(e).__name__ == "AirflowNotFoundException":
            env_name = f"AIRFLOW_CONN_{conn_id.upper()}"
            if os.environ.get(env_name):
                reason = _env_connection_problem(conn_id)
                fix = (
                    "pip install 'cryptography<51' into this Airflow (its Fernet does not work with cryptography 51)"
                    if "is_encrypted" in reason
                    else "give it as JSON with conn_type, host, port, login, password, schema and extra, or as a "
                    "mysql-cdc://user:password@host:port/db URI (see the connection docs)"
                )
                message = f"Airflow could not read {env_name} (it is set): {reason}. Fix: {fix}."
            else:
                message = (
                    f"found no connection {conn_id!r} here. Fix: create it (Admin > Connections, type MySQL CDC) "
                    f"in the Airflow this command runs with, or give it as {env_name}."
                )
        else:
            message = str(e) or type(e).__name__
        ok = False
    print(f"{conn_id}: {'ok' if ok else 'FAILED'}: {message}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def maintain(args: argparse.Namespace) -> int:
    """Run the maintenance; 0 done, 1 refused (the reason on stderr)."""
    from .cdc.errors import ConfigError
    from .cdc.store.object_store import use_credentials
    from .hooks.object_storage import storage_credentials
    from .operators.maintenance import maintain_pipeline
    from .spark.sinks.iceberg.maintenance import MaintenancePolicy, TableMaintenance

    try:
        policy = MaintenancePolicy(
            target_file_bytes=args.target_file_mb * 1024 * 1024,
            min_files=args.min_files,
            snapshot_max_age_s=args.snapshot_max_age_s,
            retain_last=args.retain_last,
        )
        storage = storage_credentials(args.aws_conn_id)
        use_credentials(storage)
        password = None
        if args.sink_conn_id:
            from airflow.sdk import BaseHook

            password = BaseHook.get_connection(args.sink_conn_id).password or ""
        reports = maintain_pipeline(
            args.state_location, sink_password=password, storage=storage, tables=args.tables, policy=policy
        )
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for r in reports:
        print(TableMaintenance(**r).line())
    return 0


def _env_connection_problem(conn_id: str) -> str:
    """Why Airflow's environment-variable backend skipped the connection (it logs that only at debug)."""
    try:
        from airflow.secrets.environment_variables import EnvironmentVariablesBackend

        EnvironmentVariablesBackend().get_connection(conn_id)
    except Exception as e:  # noqa: BLE001 - the reason is this command's answer
        return f"{type(e).__name__}: {e}"
    return "no reason given"


if __name__ == "__main__":
    sys.exit(main())
