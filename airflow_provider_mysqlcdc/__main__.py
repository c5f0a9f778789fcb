"""``python -m airflow_provider_mysqlcdc init DIR``: write the DAG template and an example pipeline file.

    python -m airflow_provider_mysqlcdc init .            # ./dags/mysql_cdc_pipeline.py, ./pipelines/shop_orders.yaml
    python -m airflow_provider_mysqlcdc init "$AIRFLOW_HOME" --force

The files come from the installed package (``airflow_provider_mysqlcdc/templates``), so they match
its version. Existing files are left alone unless ``--force`` is given.
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
