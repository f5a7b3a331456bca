"""SimpleConsumer against a scripted POP server (rocketq.server.testing: a test double
of the wire, not a broker).  The real-process round trip lives in
integration_tests/test_simple_consumer.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from typing import Any

import pytest

from rocketq.client.config import ClientConfig
from rocketq.client.consumer.pop_rpc import PopNotSupportedError
from rocketq.client.consumer.simple import AsyncSimpleConsumer, InvalidReceiptHandleError, SimpleConsumer
from rocketq.client.errors import (
    ClientError,
    MQClientError,
    NoRouteError,
    RemotingError,
    SubscriptionGroupNotExistError,
)
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import AsyncProducer
from rocketq.client.producer.selector import SelectMessageQueueByHash
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.pop import (
    ExtraInfo,
)
from rocketq.client.remoting.properties import MessageConst
from rocketq.server.testing import QUEUES, PopServer, pop_cluster, run


def _consumer(addr: str, **kw: Any) -> AsyncSimpleConsumer:
    kw.setdefault("await_duration_s", 0.1)
    return AsyncSimpleConsumer(addr, "g", {"T": "*"}, **kw)


def test_receive_ack_and_redelivery_after_the_invisible_time() -> None:
    async def main() -> None:
        async with pop_cluster() as (a,):
            for i in range(3):
                a.put("T", i % QUEUES, b"m%d" % i)
            async with _consumer(a.addr) as c:
                got = await c.receive(16, invisible_duration_s=1.5)
                assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2"]
                assert all(m.topic == "T" and m.properties[MessageConst.POP_CK] for m in got)
                assert await c.receive(16, 1.5) == []  # all leased
                await c.ack(got[0])
                await asyncio.sleep(1.7)
                again = await c.receive(16, 10)
                assert sorted(m.body for m in again) == sorted(m.body for m in got[1:])
                with pytest.raises(InvalidReceiptHandleError, match="expired"):
                    await c.ack(got[1])  # the old handle of a redelivered message
                for m in again:
                    await c.ack(m)
                assert await c.receive(16, 10) == []

    run(main())


def test_change_invisible_duration_returns_the_new_handle_that_acks() -> None:
    async def main() -> None:
        async with pop_cluster() as (a,):
            a.put("T", 1, b"x")
            async with _consumer(a.addr) as c:
                (m,) = await c.receive(1, 1.5)
                old = m.properties[MessageConst.POP_CK]
                new = await c.change_invisible_duration(m, 30)
                assert new != old and m.properties[MessageConst.POP_CK] == new
                info = ExtraInfo.parse(new)
                assert (info.ck_queue_offset, info.queue_offset, info.invisible_time, info.revive_qid) == (
                    0, 0, 30000, 5,
                )  # fmt: skip
                await asyncio.sleep(1.7)  # past the first invisible time: extended, still hidden
                assert await c.receive(1, 10) == []
                await c.ack(m)
                assert ("T", 1, 0) in a.acked

    run(main())


def test_retry_topic_messages_ack_with_the_real_topic() -> None:
    async def main() -> None:
        async with pop_cluster() as (a,):
            a.put("%RETRY%g_T", 0, b"again")
            async with _consumer(a.addr) as c:
                (m,) = await c.receive(4, 10)
                assert (
                    m.topic == "T"
                    and ExtraInfo.parse(m.properties[MessageConst.POP_CK]).retry_flag.value == "1"
                )
                await c.ack(m)
                ack = [r for r in a.requests if r.code == RequestCode.ACK_MESSAGE][-1]
                assert ack.ext_fields["topic"] == "%RETRY%g_T"
                assert ("%RETRY%g_T", 0, 0) in a.acked

    run(main())


def test_receive_rotates_brokers_and_long_polls_when_all_are_empty() -> None:
    async def main() -> None:
        async with pop_cluster(2) as (a, b):
            b.put("T", 0, b"on-b")
            async with _consumer(a.addr, await_duration_s=0.2) as c:
                (m,) = await c.receive(4, 10)
                assert (
                    m.body == b"on-b"
                    and ExtraInfo.parse(m.properties[MessageConst.POP_CK]).broker_name == "broker-b"
                )
                assert a.polls == [0] and b.polls == [0]  # asked each without waiting first
                assert await c.receive(4, 10) == []
                assert a.polls[-1] == 200 or b.polls[-1] == 200  # then one long poll
                await c.ack(m)
                assert ("T", 0, 0) in b.acked

    run(main())


def test_clear_errors() -> None:
    async def main() -> None:
        async with pop_cluster(pop=False) as (a,):
            async with _consumer(a.addr) as c:
                with pytest.raises(PopNotSupportedError, match="RocketMQ 5 broker"):
                    await c.receive()
            bad_topic = AsyncSimpleConsumer(a.addr, "g", {"Nope": "*"})
            with pytest.raises(NoRouteError, match="Nope"):
                await bad_topic.start()
            await bad_topic.shutdown()
        async with pop_cluster() as (a,):
            a.pop_code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            async with _consumer(a.addr) as c:
                with pytest.raises(SubscriptionGroupNotExistError):
                    await c.receive()
                with pytest.raises(MQClientError, match="max_messages"):
                    await c.receive(33)
                with pytest.raises(MQClientError, match="invisible_duration_s"):
                    await c.receive(1, 0)
                fake = MessageExt.__new__(MessageExt)
                object.__setattr__(fake, "properties", {})
                object.__setattr__(fake, "physical_offset", 0)
                object.__setattr__(fake, "store_host", ("127.0.0.1", 1))
                with pytest.raises(InvalidReceiptHandleError, match="no receipt handle"):
                    await c.ack(fake)
                object.__setattr__(fake, "properties", {MessageConst.POP_CK: "1 2 3"})
                with pytest.raises(InvalidReceiptHandleError, match="extraInfo"):
                    await c.ack(fake)
        with pytest.raises(MQClientError, match="consumer group"):
            AsyncSimpleConsumer("127.0.0.1:1", "bad group", {"T": "*"})

    run(main())


def test_blocking_twin() -> None:
    async def serve(ready: asyncio.Event, stop: asyncio.Event, out: list[PopServer]) -> None:
        async with pop_cluster() as (a,):
            a.put("T", 0, b"b1")
            out.append(a)
            ready.set()
            await stop.wait()

    loop = asyncio.new_event_loop()
    ready, stop, out = asyncio.Event(), asyncio.Event(), []  # type: ignore[var-annotated]
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(ready, stop, out),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not out and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        consumer = SimpleConsumer(out[0].addr, "g", await_duration_s=0.1)
        consumer.subscribe("T", "*")
        with consumer as c:
            (m,) = c.receive(2, 10)
            assert m.body == b"b1"
            c.change_invisible_duration(m, 20)
            c.ack(m)
            assert c.receive(2, 10) == []
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)


def test_message_group_picks_the_queue_by_the_group_hash_and_keeps_order() -> None:
    async def main() -> None:
        async with pop_cluster(2) as (a, b):
            groups = [f"order-{i}" for i in range(8)]
            async with AsyncProducer(a.addr, producer_group="pg") as producer:
                queues = list(producer.routes.selector_queues(await producer.routes.get("T")))
                for n in range(3):
                    for g in groups:
                        msg = Message("T", f"{g}:{n}".encode(), message_group=g)
                        assert msg.sharding_key == g and msg.wire_properties()[MessageConst.SHARDING_KEY] == g
                        result = await producer.send(msg)
                        assert result.message_queue == SelectMessageQueueByHash()(queues, msg, None)
                await producer.send_oneway(Message("T", b"order-0:3", message_group="order-0"))
                plain = {(await producer.send(Message("T", b"plain"))).message_queue for _ in range(6)}
                assert len(plain) > 1  # no group: the queues take turns as before
            used = {(s.name, q) for s in (a, b) for (t, q), recs in s.store.items() if t == "T" and recs}
            assert len(used) > 1  # the groups spread over queues and brokers
            for g in groups:
                bodies = [
                    rec for s in (a, b) for (t, q), recs in s.store.items() if t == "T"
                    for rec in recs if f"{g}:".encode() in rec
                ]  # fmt: skip
                sent = 4 if g == "order-0" else 3
                assert len(bodies) == sent  # all in one queue (checked above per send), in order:
                assert [int(r.split(f"{g}:".encode())[1][:1]) for r in bodies] == list(range(sent))
        with pytest.raises(ClientError, match="same"):
            Message("T", b"x", message_group="a", sharding_key="b")

    run(main())


def test_fifo_pops_are_orderly_and_a_lost_answer_is_asked_again_with_its_attempt_id() -> None:
    async def main() -> None:
        async with pop_cluster() as (a,):
            a.put("T", 0, b"f0")
            config = ClientConfig(mq_client_api_timeout_ms=300)
            async with _consumer(a.addr, fifo=True, config=config) as c:
                a.stall_pops = 1
                with pytest.raises(RemotingError):
                    await c.receive(4, 10)
                (m,) = await c.receive(4, 10)
                assert m.body == b"f0"
                await c.receive(4, 10)
            first, retried, fresh = a.pop_headers[:3]
            assert first.order and first.attempt_id
            assert retried.attempt_id == first.attempt_id  # the same batch is asked for again
            assert fresh.attempt_id not in (None, first.attempt_id)
            async with _consumer(a.addr) as plain:
                await plain.receive(4, 10)
            assert not a.pop_headers[-1].order and a.pop_headers[-1].attempt_id is None

    run(main())


def test_receive_passes_over_a_broker_that_is_down() -> None:
    async def main() -> None:
        async with pop_cluster(2) as (a, b):
            b.put("T", 1, b"alive")
            async with _consumer(a.addr) as c:
                await a.server.stop(0)  # broker-a (also the NameServer) goes away; routes are cached
                for _ in range(2):  # whichever broker the rotation starts with
                    got = await c.receive(4, 10)
                    if got:
                        break
                assert [m.body for m in got] == [b"alive"]
                await c.ack(got[0])
                assert ("T", 1, 0) in b.acked
                await b.server.stop(0)
                with pytest.raises(RemotingError):  # every broker down: the transport error
                    await c.receive(4, 10)

    run(main())


@pytest.mark.parametrize("batch_ack", [True, False])
def test_ack_many_batches_per_broker_and_names_the_handles_it_could_not_use(batch_ack: bool) -> None:
    async def main() -> None:
        async with pop_cluster(2, batch_ack=batch_ack) as (a, b):
            for s in (a, b):
                for i in range(4):
                    s.put("T", i % QUEUES, b"%s-%d" % (s.name.encode(), i))
            s.put("%RETRY%g_T", 0, b"retried")
            async with _consumer(a.addr) as c:
                got: list[MessageExt] = []
                for _ in range(4):
                    got += await c.receive(32, 10)
                assert len(got) == 9
                expired = got[0]
                expired.properties[MessageConst.POP_CK] = str(
                    dataclasses.replace(ExtraInfo.parse(expired.properties[MessageConst.POP_CK]), pop_time=1)
                )
                with pytest.raises(InvalidReceiptHandleError, match="1 of 9 messages were not acked"):
                    await c.ack_many(got)
                assert len(a.acked) + len(b.acked) == 8
                assert ("%RETRY%g_T", 0, 0) in b.acked
                codes = [r.code for s in (a, b) for r in s.requests]
                if batch_ack:
                    assert (
                        codes.count(RequestCode.BATCH_ACK_MESSAGE) == 2
                        and RequestCode.ACK_MESSAGE not in codes
                    )
                else:
                    assert codes.count(RequestCode.ACK_MESSAGE) == 8

    run(main())


def test_ack_many_of_one_checkpoint_acks_each_message_at_its_own_offset() -> None:
    # the handles of one checkpoint differ only in the offset: ack_many parses the rest once
    async def main() -> None:
        async with pop_cluster(1) as (a,):
            for i in range(6):
                a.put("T", 1, b"m%d" % i)
            async with _consumer(a.addr) as c:
                got = await c.receive(32, 10)
                assert [m.queue_offset for m in got] == list(range(6))
                bad = got[2]
                handle = bad.properties[MessageConst.POP_CK]
                bad.properties[MessageConst.POP_CK] = handle.rpartition(" ")[0] + " x"
                with pytest.raises(InvalidReceiptHandleError, match=r"1 of 6 messages.*queueOffset 'x'"):
                    await c.ack_many(got)
                assert sorted(a.acked) == [("T", 1, o) for o in (0, 1, 3, 4, 5)]

    run(main())
