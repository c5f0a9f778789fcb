"""The sinks: one folder per sink behind ``base.Sink``, built from the registry (``cdc/sinks.py``).

Each sink's folder holds its class (``<sink>/sink.py``) and what only it needs; the shared parts
stay here: the interface (``base``, ``change_meta``), the change rows as Arrow (``change_arrow``,
``last_change``), direct stream writes (``direct_spec``, ``direct``), the JSON encoders
(``json_text``, ``json_values``), re-snapshot records (``resnapshot_rows``), routes and transforms
(``routed``, ``projection``), the file writers (``files/``) and ``factory``. Adding a sink is its
folder and one registry entry.
"""
