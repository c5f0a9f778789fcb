"""Install this package, as a user would, next to another Airflow release, and check it there.

    python scripts/compat.py [--airflow 3.1.8] [--work .compat] [--unit]

Builds the wheel, makes a clean venv, ``pip install "apache-airflow==<release>" <wheel>`` with
pip's resolver and no constraints file (what a platform team does), then checks:

* ``airflow providers list`` lists the provider and the ``mysql_cdc`` connection type;
* the DAG template imports and its params validate, and ``airflow dags list-import-errors``
  finds nothing;
* pyspark and pyspark-client are one version (pip may pick two; the README's install line
  pins pyspark to the client's version, and this script does the same when they differ);
* with ``--unit``: the unit tests pass there.

The last line sums it up: ``compat airflow=<release> ... result=ok|FAILED``. Not part of
``make test`` (it installs Airflow into a new venv: about a minute with pip's cache warm).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(argv: list[str], env: dict[str, str] | None = None, check: bool = True,
        cwd: Path | None = None) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, env=env, cwd=str(cwd or REPO), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise SystemExit(f"compat: {' '.join(argv[:4])} ... failed ({p.returncode}):\n{p.stdout[-3000:]}\n"
                         f"{p.stderr[-3000:]}")
    return p


def say(msg: str) -> None:
    print(f"compat: {msg}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--airflow", default="3.1.8", help="the Airflow release to install next to")
    ap.add_argument("--work", default=str(REPO / ".compat"), help="where the wheel and the venv go")
    ap.add_argument("--unit", action="store_true", help="also run tests/unit in that venv")
    args = ap.parse_args(argv)
    work = Path(args.work).resolve()
    venv = work / f"venv-airflow-{args.airflow}"
    home = work / f"home-{args.airflow}"
    for d in (venv, home, work / "dist"):
        shutil.rmtree(d, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, str] = {"airflow": args.airflow}
    t0 = time.monotonic()

    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "dist"), str(REPO)])
    wheel = next((work / "dist").glob("airflow_provider_mysqlcdc-*.whl"))
    say(f"built {wheel.name}")
    run([sys.executable, "-m", "venv", str(venv)])
    py, pip = str(venv / "bin" / "python"), [str(venv / "bin" / "python"), "-m", "pip"]
    t1 = time.monotonic()
    run([*pip, "install", "-q", f"apache-airflow=={args.airflow}", str(wheel)], cwd=work)
    results["install_s"] = f"{time.monotonic() - t1:.0f}"
    say(f"installed next to apache-airflow=={args.airflow} in {results['install_s']} s")

    versions = json.loads(run([py, "-c", "import json; from importlib import metadata as m\n"
                                         "out = {}\n"
                                         "for n in ('apache-airflow', 'apache-airflow-providers-apache-spark', "
                                         "'pyspark', 'pyspark-client'):\n"
                                         "    try: out[n] = m.version(n)\n"
                                         "    except m.PackageNotFoundError: out[n] = None\n"
                                         "print(json.dumps(out))"]).stdout)
    results.update({"spark_provider": str(versions["apache-airflow-providers-apache-spark"]),
                    "pyspark": str(versions["pyspark"]), "pyspark_client": str(versions["pyspark-client"])})
    if versions["pyspark-client"] and versions["pyspark"] != versions["pyspark-client"]:
        say(f"pip installed pyspark {versions['pyspark']} beside pyspark-client {versions['pyspark-client']}: "
            f"pinning pyspark=={versions['pyspark-client']} as the README's install line does")
        run([*pip, "install", "-q", f"pyspark=={versions['pyspark-client']}"], cwd=work)
        results["pyspark"] = f"{versions['pyspark-client']} (pip chose {versions['pyspark']})"

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    dags = home / "dags"
    dags.mkdir(parents=True)
    shutil.copy(REPO / "dags" / "mysql_cdc_pipeline.py", dags)
    env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"})
    airflow = str(venv / "bin" / "airflow")
    providers = json.loads(run([airflow, "providers", "list", "-o", "json"], env=env, cwd=work).stdout)
    results["providers_list"] = "ok" if any(p["package_name"] == "airflow-provider-mysqlcdc" for p in providers) \
        else "MISSING"
    conn_types = run([py, "-c", "from airflow.providers_manager import ProvidersManager as P; "
                                "print('mysql_cdc' in P().hooks)"], env=env, cwd=work).stdout.strip()
    results["connection_type"] = "ok" if conn_types.endswith("True") else "MISSING"
    check_dag = ("import importlib.util, sys\n"
                 f"spec = importlib.util.spec_from_file_location('t', {str(dags / 'mysql_cdc_pipeline.py')!r})\n"
                 "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
                 "m.dag.params.validate(); print(len(m.dag.tasks), len(m.dag.params))")
    results["dag_import"] = "ok" if run([py, "-c", check_dag], env=env, cwd=work).stdout.strip() else "FAILED"
    run([airflow, "db", "migrate"], env=env, cwd=work)
    errors = run([airflow, "dags", "list-import-errors", "-o", "json"], env=env, cwd=work, check=False)
    text = errors.stdout.strip()
    results["import_errors"] = "0" if text in ("", "[]") or "No data found" in text else text[:300]
    if args.unit:
        run([*pip, "install", "-q", "pytest", "pytest-timeout", "hypothesis", "selenium"], cwd=work)
        unit_env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        unit_env["PATH"] = f"{venv / 'bin'}{os.pathsep}{unit_env.get('PATH', '')}"
        p = run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit"], env=unit_env, check=False)
        summary = [line for line in p.stdout.splitlines() if " passed" in line or " failed" in line]
        results["unit"] = (summary[-1].strip() if summary else "no summary") + f" (exit {p.returncode})"
        unit_ok = p.returncode == 0
        if p.returncode != 0:
            say(p.stdout[-4000:])
    ok = (results["providers_list"] == "ok" and results["connection_type"] == "ok" and results["dag_import"] == "ok"
          and results["import_errors"] == "0" and (not args.unit or unit_ok))
    results["total_s"] = f"{time.monotonic() - t0:.0f}"
    print("compat " + " ".join(f"{k}={v.replace(' ', '_')}" for k, v in results.items())
          + f" result={'ok' if ok else 'FAILED'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
