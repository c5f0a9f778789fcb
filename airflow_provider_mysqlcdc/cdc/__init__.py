"""The CDC engine: planning, consistent chunk reads, binlog decoding, handoff.

Runs on Spark executors as well as on Airflow workers, so it never imports Airflow
(and it never imports Spark either: that lives in ``airflow_provider_mysqlcdc.spark``).
"""
