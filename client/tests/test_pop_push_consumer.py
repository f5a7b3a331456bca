"""Push consumer on POP against the scripted POP server (rocketq.server.testing, a wire double)."""

from __future__ import annotations

import asyncio
import time

import pytest

from rocketq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from rocketq.client.consumer.pop_push import AsyncPopPushConsumer
from rocketq.client.errors import MQClientError
from rocketq.client.model import MessageExt
from rocketq.client.remoting.codes import RequestCode
from rocketq.server.testing import QUEUES, pop_cluster, run


def test_concurrent_acks_success_and_redelivers_reconsume_later_with_backoff() -> None:
    async def main() -> None:
        async with pop_cluster(2) as (a, b):
            for i in range(20):
                (a if i % 2 else b).put("T", i % QUEUES, b"m%d" % i)
            seen: list[bytes] = []
            failed_once: set[bytes] = set()

            def listener(
                msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
            ) -> ConsumeConcurrentlyStatus:
                for m in msgs:
                    seen.append(m.body)
                    if m.body in (b"m3", b"m4") and m.body not in failed_once:
                        failed_once.add(m.body)
                        return ConsumeConcurrentlyStatus.RECONSUME_LATER
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            c = AsyncPopPushConsumer(a.addr, "g", {"T": "*"}, await_duration_s=0.1, retry_backoff_s=[0.5])
            c.register_message_listener_concurrently(listener)
            async with c:
                deadline = time.monotonic() + 10
                while len(a.acked) + len(b.acked) < 20 and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
            assert len(a.acked) + len(b.acked) == 20
            assert sorted(seen) == sorted([b"m%d" % i for i in range(20)] + [b"m3", b"m4"])

    run(main())


def test_flow_control_keeps_at_most_the_threshold_in_flight() -> None:
    async def main() -> None:
        async with pop_cluster() as (a,):
            for i in range(30):
                a.put("T", i % QUEUES, b"m%d" % i)
            gate = asyncio.Event()
            peak = 0

            async def listener(
                msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
            ) -> ConsumeConcurrentlyStatus:
                nonlocal peak
                peak = max(peak, c.in_flight)
                await gate.wait()
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            c = AsyncPopPushConsumer(a.addr, "g", {"T": "*"}, await_duration_s=0.1, batch_nums=4,
                                     pop_threshold_for_queue=8)  # fmt: skip
            c.register_message_listener_concurrently(listener)
            async with c:
                await asyncio.sleep(1.0)
                leased = len(a.visible_at)
                gate.set()
                deadline = time.monotonic() + 10
                while len(a.acked) < 30 and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
            assert leased == 8 and peak <= 8
            assert len(a.acked) == 30

    run(main())


def test_orderly_hands_each_queue_in_order_and_suspend_changes_invisible_time() -> None:
    async def main() -> None:
        async with pop_cluster() as (a,):
            for i in range(10):
                a.put("T", 0, b"%d" % i)
            order: list[int] = []
            suspended = False

            def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
                nonlocal suspended
                n = int(msgs[0].body)
                if n == 4 and not suspended:
                    suspended = True
                    ctx.suspend_current_queue_time_ms = 1500  # long: the double does not block the queue
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                order.append(n)
                return ConsumeOrderlyStatus.SUCCESS

            c = AsyncPopPushConsumer(a.addr, "g", {"T": "*"}, await_duration_s=0.1)
            c.register_message_listener_orderly(listener)
            async with c:
                deadline = time.monotonic() + 10
                while len(a.acked) < 10 and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
            assert order == list(range(10))
            assert all(h.order for h in a.pop_headers)
            changes = [r for r in a.requests if r.code == RequestCode.CHANGE_MESSAGE_INVISIBLETIME]
            assert len(changes) == 6  # message 4 and the rest of its batch

    run(main())


def test_an_exception_counts_as_reconsume_later_and_bad_settings_are_named() -> None:
    async def main() -> None:
        async with pop_cluster() as (a,):
            a.put("T", 0, b"boom")
            calls: list[int] = []

            def listener(
                msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
            ) -> ConsumeConcurrentlyStatus:
                calls.append(len(msgs))
                if len(calls) == 1:
                    raise RuntimeError("listener bug")
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            c = AsyncPopPushConsumer(a.addr, "g", {"T": "*"}, await_duration_s=0.1, retry_backoff_s=[0.3])
            with pytest.raises(MQClientError, match="register a listener"):
                await c.start()
            c.register_message_listener_concurrently(listener)
            async with c:
                deadline = time.monotonic() + 10
                while not a.acked and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
            assert calls == [1, 1] and len(a.acked) == 1
            assert any(r.code == RequestCode.CHANGE_MESSAGE_INVISIBLETIME for r in a.requests)
        for bad, match in (({"batch_nums": 33}, "batch_nums"), ({"retry_backoff_s": []}, "retry_backoff_s")):
            with pytest.raises(MQClientError, match=match):
                AsyncPopPushConsumer("127.0.0.1:1", "g", {"T": "*"}, **bad)

    run(main())
