"""spark-submit entry: see airflow_provider_mysqlcdc/jobs/binlog_stream.py (the operators submit that file)."""

import sys

from airflow_provider_mysqlcdc.jobs.binlog_stream import main

if __name__ == "__main__":
    sys.exit(main())
