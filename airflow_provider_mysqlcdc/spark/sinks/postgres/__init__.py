"""The PostgreSQL sink (psycopg 3): ``sink.PostgresSink`` (snapshots, the merge of a micro-batch,
schema steps), ``tables`` (type mapping and the sink tables), ``copy`` (COPY and staging),
``connection`` (the conninfo without its password)."""
