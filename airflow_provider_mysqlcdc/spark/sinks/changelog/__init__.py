"""The changelog sink (changelog-json lines or Parquet): ``sink.ChangelogSink``, ``lines`` (lines
built by Spark's JSON writer), ``direct`` (the stream's lines written by the source's tasks),
``schemas`` (the column layout documents the lines name)."""
