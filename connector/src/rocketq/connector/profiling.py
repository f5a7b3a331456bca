"""Opt-in profiles of the connector's work inside Spark's Python workers.

With the environment variable ``ROCKETQ_CONNECTOR_PROFILE`` set to a directory (in the driver's
environment before the Spark session starts: the JVM passes it on to every Python worker), each
executor ``read()`` and ``write()`` and each driver-side sink ``commit()`` runs under cProfile and
writes ``<what>-<pid>-<n>.prof`` there (``python -m pstats`` reads it).  Unset, nothing is
imported and a call costs one environment look-up.  Used to find where a micro-batch's time goes
(docs/performance.md).
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from typing import TypeVar

ENV = "ROCKETQ_CONNECTOR_PROFILE"
_T = TypeVar("_T")
_COUNTER = itertools.count()


@contextlib.contextmanager
def profiled(what: str) -> Iterator[None]:
    """Profile the block into ``$ROCKETQ_CONNECTOR_PROFILE/<what>-<pid>-<n>.prof`` when set."""
    where = os.environ.get(ENV)
    if not where:
        yield
        return
    import cProfile

    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        os.makedirs(where, exist_ok=True)
        profile.dump_stats(os.path.join(where, f"{what}-{os.getpid()}-{next(_COUNTER)}.prof"))


def profiled_iter(what: str, items: Iterator[_T]) -> Iterator[_T]:
    """``items`` with the time spent producing them profiled as :func:`profiled` does (the
    consumer's time between items, Spark's, is left out)."""
    if not os.environ.get(ENV):
        yield from items
        return
    import cProfile

    profile = cProfile.Profile()
    try:
        while True:
            profile.enable()
            try:
                item = next(items)
            except StopIteration:
                return
            finally:
                profile.disable()
            yield item
    finally:
        where = os.environ[ENV]
        os.makedirs(where, exist_ok=True)
        profile.dump_stats(os.path.join(where, f"{what}-{os.getpid()}-{next(_COUNTER)}.prof"))
