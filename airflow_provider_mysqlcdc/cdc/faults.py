"""Named crash points, for the tests that prove exactly once across a kill -9 at a chosen moment.

A kill from outside lands wherever the process happens to be; the moments that matter for a
schema change (the new version recorded but not applied, applied but the micro-batch not
committed) last milliseconds. With ``MYSQLCDC_CRASH_AT=<point>`` in its environment, the
process kills its whole process group with SIGKILL when it reaches that point -- exactly as a
crash would, no cleanup. Unset (always, outside tests), a crash point costs one dict lookup.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "MYSQLCDC_CRASH_AT"

# The points, in the order a micro-batch with a DDL passes them.
SCHEMA_RECORDED = "schema-recorded"  # the history holds the new version; no sink has acted
BETWEEN_STEPS = "between-steps"  # a sink applied the DDL step, not yet the rows after it
SCHEMA_APPLIED = "schema-applied"  # the sink applied everything; Spark has not committed
# A micro-batch that takes over a re-snapshot: its records are built, no sink has acted ...
RESNAPSHOT_TAKEN = "resnapshot-taken"
# ... and: the sink committed it, the hand-off is not marked applied.
RESNAPSHOT_APPLIED = "resnapshot-applied"
# A snapshot job handing a batch to the running stream: a piece's rows written, not its manifest ...
HANDOFF_ROWS_WRITTEN = "handoff-rows-written"
# ... and: a piece handed over (its manifest written), the batch's next piece not read yet.
HANDOFF_PIECE_HANDED = "handoff-piece-handed"
POINTS = (
    SCHEMA_RECORDED,
    BETWEEN_STEPS,
    SCHEMA_APPLIED,
    RESNAPSHOT_TAKEN,
    RESNAPSHOT_APPLIED,
    HANDOFF_ROWS_WRITTEN,
    HANDOFF_PIECE_HANDED,
)


def crash_point(name: str) -> None:
    """SIGKILL this process group here if the environment asks for it."""
    if os.environ.get(CRASH_ENV) == name:
        os.killpg(os.getpgrp(), signal.SIGKILL)
