"""The sends a master holds until their replicas acknowledged them (controller mode).

A SYNC master in controller mode answers a send only once the AckPolicy's replicas hold its bytes
(:func:`.acks.ack_verdict`).  Each waiting send is a future for the offset it needs; every ack,
SyncStateSet change or fencing re-evaluates them all, and a role change resolves them with None
(nothing is acknowledged by a broker that is no longer master).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from rocketq.broker.controller_mode.acks import AckVerdict

__all__ = ["AckWaiters", "Verdict"]

#: the verdict for an offset now; None: this broker may not acknowledge anything
Verdict = Callable[[int], AckVerdict | None]


class AckWaiters:
    """Futures of the sends waiting for acks, keyed by the offset each needs."""

    def __init__(self) -> None:
        self._waiters: list[tuple[int, asyncio.Future[AckVerdict | None]]] = []

    async def wait(self, offset: int, timeout_s: float, wake: Callable[[], None] | None) -> AckVerdict | None:
        """The verdict once it is no longer WAITING; raises TimeoutError after ``timeout_s``.

        ``wake`` prompts the HA service to push the bytes (and read acks) now.
        """
        future: asyncio.Future[AckVerdict | None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, future))
        if wake is not None:
            wake()
        try:
            return await asyncio.wait_for(future, timeout_s)
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove((offset, future))

    def reevaluate(self, verdict: Verdict) -> None:
        """Resolve every waiter whose verdict is no longer WAITING."""
        for offset, future in list(self._waiters):
            if future.done():
                continue
            result = verdict(offset)
            # the verdict may have run callbacks that ended this wait (a timeout's cancel, fail_all)
            if result is not AckVerdict.WAITING and not future.done():
                future.set_result(result)

    def fail_all(self) -> None:
        """No longer master: every waiting send is answered as not acknowledged."""
        waiters, self._waiters = self._waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_result(None)
