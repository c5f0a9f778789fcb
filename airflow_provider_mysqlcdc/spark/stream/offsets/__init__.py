"""The stream offset Spark checkpoints, what a query's checkpoint holds, and its durable copy on object storage."""
