"""The stream data path: the binlog as a Spark streaming source, and the query that feeds the sinks.

At the top the source (``binlog_source``, the ``mysqlcdc-binlog`` data source Spark runs), its
options (``settings``) and the query (``query``: foreachBatch into the sink). The rooms, in the
order a micro-batch meets them:

- ``server/``: the driver's dealings with the source server: where a new query starts
  (``startup``), which server the offsets belong to after a failover (``placement``), the short
  calls (``binlog_server``) and their retries (``reconnect``);
- ``planning/``: where a micro-batch ends (``batch_planning``), the first plan made while Spark
  starts the source (``first_plan``), the next one planned while the current one runs
  (``plan_ahead``);
- ``offsets/``: the stream offset as Spark checkpoints it (``stream_offset``), what the checkpoint
  holds (``checkpoint_offsets``), its durable copy on object storage (``checkpoint_mirror``);
- ``reading/``: the executor side: a binlog range into Arrow (``binlog_read``), the source's
  columnar layout and typed change rows (``change_rows``), layouts per table version
  (``layout_book``);
- ``tables/``: the table set and its schemas while the query runs: tables taken up or dropped
  (``table_set``), read by the stream job itself (``table_reads``), re-read batches taken over
  (``resnapshots``), the schema history (``schema_history``), a query that must start again
  (``restart``).
"""
