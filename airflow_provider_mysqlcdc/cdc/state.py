"""The pipeline's state location: plan, per-batch result files, the finished-batch list.

A local directory or any fsspec URL. Files are written whole or not at all (temporary name,
then rename; on object stores, where rename is a copy, the single PUT is atomic anyway), so
a job that dies leaves no result file for its batch.
"""

from __future__ import annotations

import json
import posixpath
import re
import uuid
from typing import TYPE_CHECKING, Any, Iterable

from .chunks import FinishedBatch
from .errors import ConfigError

if TYPE_CHECKING:
    from .plan import Plan


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.#=-]+", "_", name)


class StateStore:
    def __init__(self, location: str) -> None:
        import fsspec

        self.location = location.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.location)

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def url(self, *parts: str) -> str:
        """The location as the user gave it (scheme kept), for Spark and delta-rs."""
        return "/".join([self.location, *parts])

    def write_json(self, rel: str, data: Any) -> None:
        target = self.path(rel)
        self.fs.makedirs(posixpath.dirname(target), exist_ok=True)
        tmp = f"{target}.tmp-{uuid.uuid4().hex[:8]}"
        with self.fs.open(tmp, "w") as f:
            f.write(json.dumps(data, indent=2, sort_keys=True))
        self.fs.mv(tmp, target)

    def read_json(self, rel: str) -> Any:
        with self.fs.open(self.path(rel), "r") as f:
            return json.load(f)

    def exists(self, rel: str) -> bool:
        return self.fs.exists(self.path(rel))

    def delete(self, rel: str) -> None:
        if self.fs.exists(self.path(rel)):
            self.fs.rm(self.path(rel), recursive=True)

    # --- well-known files ------------------------------------------------------------------

    @staticmethod
    def batch_result_rel(batch_id: str) -> str:
        return f"batches/{_safe(batch_id)}.json"

    def write_batch_result(self, result: dict[str, Any]) -> None:
        self.write_json(self.batch_result_rel(result["batch_id"]), result)

    def _unreadable(self, what: str, rel: str, reason: object, fix: str) -> ConfigError:
        """A state file that is there but cannot be used (cut short, overwritten, edited by hand)."""
        return ConfigError(f"the {what} {self.url(rel)} in the state location is unreadable ({reason}). Fix: {fix}")

    def _result(self, rel: str) -> dict[str, Any]:
        """A batch result file, checked for what the plan and the stream tasks read of it."""
        try:
            data = self.read_json(rel)
        except ValueError as e:
            data, problem = None, f"not JSON: {e}"
        else:
            problem = "need a JSON object with batch_id, ranges and high_watermark"
        if (
            isinstance(data, dict)
            and isinstance(data.get("batch_id"), str)
            and isinstance(data.get("ranges"), list)
            and isinstance(data.get("high_watermark"), dict)
        ):
            return data
        raise self._unreadable(
            "snapshot result",
            rel,
            problem,
            "delete that file, then run that batch's snapshot task again (clear its map index) "
            "so that it reads the batch and writes its result anew.",
        )

    def read_batch_result(self, batch_id: str) -> dict[str, Any] | None:
        rel = self.batch_result_rel(batch_id)
        return self._result(rel) if self.exists(rel) else None

    def batch_results(self) -> list[dict[str, Any]]:
        d = self.path("batches")
        if not self.fs.exists(d):
            return []
        return [
            self._result(posixpath.join("batches", posixpath.basename(p)))
            for p in sorted(self.fs.ls(d, detail=False))
            if p.endswith(".json")
        ]

    def finished_from_results(self) -> list[FinishedBatch]:
        """The finished-batch list the handoff needs, from the batch result files."""
        from .chunks import KeyRange
        from .offsets import BinlogOffset

        return [
            FinishedBatch(
                r["batch_id"],
                tuple(KeyRange.from_dict(x) for x in r["ranges"]),
                BinlogOffset.from_dict(r["high_watermark"]),
                r["high_watermark"].get("server") or None,
            )
            for r in self.batch_results()
        ]

    def write_finished(self, finished: Iterable[FinishedBatch]) -> None:
        self.write_json("finished_batches.json", [f.to_dict() for f in finished])

    def read_finished(self) -> list[FinishedBatch] | None:
        rel = "finished_batches.json"
        if not self.exists(rel):
            return None
        try:
            return [FinishedBatch.from_dict(d) for d in self.read_json(rel)]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise self._unreadable(
                "finished-batch list",
                rel,
                f"{type(e).__name__}: {e}",
                "restore the file from a backup, or trigger the pipeline with reset=true to "
                "load the tables again (the stream started from this list).",
            ) from None

    def write_plan(self, plan: "Plan") -> None:
        self.write_json("plan.json", plan.to_dict())

    def read_plan(self) -> "Plan | None":
        from .plan import Plan

        if not self.exists("plan.json"):
            return None
        try:
            return Plan.from_dict(self.read_json("plan.json"))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise self._unreadable(
                "plan",
                "plan.json",
                f"{type(e).__name__}: {e}",
                "trigger the pipeline with reset=true to plan and load the tables again (the "
                "batch results and the stream's checkpoint belong to this plan), or restore the "
                "file from a backup.",
            ) from None

    # --- who wrote a batch, and whether the stream owns the sink --------------------------

    @staticmethod
    def batch_owner_rel(batch_id: str) -> str:
        return f"batch_owners/{_safe(batch_id)}.json"

    def write_batch_owner(self, batch_id: str, owner: dict[str, Any]) -> None:
        """Which task instance snapshotted a batch (no secrets: dag, run, map index), so a
        cleared task can tell "the user asks me to read my batch again" from "an earlier run
        already did it"."""
        self.write_json(self.batch_owner_rel(batch_id), {"batch_id": batch_id, **owner})

    def read_batch_owner(self, batch_id: str) -> dict[str, Any] | None:
        rel = self.batch_owner_rel(batch_id)
        return self.read_json(rel) if self.exists(rel) else None

    def stream_started(self) -> bool:
        """True once the binlog stream of this state location has started (its checkpoint
        exists): from then on the stream is the only writer of the sink."""
        return self.exists("stream/checkpoint")

    RESTART_REQUEST = "stream/restart_request.json"

    def request_stream_restart(self, reason: str) -> None:
        """Ask a running stream job to start its query again (it re-reads ``pipeline.json``)."""
        import time

        self.write_json(self.RESTART_REQUEST, {"reason": reason, "at": time.time()})

    STOPPED_ON_REQUEST = "stream/stopped_on_request.json"

    def request_stream_stop(self, reason: str) -> None:
        """Ask the running stream job to stop between micro-batches, wherever its driver runs (a
        cluster node has no signal from us: it polls this request with the restart one)."""
        import time

        self.write_json(self.RESTART_REQUEST, {"reason": reason, "at": time.time(), "action": "stop"})

    def clear_stream_requests(self) -> None:
        """A launch starts a stream that should run: no stop request or stopped mark left from before."""
        for rel in (self.RESTART_REQUEST, self.STOPPED_ON_REQUEST):
            if self.exists(rel):
                self.delete(rel)

    def take_restart_request(self) -> dict[str, Any] | None:
        """The pending request, removed (the stream job polls this)."""
        if not self.exists(self.RESTART_REQUEST):
            return None
        try:
            request = self.read_json(self.RESTART_REQUEST)
        except (OSError, ValueError):
            request = {"reason": "unreadable request"}
        self.delete(self.RESTART_REQUEST)
        return request

    def checkpoint_url(self) -> str:
        return self.url("stream", "checkpoint")
