"""The stream data path: the binlog as a Spark streaming source, and the query that feeds the sinks."""
