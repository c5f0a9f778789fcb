"""Running Spark: sessions, the long-lived stream process and its status, PySpark start-up cost."""
