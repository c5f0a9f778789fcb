"""The stream source's unit tests run without a server: where the driver asks which server it
reads (``placement.py``), one unchanging server answers, and offsets carry no GTID state."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.spark.stream.server import placement

ONE_SERVER = "mariadb:1"


@pytest.fixture(autouse=True)
def one_server(monkeypatch, request):
    if "real_placement" in request.keywords:
        return
    monkeypatch.setattr(placement.Placement, "resolve", lambda self, off: (off, ONE_SERVER))
    monkeypatch.setattr(placement.Placement, "place", lambda self, off, expect: off.placed(None, ONE_SERVER))
    monkeypatch.setattr(placement.Placement, "handoff", lambda self, server, start: None)
