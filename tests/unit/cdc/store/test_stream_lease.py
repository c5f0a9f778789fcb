"""The stream's lease (cdc/store/lease.py) on a local state location: one holder, refusals that name
it, take-over only after expiry, a holder that learns it lost, a clean release."""

from __future__ import annotations

import threading
import time

import pytest

from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.cdc.store.lease import LeaseHeld, StreamLease


def _lease(location, host: str, monkeypatch=None, ttl: float = 3.0) -> StreamLease:
    return StreamLease(StateStore(str(location)), ttl_s=ttl, owner={"host": host})


def test_a_second_launcher_is_refused_naming_the_holder_until_the_lease_expires(tmp_path):
    a, b = _lease(tmp_path, "host-a"), _lease(tmp_path, "host-b")
    assert a.acquire() == 1
    with pytest.raises(LeaseHeld, match=r"already runs \(host host-a, pid \d+, valid for another \d+ s\)"):
        b.acquire()
    assert b.holder()["owner"]["host"] == "host-a" and a.holder() is None  # one's own lease is no holder
    time.sleep(3.2)  # host-a stopped renewing: expired
    assert b.holder() is None
    assert b.acquire() == 2
    assert a.renew() is False, "the old holder learns it lost the lease"
    assert b.renew() is True


def test_renewal_keeps_it_and_release_frees_it_at_once(tmp_path):
    a, b = _lease(tmp_path, "host-a"), _lease(tmp_path, "host-b")
    a.acquire()
    for _ in range(3):
        time.sleep(1.2)
        assert a.renew() is True
    with pytest.raises(LeaseHeld):
        b.acquire()  # 3.6 s after taking it: renewed, still valid
    a.release()
    assert b.acquire() == 2


def test_of_many_launchers_racing_for_a_free_lease_exactly_one_wins(tmp_path):
    leases = [_lease(tmp_path, f"host-{i}") for i in range(8)]
    won, refused = [], []
    barrier = threading.Barrier(len(leases))

    def go(lease):
        barrier.wait()
        try:
            lease.acquire()
            won.append(lease)
        except LeaseHeld:
            refused.append(lease)

    threads = [threading.Thread(target=go, args=(lease,)) for lease in leases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(refused) == 7


def test_on_the_holders_own_host_a_dead_holder_frees_the_lease_at_once(tmp_path):
    """A relaunch after a kill -9 on the same host need not wait for the expiry; on another
    host it must (nothing there can tell a dead holder from a slow one)."""
    import json
    import subprocess
    import sys

    from airflow_provider_mysqlcdc.cdc.store.lease import host_id

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        import psutil

        body = {
            "owner": {"host": host_id(), "pid": child.pid, "started_at": psutil.Process(child.pid).create_time()},
            "token": "theirs",
            "expires_at": time.time() + 60,
            "ttl_s": 60,
        }
        (tmp_path / "stream" / "lease").mkdir(parents=True)
        (tmp_path / "stream" / "lease" / f"{1:012d}.json").write_text(json.dumps(body))
        mine = StreamLease(StateStore(str(tmp_path)), ttl_s=60)
        with pytest.raises(LeaseHeld):
            mine.acquire()  # alive on this host: held
        child.kill()
        child.wait()
        assert mine.holder() is None and mine.acquire() == 2
        other_host = dict(body, owner=dict(body["owner"], host="elsewhere"), token="far")
        (tmp_path / "stream" / "lease" / f"{3:012d}.json").write_text(json.dumps(other_host))
        with pytest.raises(LeaseHeld, match="host elsewhere"):
            StreamLease(StateStore(str(tmp_path)), ttl_s=60).acquire()
    finally:
        child.kill()


def test_a_half_written_lease_file_is_refused_while_fresh_and_taken_over_once_stale(tmp_path):
    import os

    lease_dir = tmp_path / "stream" / "lease"
    lease_dir.mkdir(parents=True)
    broken = lease_dir / f"{1:012d}.json"
    broken.write_text('{"owner": {"host": "elsewhere", "pid": 1}, "expires_at": 1')
    mine = StreamLease(StateStore(str(tmp_path)), ttl_s=30)
    with pytest.raises(LeaseHeld, match=r"lease .*000000000001\.json is unreadable .*Fix: launch again"):
        mine.acquire()
    old = time.time() - 31
    os.utime(broken, (old, old))
    assert mine.acquire() == 2 and mine.renew() is True
    assert not [p for p in lease_dir.iterdir() if ".tmp-" in p.name], "a renewal leaves no temporary file"
