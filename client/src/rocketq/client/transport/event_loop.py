"""The event loop rocketq's own loops run on: uvloop's when it is installed, else asyncio's.

The client's background loop (:mod:`rocketq.client.loop`, behind every blocking API) and the
broker's main loop are built by :func:`new_event_loop`.  uvloop (a dependency on Linux and macOS)
runs the same asyncio code with its transports, timers and cross-thread wake-ups in C, which
shortens every request's round trip; where it is not installed (Windows) the standard loop runs
the same code.  ``ROCKETQ_EVENT_LOOP=asyncio`` in the environment of a process selects asyncio's
loop although uvloop is installed (``uvloop``, the default, uses it when installed); it is read
each time a loop is built.  Applications that run the asyncio classes (``AsyncProducer``…) on a
loop of their own choose that loop themselves.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

from rocketq.client.errors import ClientError

__all__ = ["EVENT_LOOP_ENV", "loop_kind", "new_event_loop", "run"]

#: the environment variable that chooses the loop: ``uvloop`` (default) or ``asyncio``
EVENT_LOOP_ENV = "ROCKETQ_EVENT_LOOP"

_T = TypeVar("_T")

try:
    import uvloop as _uvloop
except ImportError:  # not built for this platform (Windows): asyncio's loop
    _uvloop = None  # type: ignore[assignment]


def loop_kind() -> str:
    """``"uvloop"`` or ``"asyncio"``: what :func:`new_event_loop` builds now."""
    wanted = os.environ.get(EVENT_LOOP_ENV, "uvloop").strip().lower() or "uvloop"
    if wanted not in ("uvloop", "asyncio"):
        raise ClientError(f"{EVENT_LOOP_ENV}={wanted!r} is not a known event loop: use uvloop or asyncio")
    return "uvloop" if wanted == "uvloop" and _uvloop is not None else "asyncio"


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when installed (and not turned off), else asyncio's default."""
    if loop_kind() == "uvloop":
        return _uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)`` on a loop from :func:`new_event_loop`."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
