"""The Delta Lake sink (delta-rs): ``sink.DeltaSink``."""
