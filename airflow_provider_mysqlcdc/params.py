"""The trigger form of a pipeline DAG: one Airflow ``Param`` per setting of ``cdc/settings.py``.

    from airflow_provider_mysqlcdc.params import pipeline_params
    DAG(..., params=pipeline_params(tables=["shop.orders"], state_location="s3://cdc/state/shop"))

Keyword arguments replace the shipped defaults (the form's initial values); a name that is
not a setting fails at parse time, so a typo in a DAG file is not a silently ignored field.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

from .cdc.settings import SETTINGS, defaults


def pipeline_params(**overrides: Any) -> dict[str, Param]:
    values = defaults(**overrides)
    return {
        s.name: Param(values[s.name], description=None, description_md=s.description, **s.json_schema())
        for s in SETTINGS
    }
