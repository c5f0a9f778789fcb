"""What of spark-submit's output reaches the task log, and at which level.

The Spark provider logs every line spark-submit prints at INFO. A snapshot task's log was
then half Spark's start-up chatter, Spark's own warnings arrived as INFO, and machine-only
lines sat between the job's progress lines. Lines are routed by what they are:

* Spark's log4j lines (``25/11/25 10:00:00 WARN Foo: ...``) keep their level; INFO and
  below are debug unless ``spark_log_level`` asks for them; a few harmless start-up
  warnings (no native Hadoop library, loopback host name) are debug too.
* The job's own Python log lines (``2026-11-25 10:00:00,123 INFO name: message``) are
  re-logged at their level without the second timestamp.
* Lines meant for programs (``MYSQLCDC_RESULT {...}``) and Spark's banner are debug.
* Anything else (a traceback, a print) is INFO: never hidden.
"""

from __future__ import annotations

import logging
import re
from typing import Any

_LOG4J = re.compile(r"^\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ([^:]+): ?(.*)$")
_PYLOG = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) ([^:]+): ?(.*)$")
_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
}
MACHINE_PREFIXES = ("MYSQLCDC_RESULT ",)
BANNER = (
    "Using Spark's default log4j profile",
    "Setting default log level to",
    "To adjust logging level use",
    "WARNING: Using incubator modules",
    "Setting Spark log level to",
    "For SparkR, use setLogLevel",
    ":: loading settings ::",
    "Ivy Default Cache",
    "The jars for the packages",
)
HARMLESS_WARNINGS = (
    "Unable to load native-hadoop library",
    "resolves to a loopback address",
    "Set SPARK_LOCAL_IP if you need to bind",
    "Service 'SparkUI' could not bind on port",
)


def classify(line: str, spark_level: int = logging.WARNING) -> tuple[int, str]:
    """(level, text) a spark-submit output line is logged with."""
    if line.startswith(MACHINE_PREFIXES) or line.startswith(BANNER):
        return logging.DEBUG, line
    m = _LOG4J.match(line)
    if m:
        level = _LEVELS[m.group(1)]
        if level < spark_level or (level == logging.WARNING and any(h in line for h in HARMLESS_WARNINGS)):
            return logging.DEBUG, line
        return level, f"Spark {m.group(2).strip()}: {m.group(3)}"
    m = _PYLOG.match(line)
    if m:
        return _LEVELS[m.group(1)], m.group(3)
    return logging.INFO, line


class SparkOutputLog:
    """Stands in for the Spark hook's logger: ``info(line)`` from the hook is re-levelled by
    ``classify``; its other calls (warning, error, its own info messages with arguments) pass
    through unchanged."""

    def __init__(self, target: Any, spark_log_level: str = "WARN") -> None:
        self._target = target
        self._spark_level = _LEVELS.get(str(spark_log_level).upper(), logging.WARNING)

    def info(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        if args or kwargs or not isinstance(msg, str):
            self._target.info(msg, *args, **kwargs)
            return
        level, text = classify(msg, self._spark_level)
        self._target.log(level, "%s", text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)
