"""One stream per pipeline across hosts (issue 19): two launchers on two "hosts" -- two stream
jobs with different host ids (``MYSQLCDC_HOST_ID``) against one state location -- never both run.

The second job is refused while the first holds the lease, naming it; after a kill -9 of the
first, the other host still waits for the lease to expire (it cannot tell a dead holder from a
slow one), then takes over and streams. On S3 the exclusive create is a conditional PUT: of
several launchers racing for a free lease exactly one wins there too.
"""

from __future__ import annotations

import threading
import time

import pytest

from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions
from airflow_provider_mysqlcdc.cdc.state import StateStore
from airflow_provider_mysqlcdc.cdc.store.lease import LeaseHeld, StreamLease
from mysqlcdc_harness.s3 import aws_env, s3_server
from mysqlcdc_harness.stream_job import committed, kill_job, start_job
from mysqlcdc_harness.tables import create_int_table
from mysqlcdc_harness.writer import ConcurrentWriter

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

TTL_S = 8.0


def _wait(pred, timeout: float, what: str, log=None) -> None:
    deadline = time.time() + timeout
    while not pred():
        if time.time() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log is not None else ""
            pytest.fail(f"timed out waiting for {what}\n{tail}")
        time.sleep(0.2)


def test_two_hosts_never_both_run_the_stream_and_a_dead_holder_is_replaced_after_expiry(mariadb, fresh_db, tmp_dir):
    spec = create_int_table(mariadb, fresh_db, 500, "orders")
    writer = ConcurrentWriter(lambda: mariadb.connect(fresh_db), spec, seed=3, threads=1, pause_s=0.05).start()
    src = mariadb.source_config(server_id_range="6500-6599")
    config = PipelineConfig(
        name="lease",
        source=src,
        include=(f"{fresh_db}.orders",),
        state_location=str(tmp_dir / "state"),
        sink=SinkConfig("changelog", {"root": str(tmp_dir / "log")}),
        startup_mode="latest-offset",
        stream=StreamOptions(heartbeat_s=1.0, trigger_interval_s=0.5, lease_ttl_s=TTL_S),
    )
    cfg = tmp_dir / "pipeline.json"
    cfg.write_text(config.to_json())
    checkpoint = tmp_dir / "state" / "stream" / "checkpoint"
    log_a, log_b = tmp_dir / "host-a.log", tmp_dir / "host-b.log"
    a = b = None
    try:
        a = start_job(cfg, log_a, src.password, extra_env={"MYSQLCDC_HOST_ID": "host-a"})
        _wait(lambda: committed(checkpoint) is not None, 180, "host-a's first commit", log_a)
        b = start_job(cfg, log_b, src.password, extra_env={"MYSQLCDC_HOST_ID": "host-b"})
        assert b.wait(120) == 3, log_b.read_text(errors="replace")[-3000:]
        assert "already runs (host host-a" in log_b.read_text(errors="replace")
        assert a.poll() is None, "the holder goes on"

        kill_job(a)
        killed_at = time.time()
        first_commits = committed(checkpoint)[0]
        b = start_job(cfg, log_b, src.password, extra_env={"MYSQLCDC_HOST_ID": "host-b"})
        assert b.wait(120) == 3, "host-b cannot tell a dead holder from a slow one: it waits for the expiry"
        assert time.time() - killed_at < TTL_S + 20
        _wait(lambda: time.time() - killed_at > TTL_S + 0.5, TTL_S + 5, "the lease's expiry")
        b = start_job(cfg, log_b, src.password, extra_env={"MYSQLCDC_HOST_ID": "host-b"})
        _wait(lambda: committed(checkpoint)[0] > first_commits + 2, 180, "host-b's commits", log_b)
        holder = StreamLease(StateStore(config.state_location), ttl_s=TTL_S).holder()
        assert holder is not None and holder["owner"]["host"] == "host-b"
    finally:
        writer.stop()
        for p in (a, b):
            if p is not None:
                kill_job(p)


def test_on_s3_of_several_launchers_racing_for_a_free_lease_exactly_one_wins(tmp_path):
    with s3_server(tmp_path) as info, aws_env(info):
        for round_ in range(3):
            state = StateStore(f"s3://{info['bucket']}/race-{round_}/state")
            leases = [StreamLease(state, ttl_s=30, owner={"host": f"host-{i}"}) for i in range(6)]
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
            assert len(won) == 1 and len(refused) == 5, (round_, len(won))
            loser = refused[0]
            with pytest.raises(LeaseHeld, match=f"host {won[0].owner['host']}"):
                loser.acquire()
            assert won[0].renew() is True
