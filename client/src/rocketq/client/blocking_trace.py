"""A trace dispatcher for code outside asyncio (the Spark source's executor threads).

:class:`BlockingTraceDispatcher` runs a :class:`TraceDispatcher`, its own
:class:`ClientInstance` and inner producer (the dispatcher's sender) on the process-wide background loop
(:mod:`rocketq.client.loop`); :meth:`BlockingTraceDispatcher.append` may be called from any
thread and returns at once (the records are queued on the loop, dropped and counted there when
the queue is full).  :meth:`close` sends what is queued and stops the instance.
"""

from __future__ import annotations

from collections.abc import Sequence

from rocketq.client.config import ClientConfig
from rocketq.client.instance import ClientInstance
from rocketq.client.loop import acquire_loop, release_loop
from rocketq.client.producer.core import trace_sender
from rocketq.client.remoting.vocabulary import TRACE_TOPIC
from rocketq.client.trace.dispatcher import CONSUME_TRACE, TraceDispatcher
from rocketq.client.trace.model import TraceRecord

__all__ = ["BlockingTraceDispatcher"]


class BlockingTraceDispatcher:
    """Thread-safe, non-blocking appends to a trace dispatcher on the background loop."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        owner_group: str,
        *,
        kind: str = CONSUME_TRACE,
        trace_topic: str | None = None,
        client: ClientConfig | None = None,
    ) -> None:
        self._loop = acquire_loop()
        try:
            self._loop.run(self._start(namesrv_addr, owner_group, kind, trace_topic or TRACE_TOPIC, client))
        except BaseException:
            release_loop(self._loop)
            raise
        self._closed = False

    async def _start(
        self,
        namesrv_addr: str | Sequence[str],
        owner_group: str,
        kind: str,
        trace_topic: str,
        client: ClientConfig | None,
    ) -> None:
        self._instance = ClientInstance(namesrv_addr, config=client or ClientConfig())
        sender = trace_sender(namesrv_addr, self._instance, owner_group, kind)
        self.dispatcher = TraceDispatcher(sender, trace_topic=trace_topic, owner_group=owner_group, kind=kind)
        await self.dispatcher.start()

    def append(self, records: Sequence[TraceRecord]) -> None:
        """Queue ``records`` (from any thread; never waits, never raises)."""
        if records and not self._closed:
            try:
                self._loop.loop.call_soon_threadsafe(self.dispatcher.append, list(records))
            except RuntimeError:  # the loop is gone (interpreter exit, a fork): traces are best-effort
                self._closed = True

    def close(self) -> None:
        """Send what is queued (bounded by the dispatcher's ``shutdown_timeout_s``) and stop."""
        if self._closed:
            return
        self._closed = True

        async def stop() -> None:
            await self.dispatcher.shutdown()
            await self._instance.close()

        try:
            self._loop.run(stop())
        finally:
            release_loop(self._loop)
