"""Finding pipelines' state locations under search roots (local folders here; the same fsspec
calls serve s3://), and the watchdog DAG of many pipelines built on it."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.errors import ConfigError
from airflow_provider_mysqlcdc.cdc.store.state_finder import find_state_locations, unique_locations


def _state(path) -> None:
    path.mkdir(parents=True)
    (path / "pipeline.json").write_text("{}")


def test_state_locations_are_found_up_to_the_depth_and_never_inside_one(tmp_path):
    _state(tmp_path / "a")
    _state(tmp_path / "team" / "b")
    _state(tmp_path / "x" / "y" / "c")
    _state(tmp_path / "x" / "y" / "z" / "too_deep")
    _state(tmp_path / "a" / "stream" / "nested")  # inside a state location: not searched
    (tmp_path / "empty").mkdir()
    found = find_state_locations([str(tmp_path)])
    assert found == [str(tmp_path / "a"), str(tmp_path / "team" / "b"), str(tmp_path / "x" / "y" / "c")]
    assert find_state_locations([str(tmp_path)], depth=1) == [str(tmp_path / "a")]
    assert find_state_locations([str(tmp_path / "a")]) == [str(tmp_path / "a")]  # a root that is one


def test_a_missing_root_is_named_with_the_fix(tmp_path):
    with pytest.raises(ConfigError, match=r"search root '.*nope' does not exist.*Fix:"):
        find_state_locations([str(tmp_path / "nope")])


def test_given_and_found_locations_are_each_listed_once_in_order():
    assert unique_locations(["/s/b/", "/s/a"], ["/s/a", "/s/c"]) == ["/s/b", "/s/a", "/s/c"]


def test_the_streams_watchdog_maps_one_sensor_per_pipeline():
    from airflow_provider_mysqlcdc.pipelines.dag_builder import build_streams_watchdog

    dag = build_streams_watchdog(search_roots=["s3://lake/state"], state_locations=["/srv/p1"])
    assert set(dag.task_dict) == {"find_pipelines", "stream_health"}
    sensor = dag.task_dict["stream_health"]
    assert sensor.map_index_template == "{{ task.state_location }}"
    assert dag.task_dict["find_pipelines"].downstream_task_ids == {"stream_health"}
    assert dag.params["search_roots"] == ["s3://lake/state"] and dag.params["state_locations"] == ["/srv/p1"]
    assert dag.params.validate() is not None  # the defaults pass the form's schema
