"""Find pipelines' state locations under folders (local or object storage).

One watchdog for every pipeline of a platform needs the pipelines' state locations. Listing
them by hand goes stale as pipelines are added, so a watchdog can also be given folders to
search: every folder holding a ``pipeline.json`` (which the plan task writes into each state
location) is a pipeline. The search goes a few levels deep only and never descends into a
state location, whose checkpoints, hand-offs and results hold many small files.
"""

from __future__ import annotations

import posixpath
from typing import Iterable, Sequence

from ..errors import ConfigError

CONFIG_NAME = "pipeline.json"
DEFAULT_DEPTH = 3


def _url(location: str, fs_path: str) -> str:
    """``fs_path`` (as fsspec lists it, without the scheme) with ``location``'s scheme back on."""
    if "://" not in location:
        return fs_path
    scheme = location.split("://", 1)[0]
    return f"{scheme}://{fs_path.lstrip('/')}"


def find_state_locations(roots: Sequence[str], depth: int = DEFAULT_DEPTH) -> list[str]:
    """Every state location at or below one of ``roots`` (at most ``depth`` levels down), sorted.

    A root that does not exist fails with its name: a typo there would silently leave every
    pipeline below it unwatched.
    """
    import fsspec

    found: set[str] = set()
    for root in roots:
        root = root.rstrip("/")
        fs, path = fsspec.core.url_to_fs(root)
        if not fs.exists(path):
            raise ConfigError(
                f"search root {root!r} does not exist (or cannot be read with the credentials "
                "given). Fix: give an existing folder that holds pipelines' state locations, "
                "or the aws_conn_id of its bucket."
            )
        found.update(_url(root, p) for p in _walk(fs, path, depth))
    return sorted(found)


def _walk(fs, path: str, depth: int) -> Iterable[str]:
    if fs.exists(posixpath.join(path, CONFIG_NAME)):
        yield path
        return  # a state location's own folders are not searched
    if depth <= 0:
        return
    for entry in fs.ls(path, detail=True):
        if entry.get("type") == "directory":
            yield from _walk(fs, entry["name"].rstrip("/"), depth - 1)


def unique_locations(given: Iterable[str], found: Iterable[str]) -> list[str]:
    """``given`` then ``found``, each location once (trailing slashes ignored), in that order."""
    out: list[str] = []
    seen: set[str] = set()
    for loc in [*given, *found]:
        key = loc.rstrip("/")
        if key and key not in seen:
            seen.add(key)
            out.append(key)
    return out
