"""A class-data-sharing (CDS) archive for the local Spark Connect server's JVM.

Spark's JVM loads and verifies some 15,000 classes before it reads a row, and on a small
machine that is seconds of CPU on the first batch's critical path. The JDK can map classes
already parsed and verified from an archive file instead (AppCDS). Measured here (2 cores):
the JVM's start 5.3 s -> 3.4 s, the first 5M-row batch 9.9 s -> 8.7 s.

The archive is built from the classes a server really loaded, off the critical path:

1. A server started while there is no archive for this JVM and these jars records the
   classes it loads (``-XX:DumpLoadedClassList``: a line per class, no measurable cost).
2. When it stops, its supervisor starts a detached builder (``build``), which runs the same
   ``java`` command line with ``-Xshare:dump`` (about 20-40 s of one core, while nothing else
   runs) into a temporary file and renames it into place; one builder at a time (a lock file).
3. Later servers start with ``-XX:SharedArchiveFile``. ``-Xshare:auto`` makes the JVM run
   without it (and say so in the server log) if it does not match, so an archive can cost
   nothing but its disk space (~180 MB) and never stops a server.

The archive's name holds a digest of the ``java`` binary and Spark's jar directory, so a new
JDK or Spark gets a new archive. ``MYSQLCDC_CDS=0`` turns all of it off; ``MYSQLCDC_CDS_DIR``
moves the archives (default ``~/.cache/mysqlcdc/cds``). Linux only (the builder reads the
server's command line from ``/proc``); elsewhere servers start as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

CDS_ENV = "MYSQLCDC_CDS"
CDS_DIR_ENV = "MYSQLCDC_CDS_DIR"
BUILD_TIMEOUT_S = 600.0
STALE_LOCK_S = 900.0
# Options of the recording run that the dump must not repeat.
_RECORDING_OPTIONS = ("-XX:DumpLoadedClassList=", "-XX:SharedArchiveFile=", "-Xshare:")


def enabled() -> bool:
    return os.environ.get(CDS_ENV, "1").strip().lower() not in ("0", "false", "no", "off") and sys.platform == "linux"


def archive_dir() -> Path:
    return Path(os.environ.get(CDS_DIR_ENV) or Path.home() / ".cache" / "mysqlcdc" / "cds")


def _java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def _spark_jars_dir() -> Path | None:
    home = os.environ.get("SPARK_HOME")
    if not home:
        try:
            import pyspark
        except ImportError:
            return None
        home = os.path.dirname(pyspark.__file__)
    jars = Path(home) / "jars"
    return jars if jars.is_dir() else None


def archive_key(extra_jars: Sequence[str] = ()) -> str | None:
    """A digest of what the archive depends on (the JVM binary, Spark's jars), or None when
    either cannot be found (then no archive is used)."""
    java, jars = _java_binary(), _spark_jars_dir()
    if java is None or jars is None:
        return None
    # Spark's jar directory by its path too: an archive holds the class path it was dumped with, and
    # a JVM on another path (a second virtualenv with the same Spark) cannot use it
    h = hashlib.sha1(f"{java}:{os.stat(java).st_mtime_ns}:{jars.resolve()}".encode())
    for p in sorted(jars.iterdir()):
        with contextlib.suppress(OSError):
            h.update(f"{p.name}:{p.stat().st_size}".encode())
    for j in extra_jars:
        h.update(j.encode())
    return h.hexdigest()[:16]


def archive_path(key: str) -> Path:
    return archive_dir() / f"spark-{key}.jsa"


def java_options(key: str | None, class_list: Path, user_options: str = "") -> list[str]:
    """The server JVM's CDS options: use the archive if there is one, else record the classes.
    None when the user's own driver options (``user_options``) set class-data sharing."""
    if key is None or not enabled() or any(k in user_options for k in ("Xshare", "SharedArchiveFile", "ClassList")):
        return []
    archive = archive_path(key)
    if any(c.isspace() or c in "'\"\\" for c in f"{archive}{class_list}"):
        return []  # Spark splits spark.driver.extraJavaOptions at spaces: such a path would break the JVM's start
    if archive.exists():
        return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    return [f"-XX:DumpLoadedClassList={class_list}"]


def java_command_of(pid: int) -> list[str] | None:
    """The command line of a running process (the server's ``java``, which spark-submit execs)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
    except OSError:
        return None
    return argv if argv and os.path.basename(argv[0]).startswith("java") else None


def jvm_options(java_argv: Sequence[str]) -> list[str]:
    """``java`` and its options (class path, heap, modules) from a JVM's command line: the main
    class, its arguments and the recording options dropped."""
    out = [java_argv[0]]
    i = 1
    while i < len(java_argv):
        a = java_argv[i]
        if a in ("-cp", "-classpath", "--class-path"):
            out += [a, java_argv[i + 1]]
            i += 2
            continue
        if not a.startswith("-"):
            break  # the main class
        if not a.startswith(_RECORDING_OPTIONS):
            out.append(a)
        i += 1
    return out


def dump_command(java_argv: Sequence[str], class_list: Path, target: Path) -> list[str]:
    """The recording run's JVM options with ``-Xshare:dump``: the archive matches the class path
    the servers run with."""
    return jvm_options(java_argv) + [
        "-Xshare:dump",
        f"-XX:SharedClassListFile={class_list}",
        f"-XX:SharedArchiveFile={target}",
    ]


def start_build(key: str, java_argv: Sequence[str], class_list: Path) -> bool:
    """Start the detached builder once a recording server has stopped; False if there is
    nothing to do (an archive exists, another builder runs, the class list is missing)."""
    archive = archive_path(key)
    if archive.exists() or not class_list.exists() or class_list.stat().st_size == 0:
        return False
    archive.parent.mkdir(parents=True, exist_ok=True)
    lock = archive.with_suffix(".building")
    with contextlib.suppress(OSError):
        if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            lock.unlink()
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    # The class list moves next to the archive (the server's runtime directory may go first),
    # and the JVM's options go in a file: the builder's command line names no server class.
    kept = archive.with_suffix(f".classes{os.getpid()}")
    shutil.copyfile(class_list, kept)
    options = archive.with_suffix(f".jvm{os.getpid()}")
    options.write_text(json.dumps(jvm_options(java_argv)))
    cmd = [
        sys.executable,
        "-m",
        "airflow_provider_mysqlcdc.spark.runtime.class_sharing",  # not __name__: "__main__" when run with -m
        "build",
        "--archive",
        str(archive),
        "--class-list",
        str(kept),
        "--lock",
        str(lock),
        "--jvm",
        str(options),
    ]
    with open(archive.with_suffix(".log"), "ab") as out:
        subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    return True


def build(archive: Path, class_list: Path, lock: Path, jvm: Path) -> int:
    """The builder: dump into a temporary file, rename it into place; always release the lock."""
    tmp = archive.with_suffix(f".tmp{os.getpid()}")
    try:
        cmd = dump_command(json.loads(jvm.read_text()), class_list, tmp)
        t0 = time.monotonic()
        rc = subprocess.run(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=BUILD_TIMEOUT_S
        ).returncode
        if rc == 0 and tmp.exists() and tmp.stat().st_size > 0:
            os.replace(tmp, archive)
            print(f"built {archive} in {time.monotonic() - t0:.1f}s", flush=True)
            return 0
        print(f"could not build {archive} (java exited with {rc}); servers start without it", flush=True)
        return 1
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"could not build {archive}: {e}", flush=True)
        return 1
    finally:
        for p in (tmp, class_list, jvm, lock):
            with contextlib.suppress(OSError):
                p.unlink()


def prepare(timeout_s: float = BUILD_TIMEOUT_S) -> int:
    """Build this host's archive now, if there is none: a short local Spark session records the
    classes a job loads, then the builder dumps them (about a minute of one core, once per JDK and
    Spark). Without it the first local driver or Connect server records them and the archive is
    built in the background after it stops; this only does that ahead of time (``make
    bootstrap``, a machine image). 0 when the archive is there."""
    from .session import class_sharing_for_next_driver, class_sharing_key, configure_builder, driver_java_command

    key = class_sharing_key()
    if key is None or not enabled():
        print("class-data sharing is off here (MYSQLCDC_CDS=0, no java or no Spark jars): nothing to build")
        return 0
    archive = archive_path(key)
    if archive.exists():
        print(f"{archive} is there")
        return 0
    from pyspark.sql import SparkSession

    class_list = archive_dir() / f"prepare-{os.getpid()}.lst"
    class_list.parent.mkdir(parents=True, exist_ok=True)
    if not class_sharing_for_next_driver(record=class_list):
        print("the driver's options choose class sharing themselves (SPARK_SUBMIT_OPTS): nothing to build")
        return 0
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers: this environment's Python
    builder = SparkSession.builder.master("local[1]").appName("mysqlcdc class-data sharing")
    builder = builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    spark = configure_builder(builder).getOrCreate()
    java_argv = driver_java_command(spark)
    try:  # what every job does first: plan, shuffle, run Python workers over Arrow
        df = spark.range(1000).selectExpr("id", "id % 7 AS k", "CAST(id AS STRING) AS s")
        df.groupBy("k").count().collect()
        df.mapInArrow(lambda batches: batches, df.schema).count()
    except Exception:
        with contextlib.suppress(OSError):
            class_list.unlink()
        raise
    finally:
        spark.stop()
    if java_argv is None or not start_build(key, java_argv, class_list):
        with contextlib.suppress(OSError):
            class_list.unlink()
        print(f"could not start building {archive}; local drivers start without it")
        return 1
    deadline = time.monotonic() + timeout_s
    while not archive.exists() and archive.with_suffix(".building").exists() and time.monotonic() < deadline:
        time.sleep(1.0)
    with contextlib.suppress(OSError):
        class_list.unlink()
    print(f"{archive} {'built' if archive.exists() else 'not built (see its .log)'}")
    return 0 if archive.exists() else 1


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="build the local Spark Connect server's class-data-sharing archive")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--archive", required=True)
    b.add_argument("--class-list", required=True)
    b.add_argument("--lock", required=True)
    b.add_argument("--jvm", required=True, help="a JSON file: java and its options")
    sub.add_parser("prepare", help="build this host's archive now (once per JDK and Spark)")
    args = ap.parse_args(argv)
    if args.cmd == "prepare":
        return prepare()
    return build(Path(args.archive), Path(args.class_list), Path(args.lock), Path(args.jvm))


if __name__ == "__main__":
    sys.exit(main())
