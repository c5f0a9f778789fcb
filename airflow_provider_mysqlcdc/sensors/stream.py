"""Watch the binlog stream: health, lag, and bring it back when it died."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from ..cdc.errors import CdcError
from ..hooks.mysql_cdc import MySqlCdcHook
from ..operators._stream import StreamControl, status_summary


class MySqlCdcStreamSensor(BaseSensorOperator):
    """Succeeds when the stream runs and is at most ``max_lag_s`` seconds behind the binlog head.

    A dead stream (local: its process is gone; cluster: no status for ``stale_after_s``) is
    relaunched from its checkpoint when ``relaunch`` is set (nothing is lost: it resumes after
    the last committed micro-batch), else the sensor fails. Lag is "seconds behind the binlog
    head": how long ago the server's binlog ended where the stream has committed up to. The
    XCom holds the status (micro-batch, offsets, lag, bytes behind).

    Put it in a small DAG scheduled every few minutes as the stream's watchdog.

    :param state_location: the pipeline's state location. (templated)
    :param mysql_cdc_conn_id: the source connection. (templated)
    :param spark_conn_id: the Spark connection. (templated)
    :param sink_conn_id: the PostgreSQL sink's connection, if that is the sink. (templated)
    :param max_lag_s: succeed only when the lag is at most this (None: any lag). (templated)
    :param relaunch: start a dead stream again. (templated)
    :param stale_after_s: on a cluster, a status this old means the stream is dead.
    """

    template_fields: Sequence[str] = ("state_location", "mysql_cdc_conn_id", "spark_conn_id", "sink_conn_id",
                                      "max_lag_s", "relaunch")
    ui_color = "#e3f7e3"

    def __init__(self, *, state_location: str, mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
                 spark_conn_id: str = "spark_default", sink_conn_id: str | None = None,
                 max_lag_s: float | None = None, relaunch: bool = True, stale_after_s: float = 300.0,
                 start_timeout_s: float = 600.0, password_file: str | None = None,
                 cluster_provides_password: bool = False, python_archive: str | None = None,
                 conf: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
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

    def poke(self, context: Any) -> PokeReturnValue | bool:
        from ..operators._pipeline import truthy

        control = StreamControl(self.state_location, self.mysql_cdc_conn_id, self.spark_conn_id,
                                self.sink_conn_id or None, self.password_file, self.cluster_provides_password,
                                self.python_archive, self.conf, self.start_timeout_s, self.stale_after_s)
        status = control.running()
        if status is None:
            if not truthy(self.relaunch):
                raise CdcError(f"the stream of {self.state_location} is not running. Fix: rerun the pipeline's "
                               "stream task, or set relaunch=True on this sensor.")
            self.log.warning("the stream is not running: relaunching it from its checkpoint")
            status = control.launch()
            self.log.info("stream relaunched: micro-batch %s committed", status.batch_id)
        summary = status_summary(status)
        lag = summary.get("lag_s")
        self.log.info("stream healthy: micro-batch %s, committed %s, lag %s s, %s bytes behind",
                      summary.get("batch_id"), summary.get("committed_offset"), lag, summary.get("behind_bytes"))
        if self.max_lag_s not in (None, "") and (lag is None or lag > float(self.max_lag_s)):
            self.log.info("lag %s s is above max_lag_s=%s: waiting", lag, self.max_lag_s)
            return False
        return PokeReturnValue(is_done=True, xcom_value=summary)
