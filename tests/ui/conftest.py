"""Fixtures of the browser tests: a real Airflow 3 (its four services) and a logged-in Chromium.

Both are module-scoped: a test module overrides ``ui_dags_folder`` (write its DAG files there)
and ``ui_extra_env`` (variables every service and task gets) to get the Airflow it needs.
Chromium and chromium-driver come from Debian (``make bootstrap``); if they are missing the
fixture fails, it does not skip. Screenshots go to ``tests/ui/artifacts/<module>/`` (or
``$MYSQLCDC_UI_ARTIFACTS/<module>/``), with the services' logs copied next to them at the end,
and a screenshot plus the page's HTML of a failed test.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from mysqlcdc_harness.airflow_services import AirflowServices
from mysqlcdc_harness.browser import artifacts_dir, open_browser_logged_in

_UI_DIR = Path(__file__).resolve().parent
_FAILED = pytest.StashKey[bool]()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _UI_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.ui)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_FAILED] = True
    return report


def _module_artifacts(request) -> Path:
    path = artifacts_dir() / request.module.__name__.rsplit(".", 1)[-1]
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def ui_dags_folder(tmp_path_factory) -> Path:
    """The services' DAGs folder; a module overrides this fixture to put its DAG files in."""
    return tmp_path_factory.mktemp("ui-dags")


@pytest.fixture(scope="module")
def ui_extra_env() -> dict[str, str]:
    """Environment every service (and so every task) gets, e.g. MYSQLCDC_STATE_ROOT."""
    return {}


@pytest.fixture(scope="module")
def airflow_ui(request, ui_dags_folder, ui_extra_env):
    services = AirflowServices(ui_dags_folder, extra_env=ui_extra_env)
    try:
        services.start()
        out = _module_artifacts(request)
        (out / "service-timings.json").write_text(json.dumps(services.timings, indent=2))
        print(
            f"\nAirflow services up at {services.base_url} in {services.timings['start_total_s']:.1f}s "
            f"(db migrate {services.timings['db_migrate_s']:.1f}s); logs {services.logs_dir}",
            file=sys.stderr,
        )
        yield services
    finally:
        services.stop()
        shutil.copytree(services.logs_dir, _module_artifacts(request) / "service-logs", dirs_exist_ok=True)
        services.cleanup()


@pytest.fixture(scope="module")
def airflow_api(airflow_ui):
    return airflow_ui.api()


@pytest.fixture(scope="module")
def browser(request, airflow_ui):
    b = open_browser_logged_in(
        airflow_ui.base_url, airflow_ui.user, airflow_ui.password, artifacts=_module_artifacts(request)
    )
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(autouse=True)
def _ui_failure_artifacts(request):
    """After a failed test: the page as it was (PNG + HTML) and the tails of the services' logs."""
    yield
    if not request.node.stash.get(_FAILED, False):
        return
    if "browser" in request.fixturenames:
        try:
            shot = request.getfixturevalue("browser").dump(f"FAILED-{request.node.name}")
            print(f"failure screenshot: {shot}", file=sys.stderr)
        except Exception as e:  # the browser itself may be what failed
            print(f"no failure screenshot: {e!r}", file=sys.stderr)
    if "airflow_ui" in request.fixturenames:
        print(request.getfixturevalue("airflow_ui").logs_tail(30), file=sys.stderr)
