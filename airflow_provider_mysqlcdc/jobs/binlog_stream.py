"""spark-submit entry: the long-lived binlog stream into the sink.

    MYSQLCDC_PASSWORD=... spark-submit airflow_provider_mysqlcdc/jobs/binlog_stream.py --config pipeline.json

The password comes from $MYSQLCDC_PASSWORD or --password-file (mode 600), never from the
command line. It runs until killed; killed (even SIGKILL) and started again with the same
config, it resumes from the checkpoint in the state location (``stream/checkpoint``) and the
sink receives every change exactly once.

Started with plain ``python`` (no spark-submit), it runs Spark in local mode as
``local[2, 4]``: two cores, and a failed task is retried up to 4 times -- plain ``local[n]``
gives up after the first failure. The source itself retries lost connections (server
restarts) before a task fails at all. ``--sink-factory module:function`` builds the sink
from ``SinkConfig`` instead of the built-in factory (custom sinks, tests).

While it runs, a listener on the driver keeps ``stream/status.json`` in the state location
up to date (last committed micro-batch and offset, binlog head, lag; see
``spark/runtime/stream_status.py``). SIGTERM (or SIGINT) stops it cleanly: the query is stopped
between micro-batches (after waiting up to 10 s for the running one; past that it is
interrupted and simply runs again on the next start), the sink is closed, Spark stopped,
and the job exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

DEFAULT_LOCAL_MASTER = "local[2,4]"


def _load_factory(spec: str):
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr or "build")


def _stop_on_signals(log: logging.Logger) -> threading.Event:
    """An event set by SIGTERM/SIGINT. The handler only sets it: calling into Spark from a signal
    handler would re-enter the py4j connection the main thread is blocked on."""
    stop = threading.Event()

    def handler(signum: int, _frame: object) -> None:
        log.info("%s received: stopping the binlog stream", signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)
    return stop


def _between_triggers(query, timeout_s: float, log: logging.Logger) -> None:
    """Wait (up to ``timeout_s``) until no micro-batch is running, so ``stop()`` does not interrupt one.

    Interrupting a foreachBatch is safe (the batch is not committed and runs again on the next
    start) but Spark 4 then logs a StackOverflowError from matching the huge py4j error text.
    Caught up, the query spends most of its time between triggers; catching up, batches run
    back to back and the stop may still land inside one.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if not query.status.get("isTriggerActive"):
                return
        except Exception:  # the query is going away anyway
            return
        time.sleep(0.02)
    log.info(
        "a micro-batch is still running after %.0f s: interrupting it (it runs again on the next start)", timeout_s
    )


def _run_until_stopped(
    query, stop: threading.Event, log: logging.Logger, grace_s: float = 10.0, state: Any = None
) -> bool:
    """Wait for the query to end (a failure raises) or for a stop request, then stop it. True when
    the query must start again: it took over a table it does not read (spark/stream/tables/resnapshots.py),
    or the plan step asked for it (tables removed from the pipeline)."""
    from airflow_provider_mysqlcdc.spark.stream.tables.restart import RESTART

    while not stop.is_set():
        request = state.take_restart_request() if state is not None else None
        if request is not None and request.get("action") == "stop":
            # a stop asked through the state location: the only way to reach a driver on a cluster node
            log.info("binlog stream: stop requested (%s)", request.get("reason"))
            state.write_json(state.STOPPED_ON_REQUEST, {"reason": request.get("reason"), "at": time.time()})
            break
        if request is not None:
            log.info("binlog stream: restart requested (%s)", request.get("reason"))
            _between_triggers(query, grace_s, log)
            RESTART.set()
        if RESTART.is_set():
            query.stop()  # a micro-batch it interrupts was not committed: the next query runs it again
            return True
        try:
            if query.awaitTermination(1.0):
                return False
        except Exception:
            if RESTART.is_set():  # the micro-batch after the take-over refused to run in this query
                return True
            raise
    _between_triggers(query, grace_s, log)
    query.stop()
    log.info("binlog stream stopped on request")
    return False


LEASE_LOST = "lease lost"


class LeaseKeeper:
    """Renews the stream's lease every third of its time to live; a lease taken over (this
    stream could not renew in time) stops the stream through ``stop``."""

    def __init__(self, lease: Any, stop: threading.Event, log: logging.Logger) -> None:
        self.lease = lease
        self.stop = stop
        self.log = log
        self.lost = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mysqlcdc-lease", daemon=True)

    def start(self) -> "LeaseKeeper":
        self._thread.start()
        return self

    def _loop(self) -> None:
        every = max(float(self.lease.ttl_s) / 3.0, 0.5)
        while not self._done.wait(every):
            try:
                ok = self.lease.renew()
            except Exception as e:  # storage unreachable: try again; expiry decides
                self.log.warning("could not renew the stream's lease: %s", e)
                continue
            if not ok:
                self.lost = True
                self.log.error(
                    "%s: another stream holds this pipeline's lease now (this one could not renew it "
                    "in time); stopping so that only one writes the sink",
                    LEASE_LOST,
                )
                self.stop.set()
                return

    def close(self, release: bool = True) -> None:
        self._done.set()
        self._thread.join(5)
        if release:
            try:
                self.lease.release()
            except Exception as e:
                self.log.warning("could not release the stream's lease (it expires by itself): %s", e)


def _captured_tables(config_url: str, password: str | None) -> tuple:
    """The config (the plan step may have added tables) and the captured tables' schemas."""
    from airflow_provider_mysqlcdc.cdc.pipeline import load_pipeline_config
    from airflow_provider_mysqlcdc.cdc.source.discovery import discover_tables
    from airflow_provider_mysqlcdc.cdc.state import StateStore

    config = load_pipeline_config(config_url, password=password)
    with contextlib.closing(config.source.connect()) as conn:
        schemas = discover_tables(
            conn, config.include, config.exclude, config.split.chunk_key_columns, config.source.zero_dates
        )
    if config.rules:  # a transform's primary_keys key a table that has no primary key
        from airflow_provider_mysqlcdc.cdc.transform.table_views import apply_primary_keys

        schemas = apply_primary_keys(config.rules, schemas)
    plan = StateStore(config.state_location).read_plan() if config.startup_mode == "initial" else None
    if plan is not None:
        # The binlog from the snapshot's watermarks on was logged with the schemas the snapshot
        # read; DDL since then reaches the stream in order (the checkpoint keeps the history).
        # A table the plan has and the stream's history not yet is captured once its batches
        # are handed over (the take-over restarts the query).
        schemas = [plan.schemas.get(s.table_id, s) for s in schemas]
    return config, schemas


def _stream_session(master_arg: str | None, config: Any, sink: Any) -> tuple[Any, bool, Path, Any]:
    """The stream's Spark session (closing ``sink`` if it cannot start), whether this driver records
    its classes for the next one, where, and the driver's java command line when it does."""
    from pyspark.sql import SparkSession

    from airflow_provider_mysqlcdc.spark.runtime.session import (
        class_sharing_for_next_driver,
        configure_builder,
        driver_java_command,
        light_jit_for_next_driver,
    )

    builder = SparkSession.builder.appName(f"mysqlcdc {config.name} binlog stream")
    recording, class_list = False, Path(tempfile.gettempdir()) / f"mysqlcdc-classes-{os.getpid()}.lst"
    if master_arg or "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit
        master = master_arg or DEFAULT_LOCAL_MASTER
        if master.lower().startswith("local"):
            # local executors are this machine's: this interpreter. On a cluster (client deploy mode)
            # the executors run the cluster's Python (spark.pyspark.python, or python3 on the nodes).
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.master(master)
        # Spark's classes mapped from the host's archive; the first driver without one records them
        recording = class_sharing_for_next_driver(record=class_list)
        if sink.direct_write() is not None:
            # the source's tasks do the sink's work (spark/sinks/direct.py): rows never enter the
            # JVM, and C2's compilations were most of its CPU in a catch-up (runtime/session.py)
            light_jit_for_next_driver()
    builder = builder.config("spark.task.maxFailures", "4").config("spark.ui.showConsoleProgress", "false")
    try:
        spark = configure_builder(builder).getOrCreate()
    except BaseException:
        sink.close()
        raise
    java_argv = driver_java_command(spark) if recording else None
    if not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        # Micro-batches are small: Spark's default of 200 shuffle partitions would make the
        # sinks' reductions (Delta, PostgreSQL) and the per-table fan-out run 200 tiny tasks each.
        spark.conf.set("spark.sql.shuffle.partitions", str(max(2, spark.sparkContext.defaultParallelism)))
    return spark, recording, class_list, java_argv


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="pipeline config JSON, a path or fsspec URL (no password inside)")
    ap.add_argument("--password-file", help="file holding the source password (mode 600)")
    ap.add_argument("--sink-factory", help="module:function(SinkConfig) -> Sink, instead of the built-in sinks")
    ap.add_argument("--master", help=f"Spark master when not under spark-submit (default {DEFAULT_LOCAL_MASTER})")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # py4j logs every Python callback (each micro-batch, each listener event) at INFO
    logging.getLogger("py4j").setLevel(logging.WARNING)
    log = logging.getLogger("mysqlcdc.binlog_stream")
    stop = _stop_on_signals(log)

    import pyspark.sql  # noqa: F401 - as before the split: a missing PySpark fails before the lease is taken

    from airflow_provider_mysqlcdc.cdc.pipeline import load_pipeline_config, read_password
    from airflow_provider_mysqlcdc.cdc.state import StateStore
    from airflow_provider_mysqlcdc.cdc.store.lease import LeaseHeld, StreamLease
    from airflow_provider_mysqlcdc.spark.runtime.session import build_class_sharing_archive
    from airflow_provider_mysqlcdc.spark.runtime.stream_status import install_status_listener
    from airflow_provider_mysqlcdc.spark.sinks.routed import RoutedSink, pipeline_sink
    from airflow_provider_mysqlcdc.spark.stream.query import start_stream
    from airflow_provider_mysqlcdc.spark.stream.tables.restart import RESTART
    from airflow_provider_mysqlcdc.spark.stream.tables.table_reads import TableReader

    password = read_password(args.password_file)

    def tables() -> tuple:
        return _captured_tables(args.config, password)

    config, schemas = tables()
    from airflow_provider_mysqlcdc.spark.stream.offsets.checkpoint_offsets import check_readable

    check_readable(StateStore(config.state_location).checkpoint_url())  # before Spark, which names no file
    # One stream per pipeline, on any host: refused here, before Spark starts, while another
    # holds the lease; given up when this one stops (cdc/store/lease.py).
    lease = StreamLease(StateStore(config.state_location), ttl_s=float(config.stream.lease_ttl_s))
    try:
        lease.acquire()
    except LeaseHeld as e:
        log.error("%s", e)  # nothing written: the running stream's status stays as it is
        return 3
    keeper = LeaseKeeper(lease, stop, log).start()

    sink = _load_factory(args.sink_factory)(config.sink) if args.sink_factory else pipeline_sink(config, schemas)
    spark, recording, class_list, java_argv = _stream_session(args.master, config, sink)

    listener = None
    reads = None
    failure: str | None = None
    try:
        if stop.is_set():  # terminated while starting up
            return 0
        listener = install_status_listener(spark, config, StateStore(config.state_location))
        spark_master = spark.sparkContext.master
        if not spark_master.lower().startswith("local"):
            # the cluster's executors run the cluster's Python: one that lacks the package (or runs
            # another version) fails here with what to install, not inside the first micro-batch
            from airflow_provider_mysqlcdc.spark.runtime.executor_check import check_executors

            check_executors(spark, spark_master)
        sink.observe_replaced_values(listener.recorder.count_replaced)  # e.g. U+0000 into PostgreSQL
        # tables renamed into the list bring rows the binlog lacks: this job reads them itself
        reads = TableReader(spark, lambda: load_pipeline_config(args.config, password=password)).start()
        while True:
            query = start_stream(spark, config, sink, schemas, password=password)
            log.info(
                "streaming %d tables (%s) into %s",
                len(schemas),
                ", ".join(str(s.table_id) for s in schemas[:10]),
                sink.name,
            )
            if not _run_until_stopped(query, stop, log, state=StateStore(config.state_location)):
                break
            RESTART.clear()
            config, schemas = tables()
            if isinstance(sink, RoutedSink):
                sink.add_tables(schemas)  # the tables it took over, through the same routes
            log.info("binlog stream: starting again from its checkpoint to capture the tables it took over")
    except Exception as e:
        failure = f"{type(e).__name__}: {e}"
        raise
    finally:
        if reads is not None:
            reads.close()
        if listener is not None:
            if keeper.lost:
                failure = failure or f"{LEASE_LOST}: another stream took this pipeline's lease over"
            listener.close(failure)  # status.json: stopped, or failed with the reason
        sink.close()
        spark.stop()
        keeper.close(release=not keeper.lost)
        if recording:
            build_class_sharing_archive(java_argv, class_list)
    return 4 if keeper.lost else 0


if __name__ == "__main__":
    sys.exit(main())
