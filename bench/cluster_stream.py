"""The binlog stream on a Spark standalone cluster vs the same stream in local mode, one run.

Workload (bench/workloads.py): ``--rows`` single-row UPDATEs alternating between the captured
``bench.events`` and an uncaptured table, written before any stream starts: a backlog of
``rows / 2`` changes. Each repeat streams that whole backlog into a fresh Delta table on an S3
API server (moto), alternately:

  * ``local``: the stream job launched as the stream task launches it on a local master
    (a detached ``python jobs/binlog_stream.py --master local[2,4]`` on this host);
  * ``client``: the same job with the cluster as its master (deploy mode client): the driver
    here, its executors on the workers;
  * ``cluster``: the stream's driver submitted to a standalone cluster of ``--workers`` workers
    with ``--cores`` cores each (mysqlcdc_harness.spark_cluster: each worker in its own mount
    namespace with its own node environment), exactly as the stream task submits it
    (spark/runtime/cluster_stream.py), ``spark.cores.max`` = the cluster's cores.

Per run: the time from launch to the first committed micro-batch (the stream task's wait), and
the catch-up time from launch until the committed offset reaches the backlog's end (read from
the stream's status in the state location, as the watchdog reads it). Medians of ``--repeats``;
the ratio is the cluster's rate over the local rate, paired by repeat.

Last line:
    cluster_vs_local=<float> local_changes_per_s=<int> cluster_changes_per_s=<int> cluster_first_commit_s=<float>
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/workloads.py

from workloads import load  # noqa: E402

from airflow_provider_mysqlcdc.cdc.model import TableId  # noqa: E402
from airflow_provider_mysqlcdc.cdc.offsets import BinlogOffset  # noqa: E402
from airflow_provider_mysqlcdc.cdc.pipeline import PipelineConfig, SinkConfig, StreamOptions  # noqa: E402
from airflow_provider_mysqlcdc.cdc.state import StateStore  # noqa: E402
from airflow_provider_mysqlcdc.cdc.store.object_store import use_credentials  # noqa: E402
from mysqlcdc_harness.mariadb import ROOT_PASSWORD, MariaDB  # noqa: E402
from mysqlcdc_harness.s3 import BUCKET, credentials, s3_server  # noqa: E402
from mysqlcdc_harness.spark_cluster import NODE_SECRETS_DIR, node_spark_home, standalone_cluster  # noqa: E402

TABLE = TableId("bench", "events")


def _reached(state: StateStore, end: BinlogOffset) -> tuple[bool, bool]:
    """(committed anything, committed through ``end``) from the stream's status."""
    from airflow_provider_mysqlcdc.spark.runtime.stream_status import read_status
    from airflow_provider_mysqlcdc.spark.stream.offsets.stream_offset import StreamOffset

    st = read_status(state)
    if st is None:
        return False, False
    if st.state == "failed":
        raise RuntimeError(f"the stream failed: {st.exception}")
    if not st.committed_offset:
        return False, False
    return True, StreamOffset.from_dict(st.committed_offset).at >= end


def run_once(placement: str, n: int, source, start: BinlogOffset, end: BinlogOffset, master: str, cores: int) -> dict:
    from airflow_provider_mysqlcdc.cdc.store.pipeline_file import write_config
    from airflow_provider_mysqlcdc.spark.runtime import cluster_stream
    from airflow_provider_mysqlcdc.spark.runtime.stream_launcher import launch_local_stream, stop_stream

    prefix = f"s3://{BUCKET}/{placement}{n}"
    state = StateStore(f"{prefix}/state")
    config = PipelineConfig(
        name=f"{placement}{n}",
        source=source,
        include=(str(TABLE),),
        state_location=state.location,
        sink=SinkConfig("delta", {"root": f"{prefix}/tables"}),
        startup_mode="specific-offset",
        startup_offset={"file": start.file, "position": start.position},
        stream=StreamOptions(heartbeat_s=1.0, trigger_interval_s=0.5, catchup_parallelism=2, lease_ttl_s=20),
    )
    url = write_config(state, config)
    t0 = time.perf_counter()
    if placement == "local":
        launch_local_stream(url, state, password=ROOT_PASSWORD, master="local[2,4]", extra_env=credentials_env())
    elif placement == "client":  # deploy-mode client: the driver here, its executors on the cluster
        launch_local_stream(
            url,
            state,
            password=ROOT_PASSWORD,
            master=master,
            extra_env={**credentials_env(), "SPARK_LOCAL_IP": "127.0.0.1"},
        )
    else:
        sub = cluster_stream.submission(
            spark_submit=cluster_stream.spark_submit_binary(),
            master=master,
            name=f"bench {placement}{n}",
            config_url=url,
            conf={"spark.cores.max": str(cores)},
            password_file=f"{NODE_SECRETS_DIR}/password",
            spark_home=node_spark_home(),
        )
        cluster_stream.submit(sub)
    first = None
    try:
        while True:
            committed, done = _reached(state, end)
            now = time.perf_counter() - t0
            if committed and first is None:
                first = now
            if done:
                return {"first_commit_s": first, "catchup_s": now}
            if now > 1800:
                raise TimeoutError(f"{placement}: not caught up after 1800 s")
            time.sleep(0.2)
    finally:
        stop_stream(state, "bench: done", timeout_s=120)


_CREDS: dict[str, str] = {}


def credentials_env() -> dict[str, str]:
    return dict(_CREDS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4_000_000, help="UPDATEs in the backlog (half on the captured table)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cores", type=int, default=1, help="cores per worker")
    ap.add_argument("--placements", default="local,cluster,client", help="which of local, cluster, client to run")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mysqlcdc-cluster-bench-"))
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        os.environ.pop(k, None)
    server = MariaDB(base_dir=work / "mariadb", server_id=1, extra_args=("--max-binlog-size=1073741824",)).start()
    try:
        t = time.perf_counter()
        start, end, changes = load(server, args.rows)
        print(
            f"backlog: {changes:,} changes on {TABLE} ({args.rows:,} UPDATEs), written in {time.perf_counter() - t:.0f} s"
        )
        source = server.source_config(server_id_range="7100-7199")
        with s3_server(work) as s3:
            creds = credentials(s3)
            _CREDS.update(creds.env())
            use_credentials(creds)  # this process reads the status on S3
            node_env = {**creds.env(), "AWS_REGION": s3["region"], "AWS_DEFAULT_REGION": s3["region"]}
            with standalone_cluster(
                work / "cluster",
                work / "cache",
                workers=args.workers,
                cores=args.cores,
                node_env=node_env,
                node_secrets={"password": ROOT_PASSWORD},
            ) as cluster:
                print(f"cluster: {cluster.master_url}, {args.workers} workers x {args.cores} core(s)", flush=True)
                chosen = [p.strip() for p in args.placements.split(",") if p.strip()]
                runs: dict[str, list[dict]] = {p: [] for p in ("local", "cluster", "client")}
                for n in range(args.repeats):
                    for placement in chosen:
                        r = run_once(placement, n, source, start, end, cluster.master_url, args.workers * args.cores)
                        runs[placement].append(r)
                        print(
                            f"  {placement:7s} repeat {n}: first commit {r['first_commit_s']:.1f} s, caught up in "
                            f"{r['catchup_s']:.1f} s ({changes / r['catchup_s']:,.0f} changes/s)",
                            flush=True,
                        )
        ratios = [lo["catchup_s"] / cl["catchup_s"] for lo, cl in zip(runs["local"], runs["cluster"])] or [float("nan")]
        med = {p: statistics.median(r["catchup_s"] for r in rs) if rs else float("nan") for p, rs in runs.items()}

        def med_of(p: str, f) -> float:
            return statistics.median(f(r) for r in runs[p]) if runs[p] else float("nan")

        first = med_of("cluster", lambda r: r["first_commit_s"])
        first_local = med_of("local", lambda r: r["first_commit_s"])
        print(
            f"median catch-up: local {med['local']:.1f} s, cluster {med['cluster']:.1f} s, client mode "
            f"{med['client']:.1f} s; first commit: local {first_local:.1f} s, cluster {first:.1f} s; catch-up after "
            f"the first commit: local {med_of('local', lambda r: r['catchup_s'] - r['first_commit_s']):.1f} s, "
            f"cluster {med_of('cluster', lambda r: r['catchup_s'] - r['first_commit_s']):.1f} s, "
            f"client mode {med_of('client', lambda r: r['catchup_s'] - r['first_commit_s']):.1f} s"
        )
        print(
            f"cluster_vs_local={statistics.median(ratios):.2f} local_changes_per_s={changes / med['local']:.0f} "
            f"cluster_changes_per_s={changes / med['cluster']:.0f} cluster_first_commit_s={first:.1f}"
        )
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
