"""The e2e tests count Spark jobs by watching command lines; a process seen between its fork
and its exec shows its parent's command line and must not count as a second job (CI once
counted a JVM twice while it was starting its Python driver)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from mysqlcdc_harness.processes import CommandLineWatcher

FORKS = (
    "import os, sys, time\n"
    "time.sleep(0.6)\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    time.sleep(1.0)\n"
    "    os._exit(0)\n"
    "os.waitpid(pid, 0)\n"
    "time.sleep(0.3)\n"
)


def test_a_fork_child_before_its_exec_is_not_a_process_of_its_own():
    needle = "watcher-needle-7f3a"
    seen: list[int] = []
    watcher = CommandLineWatcher((needle,), every_s=0.05, on_new=lambda pid, line: seen.append(pid)).start()
    try:
        proc = subprocess.Popen([sys.executable, "-c", FORKS, needle])
        proc.wait(10)
        time.sleep(0.2)
    finally:
        watcher.stop()
    assert len(watcher.by_pid) == 2, watcher.by_pid  # the parent and its forked copy were both seen
    assert watcher.processes(needle) == [proc.pid]
    assert seen == [proc.pid]  # on_new is not called for the copy either


def test_only_this_tests_processes_count_not_older_ones_nor_another_workers():
    """A process already running when the watcher starts (a server an earlier test left idling)
    and one whose environment names another session's Airflow home (another xdist worker's Spark
    job) are not seen; one this test starts is."""
    needle = "watcher-needle-older-9c1d"
    sleeper = [sys.executable, "-c", "import time, sys; time.sleep(5)", needle]
    older = subprocess.Popen(sleeper)
    time.sleep(1.6)  # older by more than the watcher's one-second allowance
    env = dict(os.environ, MYSQLCDC_TEST_AIRFLOW_HOME="/elsewhere/another-worker")
    watcher = CommandLineWatcher((needle,), every_s=0.05).start()
    try:
        other = subprocess.Popen(sleeper, env=env)
        mine = subprocess.Popen(sleeper)
        time.sleep(0.5)
    finally:
        watcher.stop()
        for p in (older, other, mine):
            p.kill()
            p.wait()
    assert watcher.processes(needle) == [mine.pid], (older.pid, other.pid, mine.pid, watcher.by_pid)


def test_command_lines_holding_an_excluded_word_do_not_count():
    """The Connect test excludes the launcher JVM and the archive builder (-Xshare:dump)."""
    needle = "watcher-needle-unless-4e2b"
    code = "import time; time.sleep(2)"
    watcher = CommandLineWatcher((needle,), every_s=0.05).start()
    try:
        procs = [
            subprocess.Popen([sys.executable, "-c", code, needle, extra])
            for extra in ("server", "-Xshare:dump", "Main")
        ]
        time.sleep(0.6)
    finally:
        watcher.stop()
        for p in procs:
            p.kill()
            p.wait()
    assert sorted(watcher.processes(needle)) == sorted(p.pid for p in procs)
    assert watcher.processes(needle, unless=("-Xshare:dump", "Main")) == [procs[0].pid]
    assert sorted(watcher.processes(needle, unless="Main")) == sorted(p.pid for p in procs[:2])
