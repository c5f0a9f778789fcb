# The two commands a new machine needs: `make demo` and `make test`.
# Both install what is missing first (scripts/bootstrap.sh), then run.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: bootstrap demo test unit compat bench-snapshot bench-dag clean

bootstrap:
	@./scripts/bootstrap.sh

demo: bootstrap
	$(PY) scripts/demo.py

test: bootstrap
	$(PY) -m pytest -q $(PYTEST_ARGS) tests

unit: bootstrap
	$(PY) -m pytest -q tests/unit

# Install the wheel next to another Airflow release in a clean venv and check it there
# (AIRFLOW=3.1.8 by default; not part of `make test`: it installs Airflow anew).
compat: bootstrap
	$(PY) scripts/compat.py --airflow $(or $(AIRFLOW),3.1.8) --unit

bench-snapshot: bootstrap
	$(PY) bench/snapshot_throughput.py

# The DAG template's initial load of a 20M-row table (BENCH_ARGS="--rows 2000000" for a quick check).
bench-dag: bootstrap
	$(PY) bench/dag_initial_load.py $(BENCH_ARGS)

clean:
	rm -rf .demo bench/.work .compat
