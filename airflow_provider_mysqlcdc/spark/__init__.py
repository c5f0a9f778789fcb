"""Spark side of the pipeline, grouped by data path. Knows Spark, never Airflow.

- ``snapshot/``: the consistent batch reader, materializing a batch, the snapshot job body.
- ``stream/``: the binlog as a streaming data source (offsets, startup, micro-batch planning,
  reading a range) and the streaming query that feeds the sinks.
- ``sinks/``: one module per sink, and what they share.
- ``runtime/``: sessions, launching and supervising the long-lived stream, its status.
- ``types.py``: the Spark side of the type mapping, used by both data paths.
"""
