"""The table set and its schemas while the query runs: tables taken up or dropped, re-read batches taken over, the schema history."""
