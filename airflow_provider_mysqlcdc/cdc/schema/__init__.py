"""Table schemas over time: DDL from binlog QUERY events read as schema change events.

``ddl`` turns a statement into events, ``events`` defines them, ``evolve`` applies one to a
``TableSchema``. Import the submodules directly; this package re-exports nothing so that
importing one of them never drags in the others (or sqlglot) by accident.
"""
