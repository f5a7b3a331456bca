"""Spark's automatic lookup entry point for the ``rocketmq`` data source.

On the first lookup of a Python data source name, PySpark imports every top-level module whose
name starts with ``pyspark_`` and registers its ``DefaultSource`` under ``DefaultSource.name()``.
That is why this module exists and why it must stay light: importing it costs nothing (a failing
or slow import here would break or slow every data-source lookup in the session).  The
``DefaultSource`` attribute is resolved lazily (PEP 562) to
:class:`rocketq.connector.source.RocketMQDataSource`, whose ``name()`` is ``"rocketmq"``.

``rocketq`` is a PEP 420 namespace package (no ``rocketq/__init__.py``).  When this module is
importable but ``rocketq`` is not, the usual cause is a zip shipped with ``--py-files`` that has
no directory entries (``zipfile`` code writing only files): ``zipimport`` finds a namespace
package only through its directory entry.  The error raised then says so (docs/deployment.md).
"""

from __future__ import annotations

from typing import Any

__all__ = ["DefaultSource"]


def _missing_rocketq(exc: ModuleNotFoundError) -> ModuleNotFoundError:
    where = __file__ or "?"
    hint = (
        f"pyspark_rocketmq was found at {where}, but the package it needs, {exc.name!r}, is not "
        f"importable in this Python ({exc}). Install the whole rocketq wheel into this environment "
        "(pip install rocketq-<version>-py3-none-any.whl). If you ship rocketq as a zip with "
        "--py-files, build the zip with directory entries (in site-packages: 'python -m zipfile -c "
        "rocketq.zip rocketq pyspark_rocketmq'; a .whl has none and cannot be put on --py-files): "
        "rocketq is a namespace package, which zipimport finds only through the 'rocketq/' entry. "
        "See docs/deployment.md."
    )
    return ModuleNotFoundError(hint, name=exc.name)


def __getattr__(name: str) -> Any:
    if name == "DefaultSource":
        try:
            from rocketq.connector.source import RocketMQDataSource
        except ModuleNotFoundError as exc:
            if exc.name is None or not (exc.name == "rocketq" or exc.name.startswith("rocketq.")):
                raise
            raise _missing_rocketq(exc) from exc
        return RocketMQDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
