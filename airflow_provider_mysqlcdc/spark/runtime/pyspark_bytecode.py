"""Bytecode for the Python zips Spark puts first on every Python process it starts.

Spark starts each Python process it needs -- the streaming source's driver-side runner, the
executors' worker daemon, the data source planners -- with ``$SPARK_HOME/python/lib/pyspark.zip``
and the py4j zip first on ``PYTHONPATH`` (``PythonUtils.sparkPythonPath``; no setting changes
that order). Those zips hold sources only and Python never writes bytecode into a zip, so every
such process compiles PySpark again before it does anything: 0.45-0.8 s of one core here, most of
a stream's start-up (a 200k-change catch-up went from 3.42 s to 2.91 s, median of 4 paired runs).

Python's ``zipimport`` does read ``.pyc`` entries stored next to the sources, so this module adds
them, once, where Spark is installed. They are hash-checked pycs (PEP 552): Python verifies each
against its source in the zip, and a Python of another version ignores them (wrong magic number)
and compiles as before -- the zip never behaves differently, it only starts faster for the Python
that compiled it. The zip is rewritten beside itself and swapped in with one rename; run it when
no Spark job is using this installation (as part of installing it), because a Python process that
already read the old zip's directory would find the new one's offsets.
"""

from __future__ import annotations

import argparse
import importlib.util
import marshal
import os
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from importlib.util import MAGIC_NUMBER, source_hash
from pathlib import Path
from typing import Iterable, Iterator

# What Spark's PythonUtils.sparkPythonPath puts on the path, relative to SPARK_HOME.
ZIP_DIR = ("python", "lib")
ZIP_PATTERNS = ("pyspark.zip", "py4j-*-src.zip")
HINT = "python -m airflow_provider_mysqlcdc.spark.runtime.pyspark_bytecode"


class BytecodeError(Exception):
    """The zips cannot be found or rewritten; the message says what to change."""


@dataclass(frozen=True)
class ZipState:
    """How much of one zip's Python source has bytecode this interpreter can use."""

    path: Path
    sources: int
    current: int  # sources with a .pyc entry of this interpreter's magic number
    stale: int  # sources whose .pyc is for another Python version
    size: int

    @property
    def missing(self) -> int:
        return self.sources - self.current

    def describe(self) -> str:
        tag = sys.implementation.cache_tag
        if self.missing == 0:
            return f"{self.path}: {self.sources:,} modules, all with bytecode for {tag}"
        other = f", {self.stale:,} compiled by another Python" if self.stale else ""
        return f"{self.path}: {self.missing:,} of {self.sources:,} modules without bytecode for {tag}{other}"


@dataclass
class CompileResult:
    path: Path
    compiled: int = 0
    failed: list[str] = field(default_factory=list)  # sources this Python cannot compile: left as they were
    size_before: int = 0
    size_after: int = 0


def spark_home(explicit: str | None = None) -> Path:
    """The Spark installation whose zips Spark's Python processes import: the one the JVM sees.

    ``--spark-home`` first, then ``$SPARK_HOME``, then the pip-installed ``pyspark`` package (which
    is its own SPARK_HOME: pyspark's launcher uses that directory when SPARK_HOME is unset).
    """
    if explicit:
        return Path(explicit)
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise BytecodeError("no Spark installation found. Fix: set SPARK_HOME, pass --spark-home, or install pyspark.")
    return Path(list(spec.submodule_search_locations)[0])


def spark_zips(home: Path) -> list[Path]:
    lib = home.joinpath(*ZIP_DIR)
    found = sorted({p for pattern in ZIP_PATTERNS for p in lib.glob(pattern)})
    if not any(p.name == "pyspark.zip" for p in found):
        raise BytecodeError(
            f"no pyspark.zip in {lib}. Fix: point SPARK_HOME (or --spark-home) at the Spark "
            "installation whose Python workers run the pipeline."
        )
    return found


def _sources_and_pycs(zf: zipfile.ZipFile) -> tuple[list[zipfile.ZipInfo], dict[str, zipfile.ZipInfo]]:
    infos = zf.infolist()
    sources = [i for i in infos if i.filename.endswith(".py")]
    pycs = {i.filename: i for i in infos if i.filename.endswith(".pyc")}
    return sources, pycs


def _magic(zf: zipfile.ZipFile, pyc: zipfile.ZipInfo) -> bytes:
    with zf.open(pyc) as fh:
        return fh.read(4)


def zip_state(path: Path) -> ZipState:
    with zipfile.ZipFile(path) as zf:
        sources, pycs = _sources_and_pycs(zf)
        current = stale = 0
        for info in sources:
            pyc = pycs.get(info.filename + "c")
            if pyc is None:
                continue
            if _magic(zf, pyc) == MAGIC_NUMBER:
                current += 1
            else:
                stale += 1
    return ZipState(path, len(sources), current, stale, path.stat().st_size)


def _pyc(source: bytes, filename: str) -> bytes:
    """A checked hash-based pyc (PEP 552), the layout ``py_compile`` writes for CHECKED_HASH."""
    code = compile(source, filename, "exec", dont_inherit=True)
    flags = (0b11).to_bytes(4, "little")  # hash-based, check the source
    return MAGIC_NUMBER + flags + source_hash(source) + marshal.dumps(code)


def _temp_beside(path: Path) -> Path:
    """A file in the zip's directory, so the finished zip replaces the old one with one rename."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise BytecodeError(
            f"cannot write beside {path}: {exc.strerror}. Fix: run this as the user that owns the Spark installation."
        ) from exc
    os.close(fd)
    return Path(name)


def _rewrite(path: Path, entries: Iterable[tuple[zipfile.ZipInfo, bytes]]) -> None:
    """Write ``entries`` to a new zip beside ``path``, then swap it in with one rename."""
    tmp = _temp_beside(path)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
            for info, data in entries:
                dst.writestr(info, data)
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # gone already when it was renamed into place


def add_bytecode(path: Path) -> CompileResult:
    """Rewrite ``path`` with a current pyc beside each source; leaves it alone when nothing is new.

    Sources that already have a pyc of this Python keep it; pycs of another Python are replaced.
    A source this Python cannot compile keeps no pyc (zipimport reports its error on import, as
    before), and does not make later runs rewrite the zip again.
    """
    result = CompileResult(path, size_before=path.stat().st_size)
    with zipfile.ZipFile(path) as src:
        sources, pycs = _sources_and_pycs(src)
        new: dict[str, bytes] = {}
        for info in sources:
            pyc = pycs.get(info.filename + "c")
            if pyc is not None and _magic(src, pyc) == MAGIC_NUMBER:
                continue
            try:
                # the file name zipimport gives a module it compiles itself, so tracebacks read the same
                new[info.filename] = _pyc(src.read(info), f"{path}{os.sep}{info.filename}")
            except (SyntaxError, ValueError):
                result.failed.append(info.filename)
        if new:

            def entries() -> Iterator[tuple[zipfile.ZipInfo, bytes]]:
                for info in src.infolist():
                    if info.filename.endswith(".pyc") and info.filename[:-1] in new:
                        continue  # another Python's, replaced below
                    yield info, src.read(info)
                    if info.filename in new:
                        entry = zipfile.ZipInfo(info.filename + "c", info.date_time)
                        entry.external_attr = info.external_attr
                        entry.compress_type = zipfile.ZIP_DEFLATED
                        yield entry, new[info.filename]

            _rewrite(path, entries())
    result.compiled = len(new)
    result.size_after = path.stat().st_size
    return result


def remove_bytecode(path: Path) -> int:
    """Put the zip back to sources only; returns the pyc entries removed."""
    with zipfile.ZipFile(path) as src:
        sources, pycs = _sources_and_pycs(src)
        source_names = {i.filename for i in sources}
        drop = {name for name in pycs if name[:-1] in source_names}
        if drop:
            _rewrite(path, ((i, src.read(i)) for i in src.infolist() if i.filename not in drop))
    return len(drop)


def missing_bytecode_note(home: str | None = None) -> str | None:
    """One line for a job's log when Spark's pyspark.zip would be compiled by every Python process."""
    try:
        path = next(p for p in spark_zips(spark_home(home)) if p.name == "pyspark.zip")
        state = zip_state(path)
    except (BytecodeError, OSError, zipfile.BadZipFile, StopIteration):
        return None
    if state.missing == 0:
        return None
    return (
        f"{path} has no bytecode for {sys.implementation.cache_tag}: every Python process Spark starts "
        f"compiles PySpark first (0.5-0.8 s each, most of a stream's start-up); `{HINT}` adds it"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=HINT,
        description="Add bytecode to the PySpark and py4j zips of a Spark installation, so the "
        "Python processes Spark starts do not compile PySpark each time (see the module docstring).",
    )
    ap.add_argument("--spark-home", help="the Spark installation (default: $SPARK_HOME, else the installed pyspark)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="report only; exit 1 when bytecode is missing")
    mode.add_argument("--remove", action="store_true", help="put the zips back to sources only")
    ap.add_argument("--quiet", action="store_true", help="print only what was changed")
    args = ap.parse_args(argv)
    try:
        zips = spark_zips(spark_home(args.spark_home))
        if args.check:
            states = [zip_state(p) for p in zips]
            for s in states:
                print(s.describe())
            return 1 if any(s.missing for s in states) else 0
        for p in zips:
            if args.remove:
                print(f"{p}: removed {remove_bytecode(p):,} pyc entries")
                continue
            r = add_bytecode(p)
            if not r.compiled:
                if not args.quiet:
                    print(zip_state(p).describe())
                continue
            failed = (
                f"; {len(r.failed)} could not be compiled by this Python: {', '.join(r.failed)}" if r.failed else ""
            )
            print(
                f"{p}: compiled {r.compiled:,} modules for {sys.implementation.cache_tag} "
                f"({r.size_before / 2**20:.1f} -> {r.size_after / 2**20:.1f} MiB){failed}"
            )
    except BytecodeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except PermissionError as exc:
        print(
            f"error: cannot rewrite {exc.filename}: {exc.strerror}; run this as the user that owns the "
            "Spark installation",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
