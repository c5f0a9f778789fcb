"""One running stream per pipeline, whatever host starts it: a lease in the state location.

A pid file only says what runs on *this* host; two Airflow workers on two hosts (Celery,
Kubernetes) could each start the stream, and two streams would write the sink at once. The
lease is a numbered file under ``stream/lease/`` that the running stream renews every third of
its time to live:

* taking it means creating the next number **exclusively** (``O_EXCL`` on a local path, a
  conditional PUT -- ``If-None-Match: *`` -- on S3), so of two launchers racing for the same
  number exactly one wins; the loser is told who holds it;
* a lease whose holder stopped renewing is taken over only once it has expired -- except on
  the holder's own host, where a holder process that is gone (killed, crashed) frees it at
  once, so a relaunch on the same host need not wait;
* the holder checks, after each renewal, that no later number exists: a holder that could not
  renew in time (a long pause, a partition) learns it lost the lease and stops.

Expiry compares the writer's clock with the reader's: keep hosts' clocks in sync (NTP) and the
time to live well above any skew (default 60 s).
"""

from __future__ import annotations

import json
import os
import posixpath
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CdcError

if TYPE_CHECKING:
    from ..state import StateStore

LEASE_DIR = "stream/lease"
HOST_ID_ENV = "MYSQLCDC_HOST_ID"  # tests run two "hosts" on one machine
DEFAULT_TTL_S = 60.0


def host_id() -> str:
    return os.environ.get(HOST_ID_ENV) or socket.gethostname()


def _dead_here(data: dict[str, Any]) -> bool:
    """The holder ran on this host and its process is gone (or is another program now)."""
    owner = data.get("owner") or {}
    if owner.get("host") != host_id() or not owner.get("pid"):
        return False
    import psutil

    try:
        proc = psutil.Process(int(owner["pid"]))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return True
        started = owner.get("started_at")
        return started is not None and abs(proc.create_time() - float(started)) > 2.0  # pid reused
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return True


class LeaseHeld(CdcError):
    """Another stream holds the pipeline's lease."""


@dataclass
class StreamLease:
    """The lease of the stream of one state location, as one would-be holder sees it."""

    state: "StateStore"
    ttl_s: float = DEFAULT_TTL_S
    owner: dict[str, Any] = field(default_factory=dict)
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    generation: int | None = None

    def _path(self, gen: int) -> str:
        return self.state.path(LEASE_DIR, f"{gen:012d}.json")

    def _generations(self) -> list[int]:
        root = self.state.path(LEASE_DIR)
        try:
            names = self.state.fs.ls(root, detail=False)
        except FileNotFoundError:
            return []
        out = []
        for n in names:
            base = posixpath.basename(str(n).rstrip("/"))
            if base.endswith(".json") and base[:-5].isdigit():
                out.append(int(base[:-5]))
        return sorted(out)

    def _read(self, gen: int) -> dict[str, Any] | None:
        try:
            with self.state.fs.open(self._path(gen), "rb") as f:
                return json.loads(f.read())
        except (FileNotFoundError, ValueError):
            return None

    def current(self) -> tuple[int, dict[str, Any]] | None:
        """The latest lease (number and content), expired or not; None if there never was one."""
        self._refresh()
        for gen in reversed(self._generations()):
            data = self._read(gen)
            if data is not None:
                return gen, data
        return None

    def _refresh(self) -> None:
        invalidate = getattr(self.state.fs, "invalidate_cache", None)
        if invalidate is not None:
            invalidate()

    @staticmethod
    def describe(data: dict[str, Any]) -> str:
        owner = data.get("owner") or {}
        left = float(data.get("expires_at", 0)) - time.time()
        return (
            f"host {owner.get('host', '?')}, pid {owner.get('pid', '?')}, "
            f"{'valid for another %.0f s' % left if left > 0 else 'expired %.0f s ago' % -left}"
        )

    def holder(self) -> dict[str, Any] | None:
        """The valid lease of another holder, or None (free, expired, or ours)."""
        cur = self.current()
        if cur is None:
            return None
        _gen, data = cur
        if data.get("token") == self.token or not self._valid(data):
            return None
        return data

    @staticmethod
    def _valid(data: dict[str, Any]) -> bool:
        return float(data.get("expires_at", 0)) > time.time() and not _dead_here(data)

    def _body(self) -> bytes:
        import psutil

        owner = {"host": host_id(), "pid": os.getpid(), "started_at": psutil.Process().create_time(), **self.owner}
        now = time.time()
        return json.dumps(
            {
                "owner": owner,
                "token": self.token,
                "renewed_at": now,
                "expires_at": now + self.ttl_s,
                "ttl_s": self.ttl_s,
            },
            sort_keys=True,
        ).encode()

    def _age_s(self, gen: int) -> float:
        """Seconds since the lease file was last written (a naive time is the local clock's)."""
        return time.time() - self.state.fs.modified(self._path(gen)).timestamp()

    def acquire(self) -> int:
        """Take the lease, or raise ``LeaseHeld`` naming its holder."""
        cur = self.current()
        gens = self._generations()
        if gens and (cur is None or cur[0] < gens[-1]):
            # The newest lease file cannot be read: a launcher killed while creating it (renewals
            # replace it whole). Fresh, it may still be being written; older than a lease lives,
            # nobody holds it.
            top = gens[-1]
            if self._age_s(top) < self.ttl_s:
                raise LeaseHeld(
                    f"the stream's lease {self.state.url(LEASE_DIR, f'{top:012d}.json')} is unreadable "
                    "(being written, or left half-written by a launcher that died). Fix: launch again "
                    f"in a moment; after {self.ttl_s:.0f} s it is taken over, or delete that file if no "
                    "stream of this pipeline runs."
                )
            cur = None
            nxt = top + 1
        elif cur is not None:
            gen, data = cur
            if data.get("token") != self.token and self._valid(data):
                raise LeaseHeld(
                    f"the stream of {self.state.location} already runs ({self.describe(data)}). Not "
                    "starting a second one: two streams would write the sink at once. Fix: nothing, if "
                    "that stream is meant to run; else stop it there, or wait until its lease expires "
                    f"(it renews every {self.ttl_s / 3:.0f} s while it runs)."
                )
            nxt = gen + 1
        else:
            nxt = 1
        self.state.fs.makedirs(self.state.path(LEASE_DIR), exist_ok=True)
        try:
            with self.state.fs.open(self._path(nxt), "xb") as f:
                f.write(self._body())
        except FileExistsError:
            won = self._read(nxt) or {}
            raise LeaseHeld(
                f"the stream of {self.state.location} was just started by another launcher "
                f"({self.describe(won) if won else 'its lease is being written'}). Not starting a "
                "second one. Fix: nothing, if that stream is meant to run; else stop it there."
            ) from None
        self.generation = nxt
        self._forget_old(nxt)
        return nxt

    def renew(self) -> bool:
        """Extend the lease; False when it was taken over (stop streaming then)."""
        if self.generation is None:
            return False
        self._refresh()
        if any(g > self.generation for g in self._generations()):
            return False
        # replaced whole (a temporary file renamed over it; one PUT on an object store): a holder
        # killed while renewing leaves its last complete lease, never half a file
        path = self._path(self.generation)
        tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
        with self.state.fs.open(tmp, "wb") as f:
            f.write(self._body())
        self.state.fs.mv(tmp, path)
        self._refresh()
        return not any(g > self.generation for g in self._generations())

    def release(self) -> None:
        """Give the lease up (a clean stop): the next launcher need not wait for its expiry."""
        if self.generation is None:
            return
        data = self._read(self.generation)
        if data is not None and data.get("token") == self.token:
            released = dict(data, expires_at=0.0, released=True)
            with self.state.fs.open(self._path(self.generation), "wb") as f:
                f.write(json.dumps(released, sort_keys=True).encode())
        self.generation = None

    def _forget_old(self, keep_from: int) -> None:
        for gen in self._generations():
            if gen < keep_from - 1:
                try:
                    self.state.fs.rm(self._path(gen))
                except FileNotFoundError:
                    pass
