"""A stream query that must start again: its source reads a fixed table set.

A micro-batch that takes over a table the query does not read (a table added to the pipeline,
one created under its pattern) sets ``RESTART``; the next micro-batch of that query refuses to
run (it would skip the table's changes), and the stream job (``jobs/binlog_stream.py``) stops the
query and starts a new one from the checkpoint, which reads the table.
"""

from __future__ import annotations

import threading

RESTART = threading.Event()
RESTART_MARKER = "mysqlcdc: restart to capture added tables"


class StreamRestart(RuntimeError):
    """Raised by a micro-batch that must not run in this query (see ``RESTART``)."""
