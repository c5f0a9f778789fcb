# The two commands a new machine needs: `make demo` and `make test`.
# Both install what is missing first (scripts/bootstrap.sh), then run.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: bootstrap demo test test-serial lint unit compat newcomer docs-screenshots bench-snapshot bench-dag bench-iceberg bench-cluster bench-soak bench-failover clean

bootstrap:
	@./scripts/bootstrap.sh

# SINK=iceberg: the same demo into Apache Iceberg tables (SQLite catalog beside .demo/warehouse).
demo: bootstrap
	$(PY) scripts/demo.py $(if $(SINK),--sink $(SINK),)

# The suite on two pytest-xdist workers (each with its own MariaDB, PostgreSQL, Spark session and
# Airflow home; a module whose tests share a module-scoped fixture stays on one worker).
test: bootstrap lint
	$(PY) -m pytest -q -n 2 --dist loadgroup $(PYTEST_ARGS) tests

# The same suite in one process (~61 min here), for a test that misbehaves only beside others.
test-serial: bootstrap lint
	$(PY) -m pytest -q $(PYTEST_ARGS) tests

# ruff (lint, import order, format) and mypy on the package, as configured in pyproject.toml
lint: bootstrap
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

unit: bootstrap
	$(PY) -m pytest -q tests/unit

# The support matrix, measured (docs/deployment.md, "Support matrix"): the sdist and the wheel (python -m build,
# twine check), then the wheel in clean venvs with pip's resolver and no constraints file, at
# the OLDEST versions setup.cfg admits and at the NEWEST: providers list, connection type, DAG
# import, the unit tests and the end-to-end DAG test in each (about 10 min). AIRFLOW=3.1.8:
# next to that Airflow release instead. tests/install (part of `make test`) runs the oldest
# install and DAG import checks only.
# The quick start followed as a newcomer would, timed (scripts/newcomer.py, ~10 min): a new venv next to a
# released Airflow, the connections, check-connection, init, airflow standalone, Trigger, the sink verified.
newcomer: bootstrap
	$(PY) scripts/newcomer.py $(if $(AIRFLOW),--airflow $(AIRFLOW),)

# The UI tests (a real scheduler and browser), keeping the screenshots docs/ui.md shows (docs/ui/*.png):
# run after a change to the UI flows or an Airflow upgrade, then commit the images (~5 min).
docs-screenshots: bootstrap
	MYSQLCDC_DOCS_SCREENSHOTS=1 $(PY) -m pytest -q tests/ui

compat: bootstrap
	$(PY) scripts/compat.py $(if $(AIRFLOW),--airflow $(AIRFLOW) --unit --e2e,--matrix oldest --matrix newest)

bench-snapshot: bootstrap
	$(PY) bench/snapshot_throughput.py

# The DAG template's initial load of a 20M-row table (BENCH_ARGS="--rows 2000000" for a quick check).
bench-dag: bootstrap
	$(PY) bench/dag_initial_load.py $(BENCH_ARGS)

# The Iceberg sink beside Delta (issue 39; docs/performance.md, "The Iceberg sink beside Delta"): the
# 20M-row load through the DAG into each in turn, 3 rounds, then the 2M-change stream catch-up into each
# (paired, medians of 3) and the commit-to-visible latency at 500 tx/s (~45 min).
bench-iceberg: bootstrap
	$(PY) bench/dag_initial_load.py --sinks delta,iceberg --rounds 3
	$(PY) bench/stream_throughput.py --rows 4000000 --library-repeats 0 --ddl-rounds 0 --sinks changelog,delta,iceberg

# The stream's catch-up on a standalone Spark cluster (2 isolated workers) vs local mode, one run
# (BENCH_ARGS="--rows 400000 --repeats 1" for a quick check).
bench-cluster: bootstrap
	$(PY) bench/cluster_stream.py $(BENCH_ARGS)

# The kill -9 fault soak, 100 rounds (hours; BENCH_ARGS="--rounds 4 --rows 3000" for a quick check).
bench-soak: bootstrap
	$(PY) bench/fault_soak.py $(BENCH_ARGS)

# 20 failovers of the source (a primary and a GTID replica taking turns) under a running stream:
# nothing lost or applied twice (BENCH_ARGS="--rounds 3" for a quick check).
bench-failover: bootstrap
	$(PY) bench/failover_soak.py $(BENCH_ARGS)

clean:
	rm -rf .demo bench/.work .compat
