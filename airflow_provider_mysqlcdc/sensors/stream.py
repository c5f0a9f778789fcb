"""Watch the binlog stream: health, lag, and bring it back when it died."""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from .._airflow_compat import AirflowSkipException
from ..cdc.errors import CdcError, ConfigError
from ..cdc.snapshot.resnapshot import status as resnapshot_status
from ..cdc.state import StateStore
from ..cdc.store.object_store import use_credentials
from ..fail_fast import fail_fast
from ..hooks.object_storage import storage_credentials
from ..hooks.stream import LAUNCH_REL, StreamControl, status_summary
from ..links import StreamSparkUiLink

LOG_TAIL_LINES = 15


class MySqlCdcStreamSensor(BaseSensorOperator):
    """Succeeds when the stream runs and is at most ``max_lag_s`` seconds behind the binlog head.

    The stream outlives the DAG run that started it, so this sensor is how a user sees it
    from Airflow: every check logs whether it is alive (pid, host), its last committed
    micro-batch and when, its lag and bytes behind the head, and the tail of its log; the
    XCom holds the same figures, and each asset in ``outlets`` gets an event whose ``extra``
    carries them (the Assets view shows them).

    A dead stream (its driver's lease in the state location expired, or, on this host, its
    process is gone; a stream stopped on request is left stopped) is
    relaunched from its checkpoint when ``relaunch`` is set (nothing is lost: it resumes after
    the last committed micro-batch), else the sensor fails. A state location where no stream
    was ever started has nothing to watch: the task is skipped. Connection ids not given
    here come from the last launch (``stream/launch.json`` in the state location), so the
    watchdog restarts a PostgreSQL-sink stream with its sink connection.

    :param state_location: the pipeline's state location. (templated)
    :param mysql_cdc_conn_id: the source connection (default: the one the stream was launched with). (templated)
    :param spark_conn_id: the Spark connection (default: as launched, else ``spark_default``). (templated)
    :param sink_conn_id: the PostgreSQL sink's connection (default: as launched). (templated)
    :param max_lag_s: succeed only when the lag is at most this (None: any lag). (templated)
    :param relaunch: start a dead stream again. (templated)
    :param stop: stop the stream instead of watching it (a stop request through the state location,
        honoured between micro-batches wherever the driver runs); it then stays stopped, also for
        later watchdog runs, until the pipeline's stream task runs again. (templated)
    :param stale_after_s: unused: a driver's lease, renewed every third of ``stream.lease_ttl_s``,
        tells whether it lives, on a cluster as here. Kept so existing DAGs still parse.
    :param start_timeout_s: how long a relaunched stream may take to its first committed micro-batch.
    :param password_file, cluster_provides_password, python_archive, conf: for a relaunch on a cluster, as
        for the stream operator (default: as launched).
    :param aws_conn_id: the ``aws`` connection of a state location on object storage (needed to read
        it, so not taken from the launch record; a relaunch hands its credentials to the stream). (templated)
    """

    template_fields: Sequence[str] = (
        "state_location",
        "mysql_cdc_conn_id",
        "spark_conn_id",
        "sink_conn_id",
        "max_lag_s",
        "relaunch",
        "aws_conn_id",
        "stop",
    )
    ui_color = "#e3f7e3"
    operator_extra_links = (StreamSparkUiLink(),)

    def __init__(
        self,
        *,
        state_location: str,
        mysql_cdc_conn_id: str | None = None,
        spark_conn_id: str | None = None,
        sink_conn_id: str | None = None,
        max_lag_s: float | None = None,
        relaunch: bool = True,
        stale_after_s: float = 300.0,
        start_timeout_s: float = 600.0,
        password_file: str | None = None,
        cluster_provides_password: bool | None = None,
        python_archive: str | None = None,
        conf: Mapping[str, str] | None = None,
        aws_conn_id: str | None = None,
        stop: Any = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.aws_conn_id = aws_conn_id
        self.stop = stop
        self.state_location = state_location
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.spark_conn_id = spark_conn_id
        self.sink_conn_id = sink_conn_id
        self.max_lag_s = max_lag_s
        self.relaunch = relaunch
        self.stale_after_s = stale_after_s
        self.start_timeout_s = start_timeout_s
        self.password_file = password_file
        self.cluster_provides_password = cluster_provides_password
        self.python_archive = python_archive
        self.conf = dict(conf or {})

    def control(self) -> StreamControl:
        return StreamControl.from_state(
            self.state_location,
            mysql_cdc_conn_id=self.mysql_cdc_conn_id,
            spark_conn_id=self.spark_conn_id,
            sink_conn_id=self.sink_conn_id,
            password_file=self.password_file,
            cluster_provides_password=self.cluster_provides_password,
            python_archive=self.python_archive,
            conf=self.conf or None,
            start_timeout_s=self.start_timeout_s,
            stale_after_s=self.stale_after_s,
            aws_conn_id=self.aws_conn_id,
        )

    def poke(self, context: Any) -> PokeReturnValue | bool:
        from ..cdc.coerce import truthy

        use_credentials(storage_credentials(self.aws_conn_id or None))
        state = StateStore(self.state_location)
        if not state.exists(LAUNCH_REL) and not state.stream_started():
            raise AirflowSkipException(
                f"no binlog stream has been started with the state location {self.state_location} yet: nothing "
                "to watch. Trigger the pipeline DAG first (its stream task starts the stream)."
            )
        if truthy(self.stop):
            self._stop_stream(state)
        control = self.control()
        self._check_server(control)
        status = control.running()
        if status is not None and getattr(status, "state", None) == "failed":
            self._refuse_relaunch_when_not_exact(state)  # still exiting, but already stopped for good
        if status is None and state.exists(state.STOPPED_ON_REQUEST):
            raise AirflowSkipException(
                f"the stream of {self.state_location} was stopped on request "
                f"({(state.read_json(state.STOPPED_ON_REQUEST) or {}).get('reason')}): not relaunching it. "
                "Run the pipeline's stream task to start it again."
            )
        if status is None:
            self._refuse_relaunch_when_not_exact(state)
            if not truthy(self.relaunch):
                raise CdcError(
                    f"the stream of {self.state_location} is not running. Fix: rerun the pipeline's "
                    "stream task, or set relaunch=True on this sensor."
                )
            self.log.warning("the stream is not running: relaunching it from its checkpoint")
            status = self._relaunch(control)
        summary = status_summary(status)
        summary["checked_at"] = time.time()
        summary["resnapshots"] = resnapshot_status(state)
        summary["consistency"] = _consistency(state)
        self._report(summary, control)
        self._record_asset_events(context, summary)
        lag = summary.get("lag_s")
        if self.max_lag_s not in (None, "") and (lag is None or lag > float(self.max_lag_s)):
            self.log.warning(
                "lag %s s is above max_lag_s=%s: checking again in %s s", lag, self.max_lag_s, self.poke_interval
            )
            return False
        return PokeReturnValue(is_done=True, xcom_value=summary)

    def _stop_stream(self, state: StateStore) -> None:
        """Stop it and leave the mark that keeps later watchdog runs from relaunching it."""
        from ..spark.runtime.stream_launcher import stop_stream

        reason = f"stopped from Airflow ({self.dag_id} triggered with stop_stream)"
        stopped = stop_stream(state, reason)
        state.write_json(state.STOPPED_ON_REQUEST, {"reason": reason, "at": time.time()})
        raise AirflowSkipException(
            ("the stream stopped" if stopped else "no stream was running")
            + f": it stays stopped until the pipeline's stream task runs again ({self.state_location})."
        )

    def _relaunch(self, control: StreamControl) -> Any:
        """Launch the stream; when another launcher (a second watchdog, the pipeline's stream task)
        won the race for the stream's lease meanwhile, its stream is the one to watch."""
        from ..cdc.source.statements import NOT_EXACT_MARKER
        from ..spark.runtime.stream_launcher import StreamFailedError, StreamStartError

        try:
            status = control.launch()
        except StreamFailedError as e:
            # the relaunched stream itself failed (judged by what it did, not by having started):
            # its reason is the check's; one it cannot get past is not retried
            if NOT_EXACT_MARKER in e.reason:
                raise fail_fast(self.log, ConfigError(f"the relaunched stream stopped: {_first_line(e.reason)}"))
            raise
        except StreamStartError:
            other = control.running()
            if other is None:
                raise
            self.log.info(
                "another launcher started the stream meanwhile (pid %s on %s): watching that one",
                other.pid,
                getattr(other, "host", None),
            )
            return other
        self.log.info("stream relaunched: micro-batch %s committed", status.batch_id)
        return status

    def _check_server(self, control: StreamControl) -> None:
        """The binlog settings the stream's exactness rests on, on every check: a switch to
        STATEMENT logging loses rows while the stream still looks healthy."""
        import contextlib

        from ..cdc.source.server import server_version
        from ..cdc.source.validation import ServerValidationError, check_variables, read_variables
        from ..hooks.mysql_cdc import MySqlCdcHook

        source = MySqlCdcHook(control.mysql_cdc_conn_id).get_source_config()
        with contextlib.closing(source.connect()) as conn:
            version = server_version(conn)
            errors = check_variables(version, read_variables(conn))
        if errors:
            error = ServerValidationError(f"{version} at {source.host}:{source.port} (the stream's source)", errors)
            raise fail_fast(
                self.log,
                ConfigError(
                    f"{error} A stream reading a binlog logged this way cannot stay exact: changes logged as "
                    "statements have no rows to apply. After fixing the server, load the affected tables again "
                    "(trigger the pipeline with reset=true)."
                ),
            )

    def _refuse_relaunch_when_not_exact(self, state: StateStore) -> None:
        """A stream that stopped because it could no longer be exact would stop again at the same
        place: report its reason instead of relaunching it."""
        from ..cdc.source.statements import NOT_EXACT_MARKER
        from ..spark.runtime.stream_status import read_status

        status = read_status(state)
        if status is not None and status.state == "failed" and NOT_EXACT_MARKER in (status.exception or ""):
            reason = status.exception or ""
            start = reason.find("the binlog at ")
            message = reason[start:].splitlines()[0] if start >= 0 else _first_line(reason)
            raise fail_fast(self.log, ConfigError("the stream stopped and is not relaunched: " + message))

    def _report(self, summary: dict[str, Any], control: StreamControl) -> None:
        """One health line a user can read in the task log, then the tail of the stream's log."""
        committed_at = summary.get("committed_at") or summary.get("updated_at")
        ago = f"{time.time() - committed_at:.0f} s ago" if committed_at else "not yet"
        lag = summary.get("lag_s")
        self.log.info(
            "stream alive: pid %s on %s; last commit: micro-batch %s at %s, %s; lag %s; %s bytes of "
            "binlog behind the head",
            summary.get("pid"),
            summary.get("host"),
            summary.get("batch_id"),
            _offset_text(summary.get("committed_offset")),
            ago,
            f"{lag:.1f} s" if isinstance(lag, (int, float)) else "unknown (no head sample yet)",
            summary.get("behind_bytes"),
        )
        rs = summary.get("resnapshots") or {}
        if rs.get("pending") or rs.get("applied"):
            last = rs["applied"][-1] if rs.get("applied") else None
            self.log.info(
                "re-snapshots: %d waiting for the stream%s; %d taken over%s",
                len(rs["pending"]),
                " (" + ", ".join(f"{p['batch']} for {p['waiting_s']:.0f} s" for p in rs["pending"]) + ")"
                if rs["pending"]
                else "",
                rs.get("applied_total", 0),
                ""
                if last is None
                else f", last {last['batch']}: "
                + (
                    f"superseded ({last['superseded']})"
                    if last.get("superseded")
                    else f"{last.get('rows')} rows in micro-batch {last.get('micro_batch')}"
                ),
            )
        self.log.info("%s", _consistency_line(summary.get("consistency")))
        tail = control.log_tail(LOG_TAIL_LINES)
        if tail:
            self.log.info("last %d lines of the stream's log (%s):", LOG_TAIL_LINES, control.log_path() or "")
            for line in tail.splitlines():
                self.log.info("  | %s", line)

    def _record_asset_events(self, context: Any, summary: dict[str, Any]) -> None:
        outlet_events = context.get("outlet_events") if hasattr(context, "get") else None
        if outlet_events is None:  # an accessor nothing was asked of yet is empty (falsy), not absent
            return
        extra = {
            k: summary.get(k)
            for k in (
                "running",
                "batch_id",
                "committed_offset",
                "committed_at",
                "lag_s",
                "behind_bytes",
                "pid",
                "host",
                "checked_at",
            )
        }
        from airflow.sdk import AssetAlias

        from ..assets import emit_table_events, table_assets

        for outlet in self.outlets or ():
            if not isinstance(outlet, AssetAlias):
                outlet_events[outlet].extra = extra
        if any(isinstance(o, AssetAlias) for o in self.outlets or ()):
            # the stream's progress per captured table, on the pipeline's alias of its sink tables
            from ..cdc.store.pipeline_file import read_config

            state = StateStore(self.state_location)
            plan = state.read_plan()
            tables = list(plan.schemas) if plan is not None else []
            if tables:
                config = read_config(state)
                emit_table_events(context, self.outlets, table_assets(config.sink, tables, config.rules), extra)


def _consistency(state: StateStore) -> dict[str, Any] | None:
    """The last consistency check's outcome, for the health line and the XCom (not its ranges)."""
    from ..spark.consistency import read_report

    try:
        report = read_report(state)
    except Exception:  # noqa: BLE001 - an unreadable report must not fail the health check
        return None
    if not report:
        return None
    return {k: report.get(k) for k in ("checked_at", "consistent", "batches_to_reread", "summary", "micro_batch")}


def _consistency_line(report: Mapping[str, Any] | None) -> str:
    if not report:
        return "consistency: not checked yet (the consistency_check task compares the sink with the source)"
    ago = time.time() - float(report.get("checked_at") or 0)
    verdict = (
        "CONSISTENT"
        if report.get("consistent")
        else ("DIFFERS, read again batch(es) " + ", ".join(report.get("batches_to_reread") or []))
    )
    return f"consistency: {verdict} ({ago:.0f} s ago): {report.get('summary')}"


def _offset_text(offset: Mapping[str, Any] | None) -> str:
    if not offset:
        return "-"
    return f"{offset.get('file')}:{offset.get('position')}"


def _first_line(reason: str) -> str:
    """The stream's own error out of a Spark failure text: from the engine's exception name on."""
    for line in reason.splitlines():
        if "Error: " in line and "airflow_provider_mysqlcdc" in line:
            return line.split("Error: ", 1)[1].strip()
    return reason.splitlines()[0] if reason else reason
