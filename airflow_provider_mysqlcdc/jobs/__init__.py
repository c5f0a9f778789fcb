"""spark-submit entry points, shipped inside the package.

The operators submit these files by path (``application_path()``), so an installed provider
finds them without the repository; ``spark_jobs/`` at the top of the repository holds thin
copies for running them by hand.
"""

from __future__ import annotations

from ..spark.runtime.package_files import application_path  # noqa: F401  (where it always was)
