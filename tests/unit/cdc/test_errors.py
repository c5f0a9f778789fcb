"""The product's own message first in a failure text Spark and py4j wrapped."""

from __future__ import annotations

from airflow_provider_mysqlcdc.cdc.errors import own_message_first

SPARK_TEXT = (
    """[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch sink.
Reason: An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
  File "/venv/lib/python3.11/site-packages/airflow_provider_mysqlcdc/spark/sinks/postgres/sink.py", line 10, in write
    raise SinkValueError(msg)
airflow_provider_mysqlcdc.spark.sinks.postgres.sink.SinkValueError: shop.orders.note holds a NUL byte, which PostgreSQL text cannot store. Fix: set nul_policy.
	at org.apache.spark.sql.execution.streaming.sources.ForeachBatchSink.callBatchWriter(ForeachBatchSink.scala:60)
"""
    + "\tat org.apache.spark.Something(Some.scala:1)\n" * 60
)


def test_the_products_message_comes_first_and_the_whole_text_follows():
    out = own_message_first(SPARK_TEXT)
    first, rest = out.split("\n\n", 1)
    assert first == (
        "SinkValueError: shop.orders.note holds a NUL byte, which PostgreSQL text cannot store. Fix: set nul_policy."
    )
    assert rest == SPARK_TEXT
    assert own_message_first(out) == out, "already first: unchanged"


def test_a_text_without_the_products_error_is_unchanged():
    text = "java.lang.OutOfMemoryError: Java heap space\n\tat x.y(Z.java:1)"
    assert own_message_first(text) == text
    assert own_message_first("") == ""
