"""Spark side of the pipeline: the consistent batch reader, data sources and sink writers.

Knows Spark, never Airflow.
"""
