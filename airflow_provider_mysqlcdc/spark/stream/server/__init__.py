"""The driver's dealings with the source server: where a query starts, which server its offsets belong to, the short calls and their retries."""
