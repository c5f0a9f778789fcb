"""The cluster harness's worker mounts: a repository checked out under /tmp (a clean clone in /tmp)
is hidden with /tmp, not mounted over after /tmp is covered (``mount: /tmp/fresh: mount point does
not exist`` stopped every worker)."""

from pathlib import Path

from mysqlcdc_harness.spark_cluster import _node_script, _outermost


def test_nested_directories_are_covered_by_the_outer_one():
    assert _outermost(["/tmp", "/opt", "/tmp/fresh"]) == ["/tmp", "/opt"]
    assert _outermost(["/tmp", "/opt", "/work/main"]) == ["/tmp", "/opt", "/work/main"]
    assert _outermost(["/tmpx/repo", "/tmp"]) == ["/tmpx/repo", "/tmp"]  # a prefix that is not a parent


def test_the_worker_script_mounts_no_directory_under_a_covered_one():
    script = _node_script(
        Path("/tmp/w/venv"), ["/tmp", "/opt", "/tmp/fresh"], {}, ["true"], "spark-node-1", "127.0.0.2"
    )
    mounts = [line for line in script.splitlines() if line.startswith("mount -t tmpfs tmpfs /")]
    assert mounts == ["mount -t tmpfs tmpfs /tmp", "mount -t tmpfs tmpfs /opt"], mounts
