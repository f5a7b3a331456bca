"""AsyncLitePullConsumer: assign or subscribe, seek, poll, commit (DefaultLitePullConsumer).

Theory of operation.  Queues come either from :meth:`assign` (an explicit set, no rebalance) or
from :meth:`subscribe` (the group's rebalance hands queues in and out).  Each owned queue has a
background pull task that long-polls the broker and appends each pull's result, undecoded, to
one shared buffer; :meth:`poll` takes the next result and makes its messages (lazy views, see
:func:`rocketq.client.model.scan_messages`); :meth:`poll_batch` takes it as columns (queue
offsets and bodies, :class:`~rocketq.client.model.PolledBatch`) without a view per message.
Views are made at poll time so that they die young:
views made by the pull task waited in the buffer long enough to reach the collector's oldest
generation, and the full collections that then followed cost a quarter of the throughput.  A
queue's pulls enter and leave the buffer in order, so bookkeeping is per pull, not per message: a
queue counts the offsets it has buffered (flow control), and polling a pull moves its *consumed*
offset to the pull's next offset (past messages the tag filter dropped too).  A pull whose records
do not decode raises :class:`~rocketq.client.errors.MessageFormatError` (with the position) from
:meth:`poll`, and its queue goes back to that pull's offset: nothing is skipped silently.
:meth:`commit` copies consumed offsets to the offset store and persists them (auto-commit does that every
``auto_commit_interval_ms`` from inside ``poll``, as the Java client does).

:meth:`seek` moves a queue: it bumps the queue's generation, so batches and pull results of the
old position are discarded, empties its ProcessQueue, and the pull task restarts from the new
offset.  :meth:`pull` is a one-shot, buffer-free pull of a given queue and offset (what a Spark
partition reader of a fixed offset range needs).  Flow control pauses a queue's pull task while
it has ``pull_threshold_for_queue`` offsets buffered or the whole buffer holds
``pull_threshold_for_all``; :meth:`poll` wakes paused tasks as soon as it takes a pull out (the
Java client re-checks after a fixed 50 ms, which caps small pulls at a few thousand messages per
second per queue; here 50 ms is only the upper bound).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rocketq.client.config import ConsumerConfig
from rocketq.client.consumer.allocate import AllocateFn
from rocketq.client.consumer.base import ConsumerBase
from rocketq.client.consumer.offset_store import ReadOffsetType, RemoteBrokerOffsetStore
from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.consumer.subscription import (
    SUB_ALL,
    MessageSelector,
    Subscribable,
    SubscriptionData,
    SubscriptionRefusedError,
    build_subscription,
)
from rocketq.client.errors import MessageFormatError, MQClientError, RocketQError
from rocketq.client.instance import ClientInstance
from rocketq.client.model import MessageExt, PolledBatch, PullResult, PullStatus
from rocketq.client.producer.core import trace_sender
from rocketq.client.remoting.route import MessageQueue
from rocketq.client.trace.dispatcher import CONSUME_TRACE
from rocketq.client.trace.hooks import ConsumerTracer, consumer_tracer
from rocketq.client.trace.model import ConsumeReturnType

__all__ = ["AsyncLitePullConsumer"]

log = logging.getLogger("rocketq.client")

_T = TypeVar("_T")

_FLOW_CONTROL_DELAY_S = 0.05
_PAUSED_DELAY_S = 0.2


def _views(result: PullResult) -> list[MessageExt]:
    return result.messages


def _covered(offset: int, result: PullResult) -> int:
    """The queue offsets a FOUND pull from ``offset`` spans (what flow control counts)."""
    return max(result.next_begin_offset - offset, 1)


@dataclass(eq=False)
class _QueueState:
    mq: MessageQueue
    pq: ProcessQueue
    pull_offset: int  # next offset to pull
    consumed_offset: int  # next offset to hand to poll() callers (committable)
    generation: int = 0
    buffered: int = 0  # offsets of this queue's pulls in the buffer, not yet polled
    paused: bool = False
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class AsyncLitePullConsumer(ConsumerBase):
    """The asyncio lite-pull consumer."""

    consume_type = "CONSUME_ACTIVELY"

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        config: ConsumerConfig | None = None,
        *,
        instance: ClientInstance | None = None,
        allocate: AllocateFn | None = None,
        **settings: Any,
    ) -> None:
        """``settings`` are ConsumerConfig fields (``consumer_group="cg"``...)."""
        super().__init__(namesrv_addr, config, instance=instance, allocate=allocate, **settings)
        self._states: dict[MessageQueue, _QueueState] = {}
        # (queue, its generation, the offset pulled from, that FOUND pull)
        self._buffer: asyncio.Queue[tuple[_QueueState, int, int, PullResult]] = asyncio.Queue()
        self._buffered = 0
        self._room = asyncio.Event()  # set by poll when it takes a pull out of the buffer
        self._assigned_mode: bool | None = None
        self._last_auto_commit = time.monotonic()
        self._pending_assign: set[MessageQueue] | None = None
        self._refused: SubscriptionRefusedError | None = None  # raised by the next poll()
        self._tracer: ConsumerTracer | None = None  # enable_msg_trace: SubBefore/SubAfter records

    # ------------------------------------------------------------------ setup

    def subscribe(self, topic: str, expression: Subscribable = SUB_ALL) -> None:
        """Subscribe to ``topic``; the group's rebalance assigns queues.

        ``expression`` is a tag expression (``"*"``, ``"TagA || TagB"``) or a
        :class:`MessageSelector` (``MessageSelector.by_sql("a > 5")``); a string that cannot be a
        tag expression raises MQClientError.
        """
        if self._assigned_mode is True:
            raise MQClientError("subscribe and assign are mutually exclusive")
        self._add_subscription(topic, expression)
        self._assigned_mode = False
        if self.running:
            self.instance.rebalance_immediately()

    async def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalance); their start offset is the committed one,
        else ``consume_from_where``, unless :meth:`seek` sets it."""
        if self._assigned_mode is False:
            raise MQClientError("subscribe and assign are mutually exclusive")
        self._assigned_mode = True
        wanted = set(mqs)
        for mq in wanted:
            if mq.topic not in self._subscriptions:
                self._subscriptions[mq.topic] = build_subscription(mq.topic, SUB_ALL)
        if self.running:
            await self._apply_assignment(wanted)
        else:
            self._pending_assign = wanted

    async def _apply_assignment(self, wanted: set[MessageQueue]) -> None:
        table = self.rebalance.process_queue_table
        for mq in list(table):
            if mq not in wanted:
                pq = table.pop(mq)
                pq.dropped = True
                await self.remove_queue(mq, pq)
        added = sorted(wanted - set(table))
        # one round trip for all the start offsets, not one per queue
        starts = await asyncio.gather(*(self.rebalance.compute_pull_from_where(mq) for mq in added))
        for mq, next_offset in zip(added, starts, strict=True):
            pq = ProcessQueue()
            table[mq] = pq
            await self.start_queue(mq, pq, next_offset)

    async def start(self) -> None:
        if self.running:
            return
        await self._start_base()
        if self.config.enable_msg_trace and self._tracer is None:
            topic = self.config.custom_trace_topic
            sender = trace_sender(self._namesrv_addr, self.instance, self.group, CONSUME_TRACE)
            tracer = consumer_tracer(sender, self.group, topic)
            await tracer.start()
            self._tracer = tracer
        pending = self._pending_assign
        self._pending_assign = None
        if pending is not None:
            await self._apply_assignment(pending)
        await self.instance.update_all_routes()
        await self.instance.send_heartbeat_to_all_brokers()
        try:
            await self.check_client_in_broker()
        except RocketQError:
            await self.shutdown()
            raise
        if self._assigned_mode is False:
            await self.do_rebalance()

    async def shutdown(self) -> None:
        if not self.running:
            return
        for state in list(self._states.values()):
            await self._stop_task(state)
        if self.config.auto_commit:
            self._commit_consumed()
        if self._tracer is not None:  # sends the queued traces while the instance is still open
            await self._tracer.shutdown()
            self._tracer = None
        await self._stop_base()

    async def __aenter__(self) -> AsyncLitePullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def do_rebalance(self) -> None:
        if self._assigned_mode is False:
            await super().do_rebalance()

    # ------------------------------------------------------------------ rebalance hooks

    async def start_queue(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        state = _QueueState(mq, pq, next_offset, next_offset)
        old = self._states.get(mq)
        if old is not None:
            await self._stop_task(old)
        self._states[mq] = state
        state.task = asyncio.get_running_loop().create_task(self._pull_loop(state), name=f"lite-pull {mq}")

    async def remove_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        state = self._states.pop(mq, None)
        if state is not None:
            await self._stop_task(state)
            self.offset_store.update_offset(mq, state.consumed_offset)
            with contextlib.suppress(RocketQError):
                await self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)
        return True

    async def _stop_task(self, state: _QueueState) -> None:
        state.generation += 1
        state.pq.dropped = True
        if state.task is not None:
            state.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await state.task
            state.task = None

    # ------------------------------------------------------------------ the pull task

    async def _pull_loop(self, state: _QueueState) -> None:
        c = self.config
        while self.running and not state.pq.dropped:
            if state.paused:
                await asyncio.sleep(_PAUSED_DELAY_S)
                continue
            if state.buffered > c.pull_threshold_for_queue or self._buffered > c.pull_threshold_for_all:
                self._room.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_FLOW_CONTROL_DELAY_S):
                        await self._room.wait()
                continue
            sub = self._subscriptions.get(state.mq.topic) or build_subscription(state.mq.topic, SUB_ALL)
            generation, offset = state.generation, state.pull_offset
            try:
                result = await self.pull_once(state.mq, sub, offset, c.pull_batch_size, block=True)
            except asyncio.CancelledError:
                raise
            except SubscriptionRefusedError as exc:
                log.error("pull of %s at %d failed: %s", state.mq, offset, exc.remark)
                self._refused = exc
                await asyncio.sleep(c.pull_time_delay_when_exception_ms / 1000)
                continue
            except (RocketQError, OSError) as exc:
                log.warning("pull of %s at %d failed: %s", state.mq, offset, exc)
                await asyncio.sleep(c.pull_time_delay_when_exception_ms / 1000)
                continue
            if generation != state.generation:
                continue  # a seek happened meanwhile: drop this result
            self._on_pull_result(state, generation, offset, result)
            if c.pull_interval_ms:
                await asyncio.sleep(c.pull_interval_ms / 1000)

    def _on_pull_result(self, state: _QueueState, generation: int, offset: int, result: PullResult) -> None:
        if result.status is PullStatus.FOUND:
            covered = _covered(offset, result)
            state.buffered += covered
            self._buffered += covered
            self._buffer.put_nowait((state, generation, offset, result))
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning(
                "offset %d of %s is illegal; moving to %d",
                state.pull_offset,
                state.mq,
                result.next_begin_offset,
            )
            if state.buffered == 0:
                state.consumed_offset = result.next_begin_offset
        state.pull_offset = result.next_begin_offset

    # ------------------------------------------------------------------ user API

    async def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        """The next batch of messages (possibly empty after ``timeout_ms``).

        Raises SubscriptionRefusedError when a broker refused the subscription (e.g. SQL92 on a
        broker without ``enablePropertyFilter=true``); the pull tasks keep retrying.
        """
        deadline = self._poll_deadline(timeout_ms)
        while True:
            polled = await self._next_pull(deadline)
            if polled is None:
                return []
            state, offset, result = polled
            msgs = await self._decoded(state, offset, result, _views)
            state.consumed_offset = result.next_begin_offset
            if msgs:  # else the tag filter dropped the whole pull: consumed all the same
                self._trace(msgs)
                return msgs

    async def poll_batch(self, timeout_ms: int | None = None) -> PolledBatch | None:
        """The next pull's messages as columns (:class:`PolledBatch`: queue offsets and bodies,
        the views on demand), or None after ``timeout_ms`` without one.

        What :meth:`poll` does, without a message object per message: a pull of same-size
        messages is read in bulk.  Offsets, commits, flow control and errors are :meth:`poll`'s.
        """
        deadline = self._poll_deadline(timeout_ms)
        while True:
            polled = await self._next_pull(deadline)
            if polled is None:
                return None
            state, offset, result = polled
            queue_offsets, bodies = await self._decoded(state, offset, result, PullResult.columns)
            state.consumed_offset = result.next_begin_offset
            if bodies:
                if self._tracer is not None:
                    self._trace(result.messages)
                return PolledBatch(state.mq, queue_offsets, bodies, result)

    def _poll_deadline(self, timeout_ms: int | None) -> float:
        """The start of a poll: checks, auto-commit, and the monotonic time it ends at."""
        if not self.running:
            raise MQClientError("the consumer is not started; call start() first")
        self._raise_refused()
        timeout = (self.config.poll_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        self._maybe_auto_commit()
        return time.monotonic() + timeout

    async def _next_pull(self, deadline: float) -> tuple[_QueueState, int, PullResult] | None:
        """The next buffered pull of a current queue position, or None at ``deadline``."""
        while True:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    state, generation, offset, result = self._buffer.get_nowait()
                else:
                    state, generation, offset, result = await asyncio.wait_for(self._buffer.get(), remaining)
            except (asyncio.QueueEmpty, TimeoutError):
                self._raise_refused()
                return None
            covered = _covered(offset, result)
            self._buffered -= covered
            state.buffered -= covered
            self._room.set()
            if generation != state.generation or state.pq.dropped or self._states.get(state.mq) is not state:
                continue
            return state, offset, result

    async def _decoded(
        self, state: _QueueState, offset: int, result: PullResult, decode: Callable[[PullResult], _T]
    ) -> _T:
        """``decode(result)`` of a pull; a pull that does not decode puts its queue back at its
        offset and raises MessageFormatError naming both."""
        try:
            return decode(result)
        except MessageFormatError as exc:
            log.error(
                "the pull of %s from offset %d does not decode; the queue goes back there",
                state.mq,
                offset,
            )
            await self._reposition(state, offset)
            raise MessageFormatError(
                f"the pull of {state.mq} from queue offset {offset} does not decode: {exc}; "
                "the queue stays there (seek past the record to skip it)"
            ) from exc

    def _trace(self, msgs: list[MessageExt]) -> None:
        if self._tracer is not None:  # Java: SubBefore and SubAfter (success) at poll
            self._tracer.after(self._tracer.before(msgs), True, ConsumeReturnType.SUCCESS)

    def _raise_refused(self) -> None:
        refused, self._refused = self._refused, None
        if refused is not None:
            raise refused

    def _maybe_auto_commit(self) -> None:
        if (
            self.config.auto_commit
            and time.monotonic() - self._last_auto_commit >= self.config.auto_commit_interval_ms / 1000
        ):
            self._last_auto_commit = time.monotonic()
            self._commit_consumed()

    def _commit_consumed(self) -> None:
        for mq, state in self._states.items():
            self.offset_store.update_offset(mq, state.consumed_offset)

    async def commit(self, offsets: dict[MessageQueue, int] | None = None, *, persist: bool = True) -> None:
        """Commit the consumed offsets (or the given ones: ``mq -> next offset to consume``)."""
        if offsets is None:
            self._commit_consumed()
            mqs: Iterable[MessageQueue] = list(self._states)
        else:
            for mq, off in offsets.items():
                self.offset_store.update_offset(mq, off)
            mqs = list(offsets)
        if persist:
            store = self.offset_store
            for mq in mqs:
                offset = store.offset_table.get(mq)
                if isinstance(store, RemoteBrokerOffsetStore) and offset is not None:
                    await store.commit_sync(mq, offset)
                else:
                    await store.persist(mq)

    async def committed(self, mq: MessageQueue) -> int:
        """The offset committed on the broker (-1 if none)."""
        return await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    def _state(self, mq: MessageQueue) -> _QueueState:
        state = self._states.get(mq)
        if state is None:
            raise MQClientError(f"the message queue is not assigned to this consumer: {mq}")
        return state

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` from ``offset`` (checked against the queue's min/max offsets)."""
        state = self._state(mq)
        api = self.instance.api

        async def bounds(addr: str) -> tuple[int, int]:
            low = await api.get_min_offset(addr, mq.topic, mq.queue_id)
            return low, await api.get_max_offset(addr, mq.topic, mq.queue_id)

        low, high = await self.on_replica(mq, bounds)
        if not low <= offset <= high:
            raise MQClientError(f"seek offset {offset} of {mq} is outside [{low}, {high}]")
        await self._reposition(state, offset)

    async def _reposition(self, state: _QueueState, offset: int) -> None:
        await self._stop_task(state)
        pq = ProcessQueue()
        self.rebalance.process_queue_table[state.mq] = pq
        new = _QueueState(state.mq, pq, offset, offset, state.generation + 1, state.paused)
        self._states[state.mq] = new
        new.task = asyncio.get_running_loop().create_task(self._pull_loop(new), name=f"lite-pull {state.mq}")

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        state = self._state(mq)
        api = self.instance.api
        low = await self.on_replica(mq, lambda addr: api.get_min_offset(addr, mq.topic, mq.queue_id))
        await self._reposition(state, low)

    async def seek_to_end(self, mq: MessageQueue) -> None:
        state = self._state(mq)
        api = self.instance.api
        high = await self.on_replica(mq, lambda addr: api.get_max_offset(addr, mq.topic, mq.queue_id))
        await self._reposition(state, high)

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        api = self.instance.api
        return await self.on_replica(
            mq, lambda addr: api.search_offset(addr, mq.topic, mq.queue_id, timestamp_ms)
        )

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            self._state(mq).paused = True

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            self._state(mq).paused = False

    def assignment(self) -> set[MessageQueue]:
        return set(self._states)

    async def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        *,
        expression: Subscribable = SUB_ALL,
        block: bool = False,
    ) -> PullResult:
        """One pull of ``mq`` at ``offset``, outside the buffer (no assignment needed);
        ``expression`` is a tag expression or a :class:`MessageSelector`."""
        if not self.running:
            raise MQClientError("the consumer is not started; call start() first")
        sub: SubscriptionData = MessageSelector.of(expression).subscription(mq.topic)
        return await self.pull_once(mq, sub, offset, max_nums, block=block)
