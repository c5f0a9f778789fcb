"""spark-submit entry: see airflow_provider_mysqlcdc/jobs/snapshot_chunks.py (the operators submit that file)."""

import sys

from airflow_provider_mysqlcdc.jobs.snapshot_chunks import main

if __name__ == "__main__":
    sys.exit(main())
