"""Spark's automatic lookup entry point for the ``rocketmq`` data source.

On the first lookup of a Python data source name, PySpark imports every top-level module whose
name starts with ``pyspark_`` and registers its ``DefaultSource`` under ``DefaultSource.name()``.
That is why this module exists and why it must stay light: importing it costs nothing (a failing
or slow import here would break or slow every data-source lookup in the session).  The
``DefaultSource`` attribute is resolved lazily (PEP 562) to
:class:`rocketq.connector.source.RocketMQDataSource`, whose ``name()`` is ``"rocketmq"``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DefaultSource"]


def __getattr__(name: str) -> Any:
    if name == "DefaultSource":
        from rocketq.connector.source import RocketMQDataSource

        return RocketMQDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
