#!/usr/bin/env bash
# Installs whatever `make demo` / `make test` need and is missing on this machine:
# Debian packages (MariaDB server and client, MariaDB Connector/J, PostgreSQL, Chromium and its
# WebDriver for the browser tests in tests/ui),
# a Java 17+ runtime check, and the project's virtualenv with its pinned Python packages.
# Safe to run again: every step checks first and does nothing when already satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

need_pkgs=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need_pkgs+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || need_pkgs+=(mariadb-client)
command -v mariadb-binlog >/dev/null 2>&1 || need_pkgs+=(mariadb-client)
[ -f /usr/share/java/mariadb-java-client.jar ] || need_pkgs+=(libmariadb-java)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_pkgs+=(postgresql)
# tests/ui drive a real Airflow UI with Selenium: Debian's browser and driver (same version).
[ -x /usr/bin/chromium ] || need_pkgs+=(chromium)
[ -x /usr/bin/chromedriver ] || need_pkgs+=(chromium-driver)
java_ok=0
if command -v java >/dev/null 2>&1; then
  jv=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  if [ -n "$jv" ] && [ "$jv" -ge 17 ]; then java_ok=1; fi
fi
[ "$java_ok" = 1 ] || need_pkgs+=(openjdk-17-jre-headless)

if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # policy-rc.d keeps apt from starting a system-wide MariaDB/PostgreSQL: we run private instances.
  $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

jv=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
if [ -z "$jv" ] || [ "$jv" -lt 17 ]; then
  echo "bootstrap: Spark 4 needs Java 17 or newer; found '${jv:-none}'. Install openjdk-17-jre-headless." >&2
  exit 1
fi

PY=${PYTHON:-python3}
stamp=".venv/.installed-$(cat setup.cfg pyproject.toml constraints.txt harness/pyproject.toml | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  if [ ! -x .venv/bin/python ]; then
    echo "bootstrap: creating .venv with $($PY --version)"
    $PY -m venv .venv
  fi
  echo "bootstrap: installing Python packages into .venv (first time takes a few minutes)"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # setup.cfg declares ranges (the package installs into other Airflow releases too); the
  # project's own venv takes the exact versions of constraints.txt.
  .venv/bin/python -m pip install -q -e '.[dev]' -c constraints.txt
  # The test harness (harness/mysqlcdc_harness), imported by tests/, bench/ and scripts/; its
  # dependencies are the dev extras above.
  .venv/bin/python -m pip install -q --no-deps -e harness
  rm -f .venv/.installed-*
  touch "$stamp"
fi

# Spark starts its Python processes with pyspark.zip first on the path, and that zip ships
# without bytecode: add it once, so each process does not compile PySpark again (~0.5 s each;
# see airflow_provider_mysqlcdc/spark/pyspark_bytecode.py). Does nothing when already done.
# Only the venv's own pyspark: a SPARK_HOME set for other work is left alone.
venv_spark=$(.venv/bin/python -c "import importlib.util as u; print(u.find_spec('pyspark').submodule_search_locations[0])")
.venv/bin/python -m airflow_provider_mysqlcdc.spark.runtime.pyspark_bytecode --quiet --spark-home "$venv_spark"

# The package is installed in editable mode, and where PYTHONDONTWRITEBYTECODE is set (as on
# this project's CI machines) Python never writes its bytecode: every Python process Spark
# starts (the stream source's runner at each query start, each worker) compiled the package
# again (~0.1 s of a stream's start-up). A wheel install compiles at install time; this does
# the same for the checkout. Stale files are harmless: Python checks each against its source.
.venv/bin/python -m compileall -q airflow_provider_mysqlcdc >/dev/null

# Every local Spark driver the tests (and `make demo`) start maps Spark's classes from a
# class-data-sharing archive when this host has one (spark/runtime/class_sharing.py): measured
# here, a local job's start 8.2 s -> 4.5 s, 9.6 -> 5.3 core-s. Built once per JDK and Spark
# (about a minute); does nothing when the archive is there.
.venv/bin/python -m airflow_provider_mysqlcdc.spark.runtime.class_sharing prepare 2>&1 | grep -v -E "WARN|log4j|setLogLevel" || true
