"""A stream checkpoint on object storage, for a Spark that cannot write there itself.

Spark writes a query's checkpoint through Hadoop's file systems; ``s3://`` needs Hadoop's S3
connector jars, which a local Spark (and many clusters) does not have. The query then runs on
a local working copy of the checkpoint, and this module keeps the durable copy in the state
location (through fsspec, like every other state file) no further behind than exactness allows:

* ``restore`` makes the working copy equal to the durable one when the stream starts (a
  copy left on this host by an earlier run is never trusted: another host may have gone on);
* ``sync`` uploads what changed, oldest first, so the durable copy is always the working copy
  as it was at some earlier moment. It runs before a micro-batch's rows reach the sink (so
  ``offsets/<id>`` -- the batch's end -- is durable before anything depends on it), after
  each schema-history save, after the batch and after Spark's commit.

A crash between Spark's ``commits/<id>`` and its upload leaves a durable copy one commit
behind: the restarted query runs that micro-batch again with the same offsets, which the
sinks recognise (each records the micro-batches it applied), as after any crash before a
commit. Files Spark purged locally are deleted from the durable copy too.
"""

from __future__ import annotations

import hashlib
import logging
import os
import posixpath
import shutil
import tempfile
import threading

log = logging.getLogger(__name__)


def local_copy_dir(url: str) -> str:
    """This host's working copy of the checkpoint at ``url`` (one per URL)."""
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), "mysqlcdc-checkpoints", digest)


class CheckpointMirror:
    """The working copy ``local_dir`` of the durable checkpoint ``url``."""

    def __init__(self, url: str, local_dir: str | None = None) -> None:
        import fsspec

        self.url = url.rstrip("/")
        self.local_dir = local_dir or local_copy_dir(self.url)
        self.fs, self.root = fsspec.core.url_to_fs(self.url)
        self._synced: dict[str, tuple[int, int]] = {}  # relative path -> (size, mtime_ns) uploaded
        self._lock = threading.Lock()

    def restore(self) -> int:
        """The working copy becomes the durable checkpoint (empty when there is none); returns
        the number of files copied."""
        shutil.rmtree(self.local_dir, ignore_errors=True)
        os.makedirs(self.local_dir, exist_ok=True)
        self._synced.clear()
        copied = 0
        if self.fs.exists(self.root):
            for path in self.fs.find(self.root):
                rel = posixpath.relpath(path, self.root)
                target = os.path.join(self.local_dir, *rel.split("/"))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                self.fs.get_file(path, target)
                st = os.stat(target)
                self._synced[rel] = (st.st_size, st.st_mtime_ns)
                copied += 1
        log.info("stream checkpoint: working copy %s restored from %s (%d files)", self.local_dir, self.url, copied)
        return copied

    def _local_files(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for dirpath, _dirs, files in os.walk(self.local_dir):
            for name in files:
                if name.startswith(".") or ".tmp-" in name:
                    continue  # Hadoop's .crc side files and files still being written (renamed when done)
                full = os.path.join(dirpath, name)
                try:
                    st = os.stat(full)
                except FileNotFoundError:  # Spark renamed or purged it meanwhile
                    continue
                out[os.path.relpath(full, self.local_dir).replace(os.sep, "/")] = (st.st_size, st.st_mtime_ns)
        return out

    def sync(self) -> int:
        """Upload what is new or changed, oldest first; delete what Spark purged. Returns the
        number of files uploaded."""
        with self._lock:
            now = self._local_files()
            changed = sorted((meta[1], rel) for rel, meta in now.items() if self._synced.get(rel) != meta)
            for _mtime, rel in changed:
                target = posixpath.join(self.root, rel)
                self.fs.makedirs(posixpath.dirname(target), exist_ok=True)
                self.fs.put_file(os.path.join(self.local_dir, *rel.split("/")), target)
                self._synced[rel] = now[rel]
            for rel in [r for r in self._synced if r not in now]:
                try:
                    self.fs.rm(posixpath.join(self.root, rel))
                except FileNotFoundError:
                    pass
                del self._synced[rel]
            return len(changed)
