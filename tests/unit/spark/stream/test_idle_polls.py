"""An idle stream asks the source for new offsets every IDLE_POLL_MS, not Spark's 10 ms, unless the
session sets its own delay (spark/stream/query.py:_pace_idle_polls)."""

from __future__ import annotations

from airflow_provider_mysqlcdc.spark.stream.query import IDLE_POLL_MS, _pace_idle_polls

KEY = "spark.sql.streaming.pollingDelay"


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)

    def get(self, key: str, default=None):
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


class _Session:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = _Conf(values)


def test_spark_s_default_delay_is_raised():
    for start in ({}, {KEY: "10ms"}):
        s = _Session(start)
        _pace_idle_polls(s)  # type: ignore[arg-type]
        assert s.conf.values[KEY] == f"{IDLE_POLL_MS}ms"


def test_a_delay_the_user_set_is_kept():
    s = _Session({KEY: "2s"})
    _pace_idle_polls(s)  # type: ignore[arg-type]
    assert s.conf.values[KEY] == "2s"
