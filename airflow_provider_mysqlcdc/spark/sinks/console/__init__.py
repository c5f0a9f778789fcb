"""The console sink (changes printed to the Spark log, debugging only): ``sink.ConsoleSink``,
``direct`` (the lines built in the source's tasks)."""
