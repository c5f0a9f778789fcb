"""Hand off from the snapshot to the binlog stream."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from airflow.sdk import BaseOperator

from ..cdc.errors import CdcError, ConfigError
from ..cdc.offsets import BinlogOffset
from ..cdc.state import StateStore
from ..cdc.store.object_store import use_credentials
from ..cdc.store.pipeline_file import read_config
from ..fail_fast import config_errors_fail_at_once
from ..hooks.mysql_cdc import MySqlCdcHook
from ..hooks.object_storage import storage_credentials
from ..hooks.stream import StreamControl, status_summary
from ..links import StreamSparkUiLink


def _results_list(results: Any) -> list[dict[str, Any]]:
    if results is None:
        return []
    # A mapped task's XCom arrives as a lazy sequence; slicing reads it without the
    # spurious "XCom not found" error that iterating past its end logs.
    try:
        items = results[:]
    except TypeError:
        items = results
    return [r for r in items if r]


class MySqlCdcStreamOperator(BaseOperator):
    """Starts the long-lived binlog stream from the minimum high watermark of the snapshot.

    It checks that every batch of the plan has a result, takes the minimum HW of the mapped
    snapshot tasks' XComs, writes the finished-batch list (ranges + HW of each batch: what the
    stream's handoff filter needs) to the state location, launches
    ``jobs/binlog_stream.py`` and returns once its first micro-batch committed.

    Idempotent: with a stream already running it starts no second one and returns its status;
    with a dead one, the relaunch resumes from the checkpoint. Local master: a detached
    background process on this worker (pid, log and status in ``<state>/stream/``). Cluster
    master: spark-submit in cluster deploy mode, fire-and-forget.

    :param snapshot_results: the snapshot tasks' XComs (``snapshot.output``). (templated)
    :param state_location: the plan step's state location. (templated)
    :param mysql_cdc_conn_id: the source connection. (templated)
    :param spark_conn_id: the Spark connection (``spark_default``). (templated)
    :param sink_conn_id: the PostgreSQL sink's connection, if that is the sink. (templated)
    :param start_timeout_s: how long to wait for the first committed micro-batch.
    :param password_file, cluster_provides_password, python_archive: as for the snapshot operator.
    :param conf: extra Spark configuration for a cluster submission.
    :param aws_conn_id: an ``aws`` connection for a state location or sink on object storage: its
        credentials reach this task and the stream job's environment (never its command line). (templated)
    """

    template_fields: Sequence[str] = (
        "snapshot_results",
        "state_location",
        "mysql_cdc_conn_id",
        "spark_conn_id",
        "sink_conn_id",
        "aws_conn_id",
    )
    ui_color = "#e3f7e3"
    operator_extra_links = (StreamSparkUiLink(),)

    def __init__(
        self,
        *,
        state_location: str,
        snapshot_results: Any = None,
        mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
        spark_conn_id: str = "spark_default",
        sink_conn_id: str | None = None,
        start_timeout_s: float = 600.0,
        password_file: str | None = None,
        cluster_provides_password: bool = False,
        python_archive: str | None = None,
        conf: Mapping[str, str] | None = None,
        aws_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.aws_conn_id = aws_conn_id
        self.snapshot_results = snapshot_results
        self.state_location = state_location
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.spark_conn_id = spark_conn_id
        self.sink_conn_id = sink_conn_id
        self.start_timeout_s = start_timeout_s
        self.password_file = password_file
        self.cluster_provides_password = cluster_provides_password
        self.python_archive = python_archive
        self.conf = dict(conf or {})

    def control(self) -> StreamControl:
        return StreamControl(
            self.state_location,
            self.mysql_cdc_conn_id,
            self.spark_conn_id,
            self.sink_conn_id or None,
            self.password_file,
            self.cluster_provides_password,
            self.python_archive,
            self.conf,
            self.start_timeout_s,
            aws_conn_id=self.aws_conn_id or None,
        )

    def _hand_off(self, state: StateStore, results: list[dict[str, Any]]) -> None:
        """Write the finished-batch list after checking it against the plan and the XComs."""
        plan = state.read_plan()
        if plan is None:
            raise ConfigError(
                f"no plan in {state.location}. Fix: run the plan and snapshot tasks first, with the "
                "same state_location."
            )
        if state.stream_started() and state.read_finished() is not None:
            # The stream goes on from its checkpoint; the list it started from stays as it was. Batches
            # read again or added since reached it as hand-offs (their tasks waited for the take-over).
            handed = [r["batch_id"] for r in results if r.get("handoff")]
            self.log.info(
                "the stream started before: it continues from its checkpoint%s",
                f"; {len(handed)} batch(es) of this run were handed to it" if handed else "",
            )
            return
        finished = state.finished_from_results()
        have = {f.batch_id: f for f in finished}
        missing = [b.batch_id for b in plan.batches if b.batch_id not in have]
        if missing:
            raise CdcError(
                f"{len(missing)} batch(es) have no snapshot result ({', '.join(missing[:5])}). "
                "Fix: clear their snapshot tasks (or the failed map indexes) and run them again."
            )
        for r in results:
            f = have.get(r["batch_id"])
            if f is None or f.high_watermark != BinlogOffset.from_dict(r["high_watermark"]):
                raise CdcError(
                    f"batch {r['batch_id']}: its XCom and its result file disagree on the high "
                    "watermark (the batch ran again after this task's input was produced). "
                    "Fix: clear this task so it reads the current results."
                )
        state.write_finished(finished)
        low = min(f.high_watermark for f in finished)
        self.log.info(
            "snapshot complete: %d batches, %d rows; the stream starts at the minimum HW %s",
            len(finished),
            sum(int(r.get("rows") or 0) for r in results),
            low,
        )

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Every captured table in, their sink tables out (with Airflow's OpenLineage provider)."""
        from ..lineage import pipeline_lineage

        return pipeline_lineage(self.state_location, self.aws_conn_id)

    @config_errors_fail_at_once
    def execute(self, context: Any) -> dict[str, Any]:
        use_credentials(storage_credentials(self.aws_conn_id or None))
        state = StateStore(self.state_location)
        config = read_config(state)
        results = _results_list(self.snapshot_results)
        if config.startup_mode == "initial":
            self._hand_off(state, results)
        elif config.startup_mode == "snapshot":
            self.log.info("startup mode 'snapshot': the snapshot is done and no stream is started")
            return {"running": False}
        control = self.control()
        status = control.running()
        if status is not None:
            self.log.info(
                "the stream is already running (pid %s, micro-batch %s, lag %s s): not starting another",
                status.pid,
                status.batch_id,
                status.lag_now(),
            )
            return status_summary(status)
        status = control.launch()
        summary = status_summary(status)
        offset = summary.get("committed_offset") or {}
        self.log.info(
            "stream running: micro-batch %s committed at %s:%s, lag %s s. It runs on outside this DAG "
            "run: the mysql_cdc_stream_watchdog DAG checks it every 5 minutes (alive, lag, last commit, "
            "its log) and relaunches it if it dies.",
            status.batch_id,
            offset.get("file"),
            offset.get("position"),
            summary["lag_s"],
        )
        return summary
