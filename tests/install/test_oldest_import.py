"""The support matrix's floor, in CI: the wheel installed with pip's resolver and no constraints
file next to the OLDEST versions setup.cfg admits (every install_requires entry at its lower
bound) is listed by ``airflow providers list``, registers the ``mysql_cdc`` connection type, and
the DAG template imports with no import errors (``scripts/compat.py --matrix oldest
--import-only``; the sdist and wheel are built and ``twine check``-ed on the way). The unit and
end-to-end tests at those versions, and the newest versions, are ``make compat``'s.

A new venv per run (about a minute with pip's cache warm, a few on a clean machine).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_the_oldest_supported_versions_install_and_import_the_dag_template(tmp_path):
    p = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "compat.py"),
            "--matrix",
            "oldest",
            "--import-only",
            "--work",
            str(tmp_path),
        ],
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=1500,
    )
    lines = {line.split()[1]: line for line in p.stdout.splitlines() if line.startswith("compat target=")}
    shown = f"{p.stdout[-6000:]}\n{p.stderr[-3000:]}"
    assert p.returncode == 0, shown
    package, oldest = lines["target=package"], lines["target=oldest"]
    assert package.endswith("result=ok") and "twine_check=ok" in package and "contents=ok" in package, shown
    assert oldest.endswith("result=ok"), shown
    for check in (
        "providers_list=ok",
        "connection_type=ok",
        "dag_import=ok",
        "import_errors=0",
        "off_floor=none",
    ):  # every requirement installed at its lower bound
        assert check in oldest.split(), shown
    shutil.rmtree(tmp_path / "venv-oldest", ignore_errors=True)  # ~1 GB (PySpark's jars)
