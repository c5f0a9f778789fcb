"""Watching other processes during a test: their command lines, and this process's output."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence


class CommandLineWatcher:
    """Records the command line of every process whose argv mentions one of ``needles``
    (polled every ``every_s``); ``on_new`` may act on a new one (e.g. kill it).

    Only processes of this test count: started after the watcher (a Spark Connect server an
    earlier test left idling is not this test's), and not known to belong to another session (their
    environment carries another pytest-xdist worker's Airflow home, which every process the tests
    start inherits)."""

    def __init__(
        self, needles: Sequence[str], every_s: float = 0.2, on_new: Callable[[int, str], None] | None = None
    ) -> None:
        self.needles = tuple(needles)
        self.every_s = every_s
        self.on_new = on_new
        self.seen: list[str] = []
        self.by_pid: dict[int, list[str]] = {}
        self.parent: dict[int, int] = {}
        self._pids: set[tuple[int, str]] = set()
        self._owner = os.environ.get("MYSQLCDC_TEST_AIRFLOW_HOME")
        self._since = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "CommandLineWatcher":
        self._since = time.time()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def matching(self, needle: str) -> list[str]:
        return [c for c in self.seen if needle in c]

    def processes(self, *needles: str, unless: str | Sequence[str] | None = None) -> list[int]:
        """Pids that at some point ran a command line containing every needle (one process
        may exec several command lines: spark-submit -> spark-class -> java). A child seen
        between its fork and its exec shows its parent's command line (the JVM starting its
        Python driver or workers does this); it is not counted as a process of its own. A
        command line holding any of ``unless`` does not count."""

        excluded = (unless,) if isinstance(unless, str) else tuple(unless or ())

        def runs(lines: list[str]) -> bool:
            return any(all(n in ln for n in needles) and not any(u in ln for u in excluded) for ln in lines)

        return [pid for pid, lines in self.by_pid.items() if runs(lines) and not self._fork_copy(pid)]

    def _fork_copy(self, pid: int) -> bool:
        """True when ``pid`` was first seen with a command line its parent had too."""
        lines, parent = self.by_pid.get(pid, []), self.parent.get(pid)
        return bool(lines) and parent is not None and lines[0] in self.by_pid.get(parent, [])

    def _ours(self, process) -> bool:
        """False only for a process known to be older than the watcher or to belong to another
        session (one that cannot be read, e.g. already gone, counts as ours)."""
        import psutil

        try:
            # create_time counts from the boot time, which the kernel gives in whole seconds
            if process.create_time() < self._since - 1.0:
                return False
            if not self._owner:
                return True
            return process.environ().get("MYSQLCDC_TEST_AIRFLOW_HOME", self._owner) == self._owner
        except (psutil.Error, OSError):
            return True

    @staticmethod
    def _command_lines() -> Iterator[tuple[int, str]]:
        """Every process's pid and command line, read from /proc directly: one small read per
        process (psutil parsed each one's stat file twice per poll as well, which made the watcher
        a steady share of a core during a module)."""
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    raw = f.read()
            except OSError:  # gone, or not ours to read
                continue
            if raw:
                yield int(name), raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")

    def _run(self) -> None:
        import psutil

        me = os.getpid()
        while not self._stop.is_set():
            for pid, line in self._command_lines():
                if pid == me or not any(n in line for n in self.needles):
                    continue
                key = (pid, line)
                if key in self._pids:
                    continue
                self._pids.add(key)
                try:
                    p = psutil.Process(pid)
                    ppid = p.ppid()
                except (psutil.Error, OSError):
                    p, ppid = None, None
                if p is not None and not self._ours(p):
                    continue
                self.seen.append(line)
                self.by_pid.setdefault(pid, []).append(line)
                if ppid is not None:
                    self.parent.setdefault(pid, ppid)
                if self.on_new is not None and not self._fork_copy(pid):
                    try:
                        self.on_new(pid, line)
                    except Exception:  # the process may be gone already
                        pass
            time.sleep(self.every_s)


@contextlib.contextmanager
def capture_output(path: Path) -> Iterator[Path]:
    """Send this process's stdout and stderr (file descriptors 1 and 2, so child processes'
    output too) to ``path`` for the duration, then restore them."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield path
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
