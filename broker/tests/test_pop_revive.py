"""The revive service on a real store, with a clock the test moves: when checkpoints are revived,
what acks hold back, records that came through the timer wheel, dead letters, and a replay after
a restart that neither revives twice nor forgets a POP offset."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from rocketq.broker.config_loader import load_broker_config
from rocketq.broker.metadata import SubscriptionGroupConfig
from rocketq.broker.pop import revive
from rocketq.broker.pop.records import AckMsg, PopCheckPoint, ack_message, ck_message
from rocketq.broker.pop.revive import ACK_GRACE_MS, TIMER_ACK_GRACE_MS, ReviveService
from rocketq.broker.processor.context import BrokerContext, build_context
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.testing import SMALL_STORE_CONF, small_store
from rocketq.client.remoting.message import StoredMessage, decode_stored_message
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.vocabulary import REVIVE_GROUP, TopicConfig, dlq_topic, revive_topic

T0 = 1_700_000_000_000
IT = 10_000
TOPIC = "T"
GROUP = "g"
HOST = ("127.0.0.1", 1)
RETRY = f"%RETRY%{GROUP}_{TOPIC}"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def run(
    tmp_path: Path, scenario: Callable[[BrokerContext, MessageStore], Awaitable[None]], **conf: str
) -> None:
    async def main() -> None:
        store = small_store(tmp_path / "store")
        store.start()
        overrides = {**SMALL_STORE_CONF, "storePathRootDir": str(tmp_path), **conf}
        config = load_broker_config(None, overrides=overrides)
        ctx = build_context(config, store, asyncio.get_running_loop())
        ctx.topics.update(TopicConfig(topic_name=TOPIC, read_queue_nums=1, write_queue_nums=1))
        try:
            await scenario(ctx, store)
        finally:
            store.shutdown()

    asyncio.run(main())


def put(store: MessageStore, msg: MessageToStore) -> None:
    assert store.put_message(msg).is_ok
    assert store.wait_dispatched()


def put_messages(store: MessageStore, n: int) -> None:
    for i in range(n):
        put(
            store,
            MessageToStore(
                topic=TOPIC,
                queue_id=0,
                body=f"m{i}".encode(),
                properties={MessageConst.TAGS: "a"},
                born_timestamp=T0,
                born_host=HOST,
                store_host=HOST,
            ),
        )


def checkpoint(
    ctx: BrokerContext, start: int, n: int, *, pop_time: int = T0, timer_fed: bool = False
) -> PopCheckPoint:
    ck = PopCheckPoint(
        start_offset=start,
        pop_time=pop_time,
        invisible_time=IT,
        queue_id=0,
        topic=TOPIC,
        cid=GROUP,
        queue_offset_diff=tuple(range(n)),
        broker_name="broker-t",
    )
    msg = ck_message(
        ck,
        revive_topic=revive_topic(ctx.config.broker_cluster_name),
        revive_qid=0,
        now_ms=T0,
        store_host=HOST,
    )
    if timer_fed:  # as the timer wheel delivers it: TIMER_OUT_MS kept on the real topic
        props = dict(msg.properties) if not isinstance(msg.properties, str) else {}
        props[MessageConst.TIMER_OUT_MS] = props[MessageConst.TIMER_DELIVER_MS]
        msg = MessageToStore(
            topic=msg.topic,
            queue_id=0,
            body=msg.body,
            properties=props,
            born_timestamp=T0,
            born_host=HOST,
            store_host=HOST,
        )
    put(ctx.store, msg)
    return ck


def ack(ctx: BrokerContext, ck: PopCheckPoint, offset: int) -> None:
    record = AckMsg(
        ack_offset=offset,
        start_offset=ck.start_offset,
        consumer_group=GROUP,
        topic=ck.topic,
        queue_id=0,
        pop_time=ck.pop_time,
        broker_name="broker-t",
    )
    topic = revive_topic(ctx.config.broker_cluster_name)
    put(
        ctx.store,
        ack_message(record, invisible_time=IT, revive_topic=topic, revive_qid=0, now_ms=T0, store_host=HOST),
    )


def queue(store: MessageStore, topic: str) -> list[StoredMessage]:
    result = store.get_message("probe", topic, 0, 0, 100, 1 << 20)
    try:
        return [decode_stored_message(b) for b in result.buffers]
    finally:
        result.release()


async def round_at(service: ReviveService, clock: Clock, at: int) -> int:
    clock.now = at
    revived = await service.run_round()
    assert service.ctx.store.wait_dispatched()
    return revived


def test_unacked_revived_after_invisible_time_acked_not(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, store: MessageStore) -> None:
        put_messages(store, 3)
        ck = checkpoint(ctx, 0, 3)
        ack(ctx, ck, 1)
        clock = Clock()
        service = ReviveService(ctx, clock=clock)
        await service.recover()
        assert await round_at(service, clock, T0 + IT + ACK_GRACE_MS - 1) == 0
        assert service.pending_count() == 1
        assert await round_at(service, clock, T0 + IT + ACK_GRACE_MS) == 2
        retried = queue(store, RETRY)
        assert [m.body for m in retried] == [b"m0", b"m2"]
        assert {m.reconsume_times for m in retried} == {1}
        assert {m.properties[MessageConst.FIRST_POP_TIME] for m in retried} == {str(T0)}
        assert retried[0].properties[MessageConst.TAGS] == "a"
        assert service.pending_count() == 0
        # the revive offset moves past everything read, the service's own record of the revived
        # offsets (a batch ack) included, once the next round read it
        assert await round_at(service, clock, T0 + 2 * IT) == 0
        max_offset = store.get_max_offset_in_queue(service.topic, 0)
        assert max_offset == 3
        assert ctx.offsets.query_offset(REVIVE_GROUP, service.topic, 0) == max_offset

    run(tmp_path, scenario)


def test_fully_acked_checkpoint_resolves_before_its_time(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, store: MessageStore) -> None:
        put_messages(store, 2)
        ck = checkpoint(ctx, 0, 2)
        ack(ctx, ck, 0)
        ack(ctx, ck, 1)
        clock = Clock()
        service = ReviveService(ctx, clock=clock)
        await service.recover()
        assert service.pending_count() == 0
        assert await round_at(service, clock, T0 + 10 * IT) == 0
        assert queue(store, RETRY) == []

    run(tmp_path, scenario)


def test_timer_fed_checkpoint_waits_for_acks_delivered_at_revive_time(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, store: MessageStore) -> None:
        put_messages(store, 1)
        ck = checkpoint(ctx, 0, 1, timer_fed=True)
        clock = Clock()
        service = ReviveService(ctx, clock=clock)
        await service.recover()
        assert await round_at(service, clock, T0 + IT + ACK_GRACE_MS) == 0  # its ack may still come
        ack(ctx, ck, 0)  # the wheel delivers the ack at popTime + invisibleTime
        assert await round_at(service, clock, T0 + IT + TIMER_ACK_GRACE_MS) == 0
        assert service.pending_count() == 0
        assert queue(store, RETRY) == []

    run(tmp_path, scenario)


def test_past_retry_max_times_goes_to_dlq(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, store: MessageStore) -> None:
        ctx.groups.update(SubscriptionGroupConfig(group_name=GROUP, retry_max_times=0))
        put_messages(store, 1)
        checkpoint(ctx, 0, 1)
        clock = Clock()
        service = ReviveService(ctx, clock=clock)
        await service.recover()
        assert await round_at(service, clock, T0 + IT + ACK_GRACE_MS) == 1
        assert queue(store, RETRY) == []
        dead = queue(store, dlq_topic(GROUP))
        assert [m.body for m in dead] == [b"m0"]
        assert dead[0].reconsume_times == 1
        assert dead[0].properties[MessageConst.RETRY_TOPIC] == TOPIC
        assert service.dead_lettered == 1

    run(tmp_path, scenario)


def test_replay_revives_nothing_twice_and_raises_pop_offsets(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, store: MessageStore) -> None:
        put_messages(store, 5)
        first = checkpoint(ctx, 0, 2)
        clock = Clock()
        service = ReviveService(ctx, clock=clock)
        await service.recover()
        assert await round_at(service, clock, T0 + IT + ACK_GRACE_MS) == 2
        late = checkpoint(ctx, 2, 3, pop_time=T0 + IT)  # popped later, still in flight
        # a restart that lost every committed offset: the revive log is replayed from its start
        ctx.offsets.remove_group(REVIVE_GROUP)
        ctx.offsets.remove_group(GROUP)
        again = ReviveService(ctx, clock=clock)
        await again.recover()
        assert ctx.offsets.query_offset(GROUP, TOPIC, 0) == late.end_offset == 5
        assert again.pending_count() == 1  # "first" was revived and recorded so; "late" is pending
        assert await round_at(again, clock, T0 + 2 * IT + ACK_GRACE_MS) == 3
        assert [m.body for m in queue(store, RETRY)] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
        assert first.end_offset == 2

    run(tmp_path, scenario)


def test_replay_reads_past_the_per_round_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(revive, "READ_BATCH_MSGS", 2)
    monkeypatch.setattr(revive, "MAX_RECORDS_PER_ROUND", 2)  # a round reads one batch of two

    async def scenario(ctx: BrokerContext, store: MessageStore) -> None:
        put_messages(store, 6)
        for start in range(6):
            checkpoint(ctx, start, 1)
        service = ReviveService(ctx, clock=Clock())
        await service.recover()
        assert ctx.offsets.query_offset(GROUP, TOPIC, 0) == 6
        assert service.pending_count() == 6
        fresh = ReviveService(ctx, clock=Clock())
        fresh.queues = {}
        ctx.offsets.remove_group(REVIVE_GROUP)
        await fresh.recover()
        await fresh.run_round()
        assert fresh.pending_count() == 6

    run(tmp_path, scenario)


def test_retry_topic_v2_naming(tmp_path: Path) -> None:
    async def scenario(ctx: BrokerContext, store: MessageStore) -> None:
        put_messages(store, 1)
        checkpoint(ctx, 0, 1)
        clock = Clock()
        service = ReviveService(ctx, clock=clock)
        await service.recover()
        assert await round_at(service, clock, T0 + IT + ACK_GRACE_MS) == 1
        assert queue(store, RETRY) == []
        assert [m.body for m in queue(store, f"%RETRY%{GROUP}+{TOPIC}")] == [b"m0"]

    run(tmp_path, scenario, enableRetryTopicV2="true")
