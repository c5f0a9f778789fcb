"""Extra links on the pipeline's tasks: buttons in a task instance's view.

Airflow computes a link once, when the task ends, on the worker (the live operator is at
hand there, with its rendered arguments), and stores it as an XCom the UI reads.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink


class StreamSparkUiLink(BaseOperatorLink):
    """The Spark UI of the running binlog stream (its driver's address from ``status.json``):
    micro-batches, their durations and input rows. Empty while the stream has not written a
    status, or when its Spark UI is disabled."""

    name = "Stream Spark UI"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from .cdc.state import StateStore
        from .spark.runtime.stream_status import read_status

        location = getattr(operator, "state_location", None)
        if not location or "{{" in str(location):
            return ""
        try:
            status = read_status(StateStore(str(location)))
        except Exception:  # e.g. object storage this process holds no credentials for: no link
            return ""
        return (status.ui_url or "") if status is not None else ""
