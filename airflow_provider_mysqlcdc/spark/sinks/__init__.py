"""Sink writers: where snapshot batches and stream micro-batches land. One file per sink."""
