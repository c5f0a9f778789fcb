"""The Apache Iceberg sink (pyiceberg): ``sink.py`` the protocol, ``apply.py`` a micro-batch's commit,
``catalog.py`` where the tables live."""
