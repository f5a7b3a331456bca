"""The orderly pop of one queue (``orderly_pop_queue``, ``settle_ack``) on a real store, with a clock
the test moves: the retry limit of a FIFO consumer's failures under both ``popOrderBlockScope``s.

A FIFO consumer processes a batch in order and stops a message group at its first failure, so
the group's later messages of the batch are delivered again without having been tried, and under
``queue`` scope a message acked after an un-acked one is delivered again too.  Neither may bring
the message nearer to the dead-letter queue: only the deliveries in which it was its group's
first un-acked message and was not acked count.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketq.broker.config import PopOrderBlockScope
from rocketq.broker.config_loader import load_broker_config
from rocketq.broker.metadata import SubscriptionGroupConfig
from rocketq.broker.pop.order_info import ConsumerOrderInfoManager
from rocketq.broker.pop.orderly import OrderlyBatch, orderly_may_deliver, orderly_pop_queue, settle_ack
from rocketq.broker.processor.context import BrokerContext, build_context
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.testing import SMALL_STORE_CONF, small_store
from rocketq.client.remoting.message import StoredMessage, decode_stored_message
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.vocabulary import TopicConfig, dlq_topic

T0 = 1_700_000_000_000
INVISIBLE_MS = 1_000
TOPIC, GROUP = "T", "g"
HOST = ("127.0.0.1", 1)
RETRY_MAX_TIMES = 2
SCOPES = [PopOrderBlockScope.QUEUE, PopOrderBlockScope.GROUP]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@dataclass
class Fifo:
    """One queue of FIFO messages and a consumer group whose retryMaxTimes is RETRY_MAX_TIMES."""

    ctx: BrokerContext
    clock: Clock
    attempts: int = 0

    async def pop(self, max_nums: int = 4) -> tuple[list[int], int]:
        """One orderly pop from the committed offset: the offsets delivered and the popTime."""
        self.attempts += 1
        pop_time = self.clock.now
        batch: OrderlyBatch = await orderly_pop_queue(
            self.ctx,
            group=GROUP,
            topic=TOPIC,
            queue_id=0,
            offset=max(self.ctx.offsets.query_offset(GROUP, TOPIC, 0), 0),
            attempt_id=f"att-{self.attempts}",
            pop_time=pop_time,
            invisible_time=INVISIBLE_MS,
            max_nums=max_nums,
            msg_filter=None,
        )
        return batch.queue_offsets, pop_time

    def ack(self, offset: int, pop_time: int) -> None:
        assert settle_ack(self.ctx, GROUP, TOPIC, 0, offset, pop_time) >= -2

    def time_out(self) -> None:
        self.clock.now += INVISIBLE_MS

    def dead(self) -> list[bytes]:
        assert self.ctx.store.wait_dispatched()
        result = self.ctx.store.get_message("probe", dlq_topic(GROUP), 0, 0, 100, 1 << 20)
        try:
            msgs: list[StoredMessage] = [decode_stored_message(b) for b in result.buffers]
        finally:
            result.release()
        return [m.body for m in msgs]


def run(
    tmp_path: Path, scope: PopOrderBlockScope, groups: str, scenario: Callable[[Fifo], Awaitable[None]]
) -> None:
    """``groups``: the message group of each message (``A:0`` is the body of the first of A)."""

    async def main() -> None:
        store = small_store(tmp_path / "store")
        store.start()
        config = load_broker_config(None, overrides={**SMALL_STORE_CONF, "storePathRootDir": str(tmp_path)})
        ctx = build_context(config, store, asyncio.get_running_loop())
        clock = Clock()
        ctx.pop_order = ConsumerOrderInfoManager(scope=scope, clock_ms=clock)
        ctx.topics.update(TopicConfig(topic_name=TOPIC, read_queue_nums=1, write_queue_nums=1))
        ctx.groups.update(SubscriptionGroupConfig(group_name=GROUP, retry_max_times=RETRY_MAX_TIMES))
        try:
            _put_groups(store, groups)
            await scenario(Fifo(ctx, clock))
        finally:
            store.shutdown()

    asyncio.run(main())


def _put_groups(store: MessageStore, groups: str) -> None:
    seq: dict[str, int] = {}
    for g in groups:
        n = seq[g] = seq.get(g, -1) + 1
        msg = MessageToStore(
            topic=TOPIC,
            queue_id=0,
            body=f"{g}:{n}".encode(),
            properties={MessageConst.SHARDING_KEY: g},
            born_timestamp=T0,
            born_host=HOST,
            store_host=HOST,
        )
        assert store.put_message(msg).is_ok
    assert store.wait_dispatched()


@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: s.name.lower())
def test_messages_waiting_behind_a_failing_one_get_their_own_retries(
    tmp_path: Path, scope: PopOrderBlockScope
) -> None:
    """A:0 fails until it is dead-lettered; A:1, delivered behind it every time, then fails twice
    (its retryMaxTimes) and is still delivered a third time, and acked."""

    async def scenario(fifo: Fifo) -> None:
        for _ in range(RETRY_MAX_TIMES + 1):  # A:0 delivered and failed 3 times
            got, _ = await fifo.pop()
            assert got == [0, 1, 2, 3]
            fifo.time_out()
        got, _ = await fifo.pop()  # the 4th delivery would exceed retryMaxTimes: A:0 dead-lettered
        assert got == [1, 2, 3]
        assert fifo.dead() == [b"A:0"]
        fifo.time_out()
        got, _ = await fifo.pop()  # A:1 failed once
        assert got == [1, 2, 3, 4]
        fifo.time_out()
        got, pop_time = await fifo.pop()  # and twice: it still has one delivery left
        assert got[0] == 1, f"A:1 dead-lettered after {RETRY_MAX_TIMES - 1} failures"
        for o in got:
            fifo.ack(o, pop_time)
        assert fifo.dead() == [b"A:0"]

    run(tmp_path, scope, "AAAAAAAA", scenario)


def test_message_acked_each_time_behind_a_failing_one_is_never_dead_lettered(tmp_path: Path) -> None:
    """``queue`` scope delivers B:0 (acked) again with the failing A:0 before it; when A:0 is
    dead-lettered B:0 is not."""

    async def scenario(fifo: Fifo) -> None:
        for _ in range(RETRY_MAX_TIMES + 1):
            got, pop_time = await fifo.pop(2)
            assert got == [0, 1]
            fifo.ack(1, pop_time)
            fifo.time_out()
        got, pop_time = await fifo.pop(2)
        assert fifo.dead() == [b"A:0"]
        assert got == [1]  # B:0 delivered again (acked, but A:0 held the offset), not dead-lettered
        fifo.ack(1, pop_time)
        assert (await fifo.pop(2))[0] == [2, 3]

    run(tmp_path, PopOrderBlockScope.QUEUE, "ABAB", scenario)


@pytest.mark.parametrize("scope", SCOPES, ids=lambda s: s.name.lower())
def test_message_failing_every_time_is_dead_lettered_after_retry_max_times(
    tmp_path: Path, scope: PopOrderBlockScope
) -> None:
    async def scenario(fifo: Fifo) -> None:
        deliveries = 0
        for _ in range(10):
            got, _ = await fifo.pop(1)
            if got != [0]:
                break
            deliveries += 1
            fifo.time_out()
        assert deliveries == RETRY_MAX_TIMES + 1
        assert fifo.dead() == [b"A:0"]

    run(tmp_path, scope, "AA", scenario)


def test_group_scope_passes_any_number_of_messages_behind_a_held_group(tmp_path: Path) -> None:
    """S:0 stays in flight at the consumer offset while the 30 messages of other groups among S's
    next ten are delivered and acked, two at a time (each read is a window of 8): the pops keep
    finding the free ones however many acked and held messages come first; S:1 waits for S:0."""
    groups = "S" + "ABCS" * 10
    others = [o for o, g in enumerate(groups) if g != "S"]

    async def scenario(fifo: Fifo) -> None:
        ctx = fifo.ctx
        got, held_pop_time = await fifo.pop(1)
        assert got == [0]
        delivered: list[int] = []
        for _ in range(60):
            got, pop_time = await fifo.pop(2)
            if not got:
                break
            delivered += got
            for o in got:
                fifo.ack(o, pop_time)
        assert delivered == others
        assert not orderly_may_deliver(ctx, GROUP, TOPIC, 0, None)  # only S is left: held
        fifo.ack(0, held_pop_time)
        assert orderly_may_deliver(ctx, GROUP, TOPIC, 0, None)
        assert (await fifo.pop(2))[0] == [4, 8]

    run(tmp_path, PopOrderBlockScope.GROUP, groups, scenario)
