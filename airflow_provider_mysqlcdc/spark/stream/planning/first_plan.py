"""The query's first catch-up plan, made by the process that starts the query while Spark starts its source.

Why: after ``writeStream.start()`` Spark starts the source's driver side in a new Python
interpreter (``python_streaming_source_runner``: importing PySpark and PyArrow alone takes
~0.55 s here), and only then asks for the first offset. Far behind the head, answering means
the server walks the first micro-batch's events to name its cuts (0.2-0.5 s) while no task
runs. The process that starts the query knows where the query will begin -- the end of the
checkpoint's last offsets entry on a restart, the startup offset of a new query -- so it plans
that micro-batch on a thread meanwhile and leaves the plan in a local file that the source's
first ``latestOffset`` takes (the default stream bench, 7 runs each: median 1.89 s with it,
2.18 s without).

Everything here is advisory, like ``plan_ahead``: a plan holds only positions the server
named, and the source uses it only for the start it was made from and when it ends at or
before the head that call sees; anything else (no directory -- the source's driver on another
host --, a failed plan, a start that needs a binlog scan to find or that moves) means the
source plans as it always did. The file holds offsets only, never the password.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from typing import Any, Callable

from ..offsets.stream_offset import StreamOffset
from .batch_planning import CatchupPlan

log = logging.getLogger(__name__)

PLAN_FILE = "plan.json"
FAILED_FILE = "failed"
WAIT_S = 30.0  # the launcher's walk normally takes < 1 s; past this the source plans itself


def expected_start(settings: Any, checkpoint: str | None) -> StreamOffset | None:
    """Where the query's first ``latestOffset`` will start, or None when the launcher cannot
    know it without racing the source.

    A restart starts where the checkpoint's last offsets entry ends: Spark first replays an
    uncommitted entry with its recorded range, then asks from its end. A new query starts at
    its startup offset, found here only for the modes whose answer does not move and needs no
    binlog scan (``initial``, ``specific-offset`` by file): the moving modes' answer is asked
    once and kept in the checkpoint by the source itself (``startup.stable_initial_offset``),
    and a second asker could record another one.
    """
    from ..offsets.checkpoint_offsets import latest_end
    from ..server.startup import initial_offset

    if checkpoint:
        end = latest_end(checkpoint)
        if end is not None:
            return end
    mode = settings.startup_mode
    if mode == "initial" or (mode == "specific-offset" and (settings.startup_offset or {}).get("file")):
        return initial_offset(settings)
    return None


def plan_from_options(
    options: dict[str, str], checkpoint: str | None
) -> tuple[StreamOffset, CatchupPlan | None] | None:
    """The expected start and its catch-up plan (None: not behind enough), with the settings the
    source will parse from the same options."""
    from ..server.binlog_server import head_offset
    from ..settings import settings_from_options
    from .batch_planning import plan_catchup

    settings = settings_from_options(options)
    start = expected_start(settings, checkpoint)
    if start is None or not _on_this_server(settings, start):
        return None
    return start, plan_catchup(settings, start, head_offset(settings.source))


def _on_this_server(settings: Any, start: StreamOffset) -> bool:
    """Whether ``start`` is an offset of the server behind the endpoint now: after a failover the
    source first places it on the new server (``placement.py``), so there is nothing to plan here."""
    if start.server is None:
        return True
    import contextlib

    from ....cdc.binlog.failover import server_identity
    from ....cdc.source.server import server_version

    with contextlib.closing(settings.source.connect_binlog()) as conn:
        return str(server_identity(conn, server_version(conn))) == start.server


def encode(start: StreamOffset, plan: CatchupPlan | None) -> str:
    return json.dumps(
        {
            "start": start.to_dict(),
            "plan": None
            if plan is None
            else {
                "end": plan.end.to_dict(),
                "cuts": [StreamOffset.boundary(c).to_dict() for c in plan.cuts],
                "behind_bytes": plan.behind_bytes,
            },
        }
    )


def decode(text: str) -> tuple[StreamOffset, CatchupPlan | None]:
    d = json.loads(text)
    p = d["plan"]
    plan = (
        None
        if p is None
        else CatchupPlan(
            StreamOffset.from_dict(p["end"]),
            tuple(StreamOffset.from_dict(c).at for c in p["cuts"]),
            int(p["behind_bytes"]),
        )
    )
    return StreamOffset.from_dict(d["start"]), plan


def new_directory() -> str:
    """A private directory for the plan (its path is the source's ``first_plan_dir`` option);
    removed by the source when it looks at it, else when this process exits."""
    where = tempfile.mkdtemp(prefix="mysqlcdc-first-plan-")
    atexit.register(discard, where)
    return where


def begin(where: str, make: Callable[[], tuple[StreamOffset, CatchupPlan | None] | None]) -> None:
    """Run ``make`` (the expected start and its plan, or None) on a daemon thread and leave its
    answer in ``where``."""

    def run() -> None:
        try:
            made = make()
        except Exception as e:  # noqa: BLE001 -- the source then plans itself
            log.info(
                "binlog stream: planning the first micro-batch ahead failed (%s); the source plans it", type(e).__name__
            )
            made = None
        if made is None:
            _write(where, FAILED_FILE, "")
        else:
            _write(where, PLAN_FILE, encode(*made))

    threading.Thread(target=run, name="mysqlcdc-first-plan", daemon=True).start()


def discard(where: str | None) -> None:
    """Remove a plan's directory (the source did not need it)."""
    if where:
        shutil.rmtree(where, ignore_errors=True)


def _write(where: str, name: str, text: str) -> None:
    tmp = os.path.join(where, f".{name}.tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(where, name))
    except OSError:  # the source has taken (and removed) the directory already
        pass


def take(where: str | None, start: StreamOffset, wait_s: float = WAIT_S) -> CatchupPlan | None:
    """The plan left in ``where`` if it was made from ``start`` (waiting up to ``wait_s`` while
    it is being made); None otherwise. The directory is removed either way."""
    if not where or not os.path.isdir(where):
        return None  # not made on this host (or taken already)
    try:
        deadline = time.monotonic() + wait_s
        plan_file = os.path.join(where, PLAN_FILE)
        while not os.path.exists(plan_file):
            if os.path.exists(os.path.join(where, FAILED_FILE)) or time.monotonic() > deadline:
                return None
            time.sleep(0.005)
        with open(plan_file) as f:
            made_from, plan = decode(f.read())
        return plan if made_from == start else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        discard(where)
