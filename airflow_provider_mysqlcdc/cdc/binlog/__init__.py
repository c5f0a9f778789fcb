"""The binlog: both readers side by side (``reader``: python-mysql-replication; ``fast``: the columnar
decoder), GTID gaps, catch-up planning, failover and retention.

Import the submodules directly; this package re-exports nothing.
"""
