"""What the pipeline DAG's Docs panel and the trigger form tell users matches what the code does.

Users act on these texts in the UI: a doc that says a clear is refused keeps them from a supported
recovery, and a help text that says "one SELECT per chunk" makes them tune the wrong knob.
"""

from __future__ import annotations

from airflow_provider_mysqlcdc.cdc.settings import SETTINGS
from airflow_provider_mysqlcdc.pipelines.dag_docs import pipeline_doc
from airflow_provider_mysqlcdc.spark.snapshot.batch_reader import ROWS_PER_SELECT


def _doc() -> str:
    return pipeline_doc("mysql_cdc_stream_watchdog", ["shop.orders"], "a Delta Lake", None, (), ())


def test_the_docs_say_a_finished_batch_can_be_read_again_while_streaming() -> None:
    doc = _doc()
    assert "only\nbefore the stream has started" not in doc and "refuses" not in doc
    assert "after the stream started" in doc and "hands its rows to the stream" in doc


def test_the_chunk_size_help_does_not_promise_one_select_per_chunk() -> None:
    """The snapshot reads runs of consecutive chunks in one SELECT (``batch_reader.select_groups``)."""
    help_text = next(s for s in SETTINGS if s.name == "chunk_size").description
    assert "one SELECT" not in help_text and "one chunk" not in help_text
    assert f"{ROWS_PER_SELECT:,}" in help_text, "the help names the rows a SELECT reads; keep it in step"
