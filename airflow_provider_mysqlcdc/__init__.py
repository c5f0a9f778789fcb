"""mysqlcdc: Flink-CDC-grade MySQL change data capture for Airflow + Spark."""

__version__ = "0.1.0"
