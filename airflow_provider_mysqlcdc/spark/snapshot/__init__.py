"""The snapshot data path: chunks read between watermarks, corrected, materialized, written."""
