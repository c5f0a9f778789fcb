"""Offsets a query's Spark checkpoint holds: where a micro-batch ends, where the last commit ended.

Spark writes ``offsets/<id>`` (a version line, the batch's metadata line, one offset line per
source: this query has one) before it runs micro-batch ``id``, and ``commits/<id>`` once the
batch is done, so a replayed micro-batch finds the same end as the first run.
"""

from __future__ import annotations

import json
import posixpath

from .stream_offset import StreamOffset


def batch_end_offset(checkpoint: str, batch_id: int) -> StreamOffset | None:
    """The end of micro-batch ``batch_id`` from the checkpoint's offsets log (version line,
    metadata line, one offset line for this query's one source)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(checkpoint)
    path = posixpath.join(root, "offsets", str(int(batch_id)))
    if not fs.exists(path):
        return None
    with fs.open(path, "r") as f:
        lines = [ln for ln in f.read().splitlines() if ln.strip()]
    return StreamOffset.from_dict(json.loads(lines[-1]))


def committed_end(checkpoint: str) -> StreamOffset | None:
    """The end offset of the checkpoint's last committed micro-batch."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(checkpoint)
    commits = posixpath.join(root, "commits")
    if not fs.exists(commits):
        return None
    ids = [int(n) for n in (posixpath.basename(str(p).rstrip("/")) for p in fs.ls(commits, detail=False))
           if n.isdigit()]
    return batch_end_offset(checkpoint, max(ids)) if ids else None
