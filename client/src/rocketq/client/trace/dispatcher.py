"""TraceDispatcher: the background sender of trace records (Java's ``AsyncTraceDispatcher``).

Theory of operation.  Hooks hand finished records to :meth:`TraceDispatcher.append` on the event
loop; it only appends them to a bounded deque and wakes the sender task, so a traced send or
consume never waits for the trace.  When the deque is full the records are dropped, counted in
``dropped`` and reported by a rate-limited warning.  The sender task takes what is queued, packs
it into trace messages of at most ``max_msg_size`` bytes (one text line per record, see
:mod:`rocketq.client.trace.codec`) whose keys are the traced msgIds and the messages' keys (so
QUERY_MESSAGE by key finds them, as for Java's traces), and sends them to the trace topic with an
inner producer, one after the other.  A failed trace send is counted in ``send_failures`` and
logged (rate-limited); it never reaches the traced producer or consumer.

The sender is injected: whoever builds the dispatcher passes a :class:`TraceSender` (in the
client, an inner producer configured by :func:`trace_producer_config`), so this package imports
no producer.  The inner producer shares the traced client's :class:`ClientInstance`
(connections, ACL, TLS) under its own group, ``_INNER_TRACE_PRODUCER-<group>-<kind>``.  With
``autoCreateTopicEnable`` its first send creates the trace topic, as any send does; otherwise the
broker needs ``traceTopicEnable=true`` (or the topic created by hand).  The dispatcher starts the
sender in :meth:`~TraceDispatcher.start`; :meth:`~TraceDispatcher.shutdown` sends what is still
queued, bounded by ``shutdown_timeout_s``, then shuts the sender down.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from rocketq.client.config import ClientConfig, ProducerConfig
from rocketq.client.errors import ClientError
from rocketq.client.model import Message
from rocketq.client.trace.codec import encode_record, trace_keys
from rocketq.client.trace.model import TraceRecord

__all__ = [
    "CONSUME_TRACE",
    "PRODUCE_TRACE",
    "TraceDispatcher",
    "TraceSender",
    "trace_producer_config",
    "trace_producer_group",
]

log = logging.getLogger("rocketq.client.trace")

_GROUP_PREFIX = "_INNER_TRACE_PRODUCER"
_WARN_INTERVAL_S = 10.0
_MAX_MSG_SIZE = 128_000
_SEND_TIMEOUT_MS = 5_000

#: the ``kind`` of a producer's traces and of a consumer's (part of the inner producer's group)
PRODUCE_TRACE = "PRODUCE"
CONSUME_TRACE = "CONSUME"


class TraceSender(Protocol):
    """What sends trace messages: the inner producer (an ``AsyncProducer``), or a test's stand-in."""

    async def start(self) -> None: ...

    async def send(self, msg: Message, /) -> object: ...

    async def shutdown(self) -> None: ...


def trace_producer_group(owner_group: str, kind: str) -> str:
    """The group of the inner producer that sends the traces of ``owner_group``'s ``kind`` side."""
    return f"{_GROUP_PREFIX}-{owner_group}-{kind}"


def trace_producer_config(
    owner_group: str,
    kind: str,
    client: ClientConfig,
    *,
    max_msg_size: int = _MAX_MSG_SIZE,
    send_timeout_ms: int = _SEND_TIMEOUT_MS,
) -> ProducerConfig:
    """The config of the inner producer of a :class:`TraceDispatcher` (``client``: the traced
    client's settings, so traces go over the same ACL and TLS)."""
    return ProducerConfig(
        producer_group=trace_producer_group(owner_group, kind),
        send_msg_timeout_ms=send_timeout_ms,
        max_message_size=max(max_msg_size * 2, 4 * 1024 * 1024),
        client=client,
    )


class TraceDispatcher:
    """Queues trace records and sends them, batched, to ``trace_topic`` in the background."""

    def __init__(
        self,
        sender: TraceSender,
        *,
        trace_topic: str,
        owner_group: str,
        kind: str,
        queue_size: int = 2048,
        batch_size: int = 100,
        max_msg_size: int = _MAX_MSG_SIZE,
        shutdown_timeout_s: float = 3.0,
    ) -> None:
        """``sender`` sends the trace messages; the dispatcher starts it and shuts it down."""
        if queue_size < 1 or batch_size < 1 or max_msg_size < 1:
            raise ClientError("queue_size, batch_size and max_msg_size must be > 0")
        self.sender = sender
        self.trace_topic = trace_topic
        self.group = trace_producer_group(owner_group, kind)
        self.queue_size = queue_size
        self.batch_size = batch_size
        self.max_msg_size = max_msg_size
        self.shutdown_timeout_s = shutdown_timeout_s
        self.dropped = 0  # records dropped because the queue was full (or not started)
        self.send_failures = 0  # trace messages whose send failed
        self.sent_messages = 0  # trace messages the broker stored
        self.sent_records = 0
        self._queue: collections.deque[TraceRecord] = collections.deque()
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._last_warning: dict[str, float] = {}

    # ------------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        return self._task is not None and not self._closing

    async def start(self) -> None:
        if self._task is not None:
            return
        await self.sender.start()
        self._closing = False
        self._wakeup = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"trace {self.group}")

    async def shutdown(self) -> None:
        """Send what is queued (at most ``shutdown_timeout_s``), then shut the sender down."""
        if self._task is None:
            return
        self._closing = True
        assert self._wakeup is not None
        self._wakeup.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), self.shutdown_timeout_s)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._queue:
            self._count_dropped(len(self._queue), "the dispatcher shut down before sending them")
            self._queue.clear()
        self._task = None
        await self.sender.shutdown()

    # ------------------------------------------------------------------ appending

    def append(self, records: Sequence[TraceRecord]) -> bool:
        """Queue ``records`` (on the event loop); False, and the records dropped, if the queue is
        full or the dispatcher is not running.  Never raises and never waits."""
        if not records:
            return True
        if self._task is None or self._closing:
            self._count_dropped(len(records), "the trace dispatcher is not running")
            return False
        if len(self._queue) + len(records) > self.queue_size:
            self._count_dropped(
                len(records), f"the trace queue is full ({self.queue_size} records; the broker is slow)"
            )
            return False
        self._queue.extend(records)
        assert self._wakeup is not None
        self._wakeup.set()
        return True

    def _count_dropped(self, n: int, why: str) -> None:
        self.dropped += n
        self._warn("drop", f"dropped %d trace records of %s (%d in all): {why}", n, self.group, self.dropped)

    def _warn(self, what: str, fmt: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last_warning.get(what, -_WARN_INTERVAL_S) >= _WARN_INTERVAL_S:
            self._last_warning[what] = now
            log.warning(fmt, *args)

    # ------------------------------------------------------------------ sending

    async def _run(self) -> None:
        assert self._wakeup is not None
        while True:
            if not self._queue:
                if self._closing:
                    return
                await self._wakeup.wait()
                self._wakeup.clear()
                continue
            records = [self._queue.popleft() for _ in range(min(self.batch_size, len(self._queue)))]
            try:
                for body, keys, count in self._pack(records):
                    await self._send(body, keys, count)
            except Exception:  # a bug here must not stop the sender: later records still go out
                log.exception(
                    "trace dispatcher %s failed on %d records; they are dropped", self.group, len(records)
                )
                self.dropped += len(records)

    def _pack(self, records: Sequence[TraceRecord]) -> list[tuple[bytes, list[str], int]]:
        """Trace message bodies of at most ``max_msg_size`` bytes (a longer line goes alone)."""
        out: list[tuple[bytes, list[str], int]] = []
        lines: list[bytes] = []
        group: list[TraceRecord] = []
        size = 0
        for r in records:
            line = encode_record(r).encode()
            if lines and size + len(line) > self.max_msg_size:
                out.append((b"".join(lines), trace_keys(group), len(group)))
                lines, group, size = [], [], 0
            lines.append(line)
            group.append(r)
            size += len(line)
        if lines:
            out.append((b"".join(lines), trace_keys(group), len(group)))
        return out

    async def _send(self, body: bytes, keys: list[str], count: int) -> None:
        try:
            await self.sender.send(Message(self.trace_topic, body, keys=keys))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a trace must never break the traced client
            self.send_failures += 1
            self._warn(
                "send",
                "sending %d trace records to %s failed (%d failures in all): %s",
                count,
                self.trace_topic,
                self.send_failures,
                exc,
            )
            return
        self.sent_messages += 1
        self.sent_records += count
