"""Names that moved between the Airflow 3 releases this provider supports (see setup.cfg).

Airflow 3.2 moved the task exceptions into ``airflow.sdk.exceptions``; 3.1 has them in
``airflow.exceptions`` only. Airflow-facing modules import them from here.
"""

from __future__ import annotations

try:
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
except ImportError:  # Airflow 3.1
    from airflow.exceptions import AirflowFailException, AirflowSkipException  # type: ignore[no-redef]

__all__ = ["AirflowFailException", "AirflowSkipException"]
