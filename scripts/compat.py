"""Build the package, install it as a user would into clean venvs, and check it there.

    python scripts/compat.py --matrix oldest --matrix newest     # what `make compat` runs
    python scripts/compat.py --matrix oldest --import-only       # what tests/install runs
    python scripts/compat.py --airflow 3.1.8 [--unit] [--e2e]    # next to one Airflow release

First the package: ``python -m build`` makes the sdist and, from that sdist, the wheel (so a
file missing from the sdist shows as a broken wheel), ``twine check --strict`` reads both, and
their contents are checked: the sdist holds setup.cfg, pyproject.toml, README.md and every
module of the package; the wheel every module, the ``apache_airflow_provider`` entry point and
the Requires-Dist of setup.cfg's install_requires, and nothing outside the package.

Then, for each target, a clean venv with pip's resolver and no constraints file (what a
platform team does):

* ``--matrix oldest``: every install_requires entry at its lower bound (``name==lower``, read
  from setup.cfg's ranges), the rest whatever pip picks; the claimed floor, measured;
* ``--matrix newest``: the wheel alone, pip picks the newest releases the ranges allow;
* ``--airflow X``: ``apache-airflow==X`` next to the wheel.

pyspark and pyspark-client (the newer Spark providers require the latter) must be one
version with no pin from the user: a venv where pip picked two fails. Checked in each venv:

* ``airflow providers list`` lists the provider, and the ``mysql_cdc`` connection type is registered;
* the DAG template imports and its params validate; ``airflow dags reserialize`` parses the DAGs
  folder (the template) into the metadata DB and ``airflow dags list-import-errors`` is then empty;
* the unit tests (tests/unit) pass, run with that venv's python and the test tools (pytest,
  hypothesis, ... at the dev extra's pins, installed without moving any version pip chose);
* the end-to-end test passes: the DAG template under ``dag.test()`` against a real MariaDB,
  snapshot batches through Spark Connect then the binlog stream, with writers running, and
  the Delta sink compared with the source row by row (``E2E_TEST`` below). That test counts the
  Spark processes of the whole machine, so it starts once other runs' Spark has ended, and is
  run again (3 attempts at most) only when it failed while another run's Spark was seen; the
  summary line then names the disturbed attempts (``e2e_disturbed_attempts``).

``--matrix`` runs all of these unless ``--import-only``; ``--airflow`` the install checks,
plus ``--unit`` / ``--e2e`` when given. Each target prints the versions it got and one line
``compat target=<label> ... result=ok|FAILED`` (the package's: ``compat target=package ...``).
The exit status is 0 when every line says ok.

Everything works on one copy of the repository's files taken at the start (``src``; see
``snapshot``): the packages are built from it, setup.cfg is read from it, and the tests run from
it without the package's source, so they import the package installed from the wheel, as a
user's Airflow does, and an edit to the working tree meanwhile changes nothing.
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "airflow_provider_mysqlcdc"
DIST_NAME = "airflow-provider-mysqlcdc"
# The smallest test that runs the DAG template's snapshot and stream on a real MariaDB and compares
# the sink with the source (tests/e2e/test_pipeline_dag.py does more: a killed batch, reruns, ...).
E2E_TEST = "tests/e2e/test_connect_runtime.py::test_the_runs_batches_share_one_spark_connect_application"
# ... which watches every process on the machine: one Spark Connect server JVM and no batch's
# spark-submit, or it fails. Another test run's Spark on this machine fails it, so the test starts
# once none is left (waiting up to OTHERS_WAIT_S; a Connect server stops after 5 idle minutes), and
# runs again (up to E2E_ATTEMPTS in all) only when it failed while another run's Spark was seen.
SPARK_JVMS = ("org.apache.spark.sql.connect.service.SparkConnectServer", "org.apache.spark.deploy.SparkSubmit")
OTHERS_WAIT_S = 900
E2E_ATTEMPTS = 3
# What tests/unit and E2E_TEST need besides the package, at the dev extra's pins (the dev extra's
# other tools -- build, twine, selenium for tests/ui, s3fs and moto for the S3 tests -- are not
# installed: some would move the versions under test, e.g. botocore needs python-dateutil<3).
TEST_TOOLS = ("pytest", "pytest-timeout", "hypothesis", "matplotlib")
# Reported in each target's versions line besides setup.cfg's own requirements.
ALSO_REPORT = ("apache-airflow-core", "apache-airflow-task-sdk", "pyspark-client", "grpcio", "sqlalchemy")
# Environment of the caller that must not reach the target venv's Airflow, Spark or pytest.
ENV_DROP_PREFIXES = ("AIRFLOW", "_AIRFLOW", "MYSQLCDC_TEST_", "MYSQLCDC_UI_", "PYSPARK_")
ENV_DROP = {"SPARK_HOME", "PYTHONPATH", "VIRTUAL_ENV", "PYTEST_CURRENT_TEST"}


def run(
    argv: list[str],
    env: dict[str, str] | None = None,
    check: bool = True,
    cwd: Path | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [str(a) for a in argv], env=env, cwd=str(cwd or REPO), capture_output=True, text=True, timeout=timeout
    )
    if check and p.returncode != 0:
        raise Failed(
            f"{' '.join(str(a) for a in argv[:5])} ... failed ({p.returncode}):\n"
            f"{_quiet(p.stdout)[-3000:]}\n{_quiet(p.stderr)[-3000:]}"
        )
    return p


class Failed(Exception):
    """A step that stops its target (the target's line says FAILED, the others still run)."""


def _quiet(text: str) -> str:
    # this machine's pip config names local indexes that may not exist; their warnings are noise
    return "\n".join(line for line in text.splitlines() if not line.startswith("WARNING: Location "))


def say(msg: str) -> None:
    print(f"compat: {msg}", flush=True)


def summary_line(results: dict[str, str], ok: bool) -> str:
    return (
        "compat "
        + " ".join(f"{k}={str(v).replace(' ', '_')}" for k, v in results.items())
        + f" result={'ok' if ok else 'FAILED'}"
    )


# --- what setup.cfg declares ------------------------------------------------------------------


def _setup_cfg(src: Path) -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()  # full-line comments inside a multi-line value are dropped
    cfg.read(src / "setup.cfg")
    return cfg


def install_requires(src: Path = REPO) -> list[Requirement]:
    return [Requirement(line) for line in _setup_cfg(src)["options"]["install_requires"].splitlines() if line.strip()]


def test_tools(src: Path = REPO) -> list[Requirement]:
    """TEST_TOOLS as the dev extra pins them (unpinned if it does not name one)."""
    dev = [Requirement(line) for line in _setup_cfg(src)["options.extras_require"]["dev"].splitlines() if line.strip()]
    pinned = {canonicalize_name(r.name): r for r in dev}
    return [pinned.get(canonicalize_name(name), Requirement(name)) for name in TEST_TOOLS]


def lower_bound(req: Requirement) -> Version:
    """The oldest version a requirement admits: the highest of its ``>=``, ``~=`` and ``==`` bounds."""
    lows = [Version(s.version) for s in req.specifier if s.operator in (">=", "~=", "==", "===")]
    if not lows:
        raise Failed(f"setup.cfg: {req} has no lower bound, so there is no oldest version to install")
    low = max(lows)
    if not req.specifier.contains(low, prereleases=True):
        raise Failed(f"setup.cfg: {req} excludes its own lower bound {low}")
    return low


def oldest_pins(reqs: list[Requirement]) -> list[str]:
    """``name[extras]==lower`` for every requirement: the versions setup.cfg claims still work."""
    pins = []
    for r in reqs:
        extras = f"[{','.join(sorted(r.extras))}]" if r.extras else ""
        marker = f"; {r.marker}" if r.marker else ""
        pins.append(f"{r.name}{extras}=={lower_bound(r)}{marker}")
    return pins


# --- the package --------------------------------------------------------------------------------


def snapshot(work: Path) -> tuple[Path, Path]:
    """One copy of the repository's files (tracked, or new and not ignored) that everything below
    uses: ``src`` builds the packages; ``tests``, the same without the package's source, is where
    the tests run, so their imports of the package find the one installed from the wheel, and the
    package and the tests are of one moment even while someone edits the working tree."""
    src, tests = work / "src", work / "tests-tree"
    for d in (src, tests):
        shutil.rmtree(d, ignore_errors=True)
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]).stdout.split("\0")
    for name in listed:
        if name and (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    shutil.copytree(src, tests, ignore=lambda d, names: [PACKAGE] if Path(d) == src else [])
    return src, tests


def package_modules(src: Path) -> set[str]:
    """The package's modules, as paths relative to the source tree."""
    return {p.relative_to(src).as_posix() for p in (src / PACKAGE).rglob("*.py") if "__pycache__" not in p.parts}


def build_and_check(work: Path, src: Path) -> tuple[dict[str, str], bool, Path | None]:
    """sdist, wheel built from it, twine check, contents. Returns the results, ok, the wheel."""
    dist = work / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    results: dict[str, str] = {}
    t0 = time.monotonic()
    # cwd is the work dir: in the repository, its build/ directory would shadow the `build` module
    try:
        run([sys.executable, "-m", "build", "--outdir", dist, src], cwd=work)
    except Failed as e:
        if "No module named build" in str(e):
            raise Failed(
                "`python -m build` needs the dev extra's build and twine (scripts/bootstrap.sh installs them)"
            ) from e
        raise
    results["build_s"] = f"{time.monotonic() - t0:.0f}"
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    results["sdist"], results["wheel"] = sdist.name, wheel.name
    say(f"built {sdist.name} and, from it, {wheel.name} in {results['build_s']} s")
    twine = run([sys.executable, "-m", "twine", "check", "--strict", sdist, wheel], cwd=work, check=False)
    results["twine_check"] = "ok" if twine.returncode == 0 else "FAILED"
    if twine.returncode != 0:
        say(_quiet(twine.stdout + twine.stderr)[-3000:])
    problems = sdist_problems(sdist, src) + wheel_problems(wheel, src)
    for p in problems:
        say(f"package: {p}")
    results["contents"] = "ok" if not problems else f"{len(problems)}_problems"
    ok = results["twine_check"] == "ok" and not problems
    return results, ok, wheel


def sdist_problems(sdist: Path, src: Path) -> list[str]:
    with tarfile.open(sdist) as tf:
        names = tf.getnames()
    top = names[0].split("/")[0]
    inside = {n[len(top) + 1 :] for n in names if n.startswith(top + "/")}
    need = {"PKG-INFO", "setup.cfg", "pyproject.toml", "README.md"} | package_modules(src)
    return [f"the sdist lacks {n}" for n in sorted(need - inside)]


def wheel_problems(wheel: Path, src: Path) -> list[str]:
    problems = []
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = next(n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info"))
        entry_points = configparser.ConfigParser()
        entry_points.read_string(zf.read(f"{info}/entry_points.txt").decode())
        metadata = Parser().parsestr(zf.read(f"{info}/METADATA").decode())
    problems += [f"the wheel lacks {n}" for n in sorted(package_modules(src) - names)]
    problems += [
        f"the wheel holds {n}, outside the package" for n in sorted(names) if n.split("/")[0] not in (PACKAGE, info)
    ]
    target = entry_points.get("apache_airflow_provider", "provider_info", fallback=None)
    if target != f"{PACKAGE}:get_provider_info":
        problems.append(f"the wheel's apache_airflow_provider entry point is {target!r}")
    declared = {str(r) for r in install_requires(src)}
    published = {str(Requirement(r)) for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r}
    if declared != published:
        problems.append(
            f"the wheel's Requires-Dist differ from setup.cfg: only in setup.cfg {declared - published}, "
            f"only in the wheel {published - declared}"
        )
    if metadata.get("Description-Content-Type", "").split(";")[0] != "text/markdown":
        problems.append(f"Description-Content-Type is {metadata.get('Description-Content-Type')!r}")
    return problems


# --- one target venv ----------------------------------------------------------------------------


def clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_DROP_PREFIXES) and k not in ENV_DROP}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def installed_versions(py: str, names: list[str]) -> dict[str, str | None]:
    code = (
        "import json, sys; from importlib import metadata as m\nout = {}\n"
        "for n in sys.argv[1:]:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: out[n] = None\n"
        "print(json.dumps(out))"
    )
    return json.loads(run([py, "-c", code, *names], cwd=REPO.parent).stdout)


def pytest_summary(p: subprocess.CompletedProcess) -> str:
    lines = [
        line.strip("= ").strip()
        for line in p.stdout.splitlines()
        if re.search(r"\d+ (passed|failed|error|errors|skipped|deselected)\b", line)
    ]
    return (lines[-1] if lines else "no summary") + f" (exit {p.returncode})"


def import_errors(stdout: str) -> str:
    """``0``, or what ``airflow dags list-import-errors -o json`` reported (log lines around it ignored)."""
    if "No data found" in stdout:
        return "0"
    for line in stdout.splitlines():
        if line.strip().startswith("["):
            try:
                found = json.loads(line)
            except ValueError:
                continue
            return "0" if not found else json.dumps(found)[:300]
    return "unreadable:" + stdout.strip()[-200:]


def others_spark(venv: Path) -> dict[int, str]:
    """Spark JVMs (Connect servers, spark-submits) on this machine not of ``venv``, another run's:
    pid -> the Spark installation it runs from (its class path's first entry)."""
    import psutil

    found = {}
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            argv = list(p.info["cmdline"] or [])
        except (psutil.Error, TypeError):
            continue
        cmd = " ".join(argv)
        if any(jvm in cmd for jvm in SPARK_JVMS) and str(venv) not in cmd:
            cp = argv[argv.index("-cp") + 1] if "-cp" in argv[:-1] else cmd
            found[p.info["pid"]] = cp.split(":")[0][:120]
    return found


class OthersWatch:
    """Samples ``others_spark`` every second while the end-to-end test runs."""

    def __init__(self, venv: Path) -> None:
        self.venv, self.seen, self._stop = venv, {}, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.seen.update(others_spark(self.venv))

    def __enter__(self) -> "OthersWatch":
        self.seen.update(others_spark(self.venv))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def wait_for_quiet(label: str, venv: Path) -> None:
    deadline = time.monotonic() + OTHERS_WAIT_S
    while (others := others_spark(venv)) and time.monotonic() < deadline:
        say(
            f"[{label}] waiting for the Spark processes of other runs on this machine to end (pids "
            f"{sorted(others)} of {sorted(set(others.values()))}; the end-to-end test would count them as its own)"
        )
        time.sleep(30)


def check_target(
    label: str,
    install: list[str],
    wheel: Path,
    work: Path,
    src: Path,
    tests: Path,
    *,
    unit: bool,
    e2e: bool,
    results: dict[str, str],
) -> bool:
    venv, home = work / f"venv-{label}", work / f"home-{label}"
    for d in (venv, home):
        shutil.rmtree(d, ignore_errors=True)
    t0 = time.monotonic()
    run([sys.executable, "-m", "venv", venv])
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "--no-input"]
    # the venv's bundled pip is older than ours; install with the same pip release as the project's venv
    run([*pip, "install", "-q", f"pip=={installed_versions(sys.executable, ['pip'])['pip']}"], cwd=work)
    t1 = time.monotonic()
    run([*pip, "install", "-q", *install, wheel], cwd=work)
    results["install_s"] = f"{time.monotonic() - t1:.0f}"
    say(f"[{label}] pip install {' '.join(install + [wheel.name])}: {results['install_s']} s")

    names = [r.name for r in install_requires(src)] + list(ALSO_REPORT)
    got = installed_versions(py, names)
    if got.get("pyspark-client") and got["pyspark"] != got["pyspark-client"]:
        raise SystemExit(
            f"[{label}] pip installed pyspark {got['pyspark']} beside pyspark-client {got['pyspark-client']}: "
            "setup.cfg's ranges must pair them (exclude the pyspark release that has no pyspark-client)"
        )
    say(f"[{label}] versions: " + " ".join(f"{n}={v}" for n, v in got.items() if v))
    results.update(
        {
            "airflow": str(got["apache-airflow"]),
            "spark_provider": str(got["apache-airflow-providers-apache-spark"]),
            "pyspark": str(got["pyspark"]),
            "pyspark_client": str(got["pyspark-client"]),
            "deltalake": str(got["deltalake"]),
            "pyarrow": str(got["pyarrow"]),
            "pandas": str(got["pandas"]),
            "numpy": str(got["numpy"]),
            "sqlglot": str(got["sqlglot"]),
        }
    )
    if label == "oldest":
        off = [
            f"{r.name}={got[r.name]}" for r in install_requires(src) if Version(got[r.name] or "0") != lower_bound(r)
        ]
        results["off_floor"] = ",".join(off) or "none"

    env = clean_env(venv)
    dags = home / "dags"
    dags.mkdir(parents=True)
    shutil.copy(src / "dags" / "mysql_cdc_pipeline.py", dags)
    env.update(
        {"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    )
    airflow = str(venv / "bin" / "airflow")
    providers = json.loads(run([airflow, "providers", "list", "-o", "json"], env=env, cwd=work).stdout)
    results["providers_list"] = "ok" if any(p["package_name"] == DIST_NAME for p in providers) else "MISSING"
    conn_types = run(
        [py, "-c", "from airflow.providers_manager import ProvidersManager as P; print('mysql_cdc' in P().hooks)"],
        env=env,
        cwd=work,
    ).stdout.strip()
    results["connection_type"] = "ok" if conn_types.endswith("True") else "MISSING"
    check_dag = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('t', {str(dags / 'mysql_cdc_pipeline.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "m.dag.params.validate(); print(len(m.dag.tasks), len(m.dag.params))"
    )
    results["dag_import"] = "ok" if run([py, "-c", check_dag], env=env, cwd=work).stdout.strip() else "FAILED"
    run([airflow, "db", "migrate"], env=env, cwd=work)
    # list-import-errors reads the metadata DB: parse the DAGs folder into it first, as a dag-processor does
    run([airflow, "dags", "reserialize"], env=env, cwd=work, check=False)
    errors = run([airflow, "dags", "list-import-errors", "-o", "json"], env=env, cwd=work, check=False)
    results["import_errors"] = import_errors(errors.stdout)
    ok = (
        results["providers_list"] == "ok"
        and results["connection_type"] == "ok"
        and results["dag_import"] == "ok"
        and results["import_errors"] == "0"
    )

    if unit or e2e:
        # The test tools at the dev extra's pins, without moving a version pip chose above.
        frozen = work / f"frozen-{label}.txt"
        frozen.write_text(
            "".join(line + "\n" for line in run([*pip, "freeze"], cwd=work).stdout.splitlines() if " @ " not in line)
        )  # a constraint cannot name a file
        run([*pip, "install", "-q", "-c", frozen, *[str(r) for r in test_tools(src)]], cwd=work)
        # the test harness (mysqlcdc_harness), from the same snapshot; its needs are the tools above
        run([*pip, "install", "-q", "--no-deps", str(tests / "harness")], cwd=work)
        test_env = clean_env(venv)
    if unit:
        t = time.monotonic()
        p = run(
            [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit"], env=test_env, check=False, cwd=tests
        )
        results["unit"] = pytest_summary(p)
        results["unit_s"] = f"{time.monotonic() - t:.0f}"
        say(f"[{label}] unit tests: {results['unit']} in {results['unit_s']} s")
        if p.returncode != 0:
            say(p.stdout[-6000:])
        ok = ok and p.returncode == 0
    if e2e:
        disturbed = []
        for attempt in range(1, E2E_ATTEMPTS + 1):
            wait_for_quiet(label, venv)
            t = time.monotonic()
            with OthersWatch(venv) as watch:
                p = run(
                    [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", E2E_TEST], env=test_env, check=False, cwd=tests
                )
            results["e2e"] = pytest_summary(p)
            results["e2e_s"] = f"{time.monotonic() - t:.0f}"
            say(
                f"[{label}] end-to-end test ({E2E_TEST}), attempt {attempt}: {results['e2e']} in "
                f"{results['e2e_s']} s"
                + (
                    f"; other runs' Spark processes seen meanwhile: pids {sorted(watch.seen)} "
                    f"of {sorted(set(watch.seen.values()))}"
                    if watch.seen
                    else ""
                )
            )
            if p.returncode == 0 or not watch.seen:
                break
            disturbed.append(str(attempt))
            say(p.stdout[-3000:])
        if disturbed:  # said in the summary: an earlier attempt failed beside another run's Spark
            results["e2e_disturbed_attempts"] = ",".join(disturbed)
        if p.returncode != 0:
            say(p.stdout[-6000:])
        ok = ok and p.returncode == 0
    results["total_s"] = f"{time.monotonic() - t0:.0f}"
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--matrix",
        action="append",
        choices=("oldest", "newest"),
        default=[],
        help="the oldest (setup.cfg's lower bounds) or newest versions; may be given twice",
    )
    ap.add_argument(
        "--airflow",
        action="append",
        default=[],
        metavar="RELEASE",
        help="install next to apache-airflow==RELEASE (may be given more than once)",
    )
    ap.add_argument(
        "--import-only",
        action="store_true",
        help="install, providers list, connection type, DAG import and import errors only",
    )
    ap.add_argument("--unit", action="store_true", help="run tests/unit in each venv (implied by --matrix)")
    ap.add_argument("--e2e", action="store_true", help=f"run {E2E_TEST} in each venv (implied by --matrix)")
    ap.add_argument("--work", default=str(REPO / ".compat"), help="where the packages and the venvs go")
    args = ap.parse_args(argv)
    if args.import_only and (args.unit or args.e2e):
        ap.error("--import-only excludes --unit and --e2e")
    if not args.matrix and not args.airflow:
        args.airflow = ["3.1.8"]
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    lines, all_ok = [], True

    src, tests = snapshot(work)
    try:
        pkg_results, pkg_ok, wheel = build_and_check(work, src)
    except Failed as e:
        say(str(e))
        pkg_results, pkg_ok, wheel = {"build": "FAILED"}, False, None
    lines.append(summary_line({"target": "package", **pkg_results}, pkg_ok))
    print(lines[-1], flush=True)
    all_ok &= pkg_ok

    targets: list[tuple[str, list[str], bool, bool]] = []
    for m in dict.fromkeys(args.matrix):
        full = not args.import_only
        install = [] if m == "newest" else None
        targets.append((m, install, full, full))
    for release in args.airflow:
        targets.append((f"airflow-{release}", [f"apache-airflow=={release}"], args.unit, args.e2e))
    for label, install, unit, e2e in targets:
        results: dict[str, str] = {"target": label}
        t0 = time.monotonic()
        try:
            if wheel is None:
                raise Failed("no wheel was built")
            if install is None:
                install = oldest_pins(install_requires(src))
            ok = check_target(label, install, wheel, work, src, tests, unit=unit, e2e=e2e, results=results)
        except (Failed, subprocess.TimeoutExpired) as e:
            say(f"[{label}] {e}")
            lines_ = str(e).splitlines()
            results["error"] = next((line for line in lines_ if line.startswith("ERROR:")), lines_[0])[:200]
            results.setdefault("total_s", f"{time.monotonic() - t0:.0f}")
            ok = False
        lines.append(summary_line(results, ok))
        print(lines[-1], flush=True)
        all_ok &= ok
    if len(lines) > 2:
        print("\n".join(["compat: summary", *lines]), flush=True)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
