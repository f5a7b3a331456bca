"""Stopping a background task for good.

``task.cancel()`` followed by ``await task`` can wait forever on Python 3.11: ``asyncio.wait_for``
drops a cancellation that arrives while the future it waits for has just completed (an event set
or a connection closed in the same loop iteration), and a task that loops (``while True: await
asyncio.wait_for(...)``) then runs on.  :func:`cancel_and_wait` cancels again until the task is
done.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["cancel_and_wait"]

#: how often a task that survived its cancellation is cancelled again
RECHECK_S = 0.05


async def cancel_and_wait(task: asyncio.Task[object] | None, recheck_s: float = RECHECK_S) -> None:
    """Cancel ``task`` and return once it is done (its result or exception is discarded)."""
    if task is None:
        return
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=recheck_s)
    if not task.cancelled():
        with contextlib.suppress(BaseException):
            task.exception()  # retrieved: no "exception was never retrieved" at exit
