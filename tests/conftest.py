"""Fixtures every test shares: a private MariaDB, a local SparkSession, fresh databases.

Each fixture stops what it starts.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from mysqlcdc_harness import airflow_env
from mysqlcdc_harness.mariadb import MariaDB

# Before anything imports airflow: a private AIRFLOW_HOME with a SQLite metadata DB (one per
# pytest-xdist worker).
_AIRFLOW_HOME = airflow_env.configure()
# The local Spark Connect servers the tests start live in this session's (worker's) own runtime
# directory, not the user's ~/.mysqlcdc, and are stopped when the session ends.
os.environ["MYSQLCDC_RUNTIME_DIR"] = str(_AIRFLOW_HOME / "connect-runtime")

_db_counter = itertools.count()


@pytest.fixture(autouse=True)
def _no_storage_credentials_leak():
    """Operators run in the test process give it their storage credentials (``use_credentials``,
    as a task process gets them); they are taken back after each test, so no later test (one that
    requires a process without AWS credentials) depends on which tests ran before it on its worker."""
    from airflow_provider_mysqlcdc.cdc.store.object_store import ALL_NAMES

    before = {k: os.environ.get(k) for k in ALL_NAMES}
    yield
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def mariadb():
    base = Path(tempfile.mkdtemp(prefix="mysqlcdc-mariadb-"))
    server = MariaDB(base_dir=base, server_id=1)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fresh_db(mariadb, request):
    """A new, empty database on the session's server, dropped afterwards."""
    name = f"t{os.getpid()}_{next(_db_counter)}"
    mariadb.execute(f"CREATE DATABASE `{name}`")
    try:
        yield name
    finally:
        try:
            mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")
        except Exception:  # the server may have been stopped by the test
            pass


@pytest.fixture(scope="session")
def spark():
    from mysqlcdc_harness.spark import local_spark

    session = local_spark(light_jit=True)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def tmp_dir():
    d = Path(tempfile.mkdtemp(prefix="mysqlcdc-test-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres():
    """A private PostgreSQL (its own data dir, port and socket dir), stopped afterwards."""
    from mysqlcdc_harness.postgres import running_postgres

    with running_postgres() as server:
        yield server


# `make test` runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``). A module whose
# tests share a module-scoped fixture (one DAG run, one Airflow UI, one key matrix) is one group,
# kept on one worker so its set-up runs once; every other test goes on its own, the long end-to-end
# and browser tests first and the many short unit tests last, so the two workers end together.
_FIRST = ("tests/e2e/", "tests/ui/", "tests/install/", "tests/integration/")
_SHARED_SCOPES = ("module", "class", "package")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    def rank(item) -> int:
        path = item.nodeid.replace("\\", "/")
        return next((i for i, prefix in enumerate(_FIRST) if path.startswith(prefix)), len(_FIRST))

    items.sort(key=rank)  # stable: the order inside each group stays
    grouping = bool(getattr(config.option, "loadgroup", False))  # set on xdist's workers
    for item in items:
        defs = getattr(item, "_fixtureinfo", None)
        scopes = {d.scope for ds in (defs.name2fixturedefs.values() if defs else ()) for d in ds}
        if not scopes & set(_SHARED_SCOPES):
            continue
        group = item.nodeid.split("::", 1)[0]  # the module
        item.add_marker(pytest.mark.xdist_group(group))
        if grouping and hasattr(item, "_id"):
            # pytest-xdist 3.8 puts the group into the node id through ``_nodeid``, which pytest 9
            # no longer reads (its node ids are ``_id``): done here the way pytest 9 stores them
            from _pytest.nodeid import coerce_node_id

            item._id = coerce_node_id(f"{item.nodeid}@{group}")


def pytest_sessionfinish(session, exitstatus):
    from airflow_provider_mysqlcdc.spark.runtime.connect_server import stop_local_servers

    try:
        stop_local_servers(Path(os.environ["MYSQLCDC_RUNTIME_DIR"]))
    except Exception:  # clean-up only
        pass


def pytest_unconfigure(config):
    """py4j's client connections log from ``__del__`` while the interpreter shuts down, when
    pytest has already closed the streams its handlers write to; logging then prints a
    '--- Logging error ---' traceback after the summary. Those late records are dropped."""
    import logging

    logging.raiseExceptions = False
