"""The file writers the sinks share: ``arrow`` (Arrow/Parquet files from Spark tasks, the file
records and stats), ``spark_parquet`` (Spark's own Parquet writer where it can reach the storage),
``snapshot`` (a snapshot batch's files, and their corrections after the window)."""
