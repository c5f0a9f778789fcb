"""The metadata columns of change rows: what every sink and the stream's source agree on.

Kept apart from ``base.py`` so the helpers that build or reduce change rows
(``last_change.py``, ``resnapshot_rows.py``) do not import the sink base that uses them.
"""

# Flink CDC's RowKind letters in _op.
META_OP = "_op"  # +I, -U, +U, -D
META_DATABASE = "_database"
META_TABLE = "_table"
META_FILE = "_binlog_file"
META_POS = "_binlog_pos"  # start position of the row event
META_ROW = "_binlog_row"  # row index inside the event
META_GTID = "_gtid"
META_TS = "_event_time"  # event header time, TIMESTAMP
META_SEQ = "_seq"  # total order inside the micro-batch (binlog order, -U before +U)
META_COLUMNS = (META_OP, META_DATABASE, META_TABLE, META_FILE, META_POS, META_ROW, META_GTID, META_TS, META_SEQ)
