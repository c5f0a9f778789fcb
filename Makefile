# The two commands a new machine needs: `make demo` and `make test`.
# Both install what is missing first (scripts/bootstrap.sh), then run.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: bootstrap demo test unit bench-snapshot clean

bootstrap:
	@./scripts/bootstrap.sh

demo: bootstrap
	$(PY) scripts/demo.py

test: bootstrap
	$(PY) -m pytest -q $(PYTEST_ARGS) tests

unit: bootstrap
	$(PY) -m pytest -q tests/unit

bench-snapshot: bootstrap
	$(PY) bench/snapshot_throughput.py

clean:
	rm -rf .demo bench/.work
