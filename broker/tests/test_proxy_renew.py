"""The receipt-handle renewal of push consumers (rocketq.proxy.renew) with a fake clock and a fake
broker: when a handle is due, what a renewal leaves behind, retries, the renewMaxTimeMillis limit,
departed clients, an ack racing a renewal, and the bound on concurrent broker calls."""

from __future__ import annotations

import asyncio

import pytest

from rocketq.proxy.config import ProxyConfig, ProxyConfigError
from rocketq.proxy.convert import Refusal
from rocketq.proxy.renew import (
    RENEW_CONCURRENCY,
    HandleRenewer,
    ReceiptHandleTable,
    RenewSettings,
    renew_settings,
)
from rocketq.proxy.v2 import definition_pb2 as pb

SETTINGS = RenewSettings(
    ahead_ms=2_000, slice_ms=10_000, max_time_ms=60_000, schedule_period_ms=500, max_retries=2
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def handle(pop_time: int, invisible: int, offset: int = 5) -> str:
    """A receipt handle as the broker makes it (ckQueueOffset popTime invisibleTime reviveQid
    retryFlag brokerName queueId queueOffset commitLogOffset)."""
    return f"{offset} {pop_time} {invisible} 1 0 broker-a 0 {offset} 777"


def test_a_lease_is_due_renew_ahead_before_its_end_and_again_after_its_renewal() -> None:
    clock = Clock()
    table = ReceiptHandleTable(SETTINGS, clock)
    lease = table.add("c1", "g", "t", "m1", "h1", clock.now + 5_000)
    assert table.next_due_ms() == clock.now + 3_000
    clock.now += 2_999
    assert table.due() == []
    clock.now += 1
    assert table.due() == [lease] and lease.renewing
    assert table.due() == []  # taken once, not again while the renewal runs
    table.renewed(lease, "h2", clock.now + 10_000)
    assert (lease.current, lease.original, lease.renew_times, lease.renewing) == ("h2", "h1", 1, False)
    assert table.next_due_ms() == clock.now + 8_000


def test_a_removed_lease_is_never_due_and_the_client_keeps_its_original_key() -> None:
    clock = Clock()
    table = ReceiptHandleTable(SETTINGS, clock)
    lease = table.add("c1", "g", "t", "m1", "h1", clock.now + 5_000)
    clock.now += 3_000
    [due] = table.due()
    table.renewed(due, "h2", clock.now + 10_000)
    assert table.remove("c1", "g", "m1", "h2") is None  # the client holds h1, not h2
    assert table.remove("c1", "other-group", "m1", "h1") is None
    assert table.remove("c1", "g", "m1", "h1") is lease and len(table) == 0
    clock.now += 60_000
    assert table.due() == [] and table.next_due_ms() is None


def test_renewal_stops_after_renew_max_time() -> None:
    clock = Clock()
    table = ReceiptHandleTable(SETTINGS, clock)
    lease = table.add("c1", "g", "t", "m1", "h1", clock.now + 5_000)
    renewals = 0
    for _ in range(100):  # bounded: ~6 renewals fit into 60 s of 10 s slices
        clock.now += 1_000
        for due in table.due():
            renewals += 1
            table.renewed(due, f"h{renewals + 1}", clock.now + 10_000)
        if len(table) == 0:
            break
    assert len(table) == 0 and lease.removed
    assert clock.now - lease.received_ms >= SETTINGS.max_time_ms
    assert renewals == 8


def test_failed_renewals_are_retried_max_retries_times_and_final_refusals_drop_at_once() -> None:
    clock = Clock()
    table = ReceiptHandleTable(SETTINGS, clock)
    table.add("c1", "g", "t", "m1", "h1", clock.now + 5_000)
    clock.now += 3_000
    [lease] = table.due()
    assert table.failed(lease, retry=True)
    assert table.next_due_ms() == clock.now + SETTINGS.schedule_period_ms
    clock.now += 500
    [lease] = table.due()
    assert table.failed(lease, retry=True)
    clock.now += 500
    [lease] = table.due()
    assert not table.failed(lease, retry=True) and len(table) == 0  # the third failure: given up

    other = table.add("c1", "g", "t", "m2", "h9", clock.now + 2_000)
    [due] = table.due()
    assert due is other and not table.failed(other, retry=False) and len(table) == 0


def test_drop_client_forgets_only_that_clients_leases() -> None:
    clock = Clock()
    table = ReceiptHandleTable(SETTINGS, clock)
    a = table.add("c1", "g", "t", "m1", "h1", clock.now + 5_000)
    b = table.add("c1", "g2", "t", "m2", "h2", clock.now + 5_000)
    c = table.add("c2", "g", "t", "m3", "h3", clock.now + 5_000)
    assert set(map(id, table.drop_client("c1"))) == {id(a), id(b)}
    assert a.orphaned and b.orphaned and not c.orphaned
    assert table.drop_client("c1") == [] and len(table) == 1
    clock.now += 3_000
    assert table.due() == [c]


class FakeBroker:
    """CHANGE_MESSAGE_INVISIBLETIME: each call answers a new handle; ``gate`` holds calls back."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.calls: list[tuple[str, int]] = []
        self.gate: asyncio.Event | None = None
        self.running = 0
        self.most_running = 0
        self.refuse: Refusal | None = None

    async def change(
        self, group: str, topic: str, current: str, invisible_ms: int
    ) -> tuple[str, int] | Refusal:
        self.calls.append((current, invisible_ms))
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if self.gate is not None:
                await self.gate.wait()
            await asyncio.sleep(0)
        finally:
            self.running -= 1
        if self.refuse is not None:
            return self.refuse
        return handle(
            self.clock.now, invisible_ms, offset=len(self.calls) + 100
        ), self.clock.now + invisible_ms


def test_renewer_renews_and_an_ack_gets_the_current_handle() -> None:
    async def scenario() -> None:
        clock = Clock()
        broker = FakeBroker(clock)
        renewer = HandleRenewer(SETTINGS, broker.change, clock)
        original = handle(clock.now, 4_000)
        renewer.add("c1", "g", "t", "m1", original)
        await renewer.scan()
        assert broker.calls == []
        clock.now += 2_000
        await renewer.scan()
        assert broker.calls == [(original, SETTINGS.slice_ms)]
        renewed = handle(clock.now, SETTINGS.slice_ms, offset=101)
        assert await renewer.take("c1", "g", "m1", original) == renewed
        assert await renewer.take("c1", "g", "m1", original) == original  # no longer renewed
        clock.now += 60_000
        await renewer.scan()
        assert len(broker.calls) == 1

    asyncio.run(scenario())


def test_an_ack_during_a_renewal_waits_for_its_new_handle() -> None:
    async def scenario() -> None:
        clock = Clock()
        broker = FakeBroker(clock)
        broker.gate = asyncio.Event()
        renewer = HandleRenewer(SETTINGS, broker.change, clock)
        original = handle(clock.now, 4_000)
        renewer.add("c1", "g", "t", "m1", original)
        clock.now += 2_000
        scan = asyncio.create_task(renewer.scan())
        await asyncio.sleep(0.01)
        assert broker.running == 1
        take = asyncio.create_task(renewer.take("c1", "g", "m1", original))
        await asyncio.sleep(0.01)
        assert not take.done()  # the old handle is being replaced: the ack must not use it
        broker.gate.set()
        assert await take == handle(clock.now, SETTINGS.slice_ms, offset=101)
        await scan
        clock.now += 60_000
        await renewer.scan()
        assert len(broker.calls) == 1  # removed during the renewal: not renewed again

    asyncio.run(scenario())


def test_a_departed_client_s_messages_are_released_and_broker_calls_are_bounded() -> None:
    async def scenario() -> None:
        clock = Clock()
        broker = FakeBroker(clock)
        broker.gate = asyncio.Event()
        renewer = HandleRenewer(SETTINGS, broker.change, clock)
        for i in range(20):
            renewer.add("c1", "g", "t", f"m{i}", handle(clock.now, 4_000, offset=i))
        renewer.add("c2", "g", "t", "other", handle(clock.now, 30_000, offset=50))
        clock.now += 2_000
        scan = asyncio.create_task(renewer.scan())
        await asyncio.sleep(0.01)
        assert broker.running == RENEW_CONCURRENCY
        broker.gate.set()
        await scan
        assert broker.most_running == RENEW_CONCURRENCY and len(broker.calls) == 20

        renewer.stream_opened("c1")
        renewer.stream_opened("c1")
        renewer.stream_closed("c1")  # one stream of two: the client is still there
        await renewer.scan()
        assert len(broker.calls) == 20
        renewer.stream_closed("c1")
        await renewer.scan()
        released = broker.calls[20:]
        assert len(released) == 20 and {ms for _, ms in released} == {SETTINGS.invisible_when_clear_ms}
        assert len(renewer.table) == 1  # c2's lease stays

    asyncio.run(scenario())


def test_a_refused_renewal_is_retried_then_dropped() -> None:
    async def scenario() -> None:
        clock = Clock()
        broker = FakeBroker(clock)
        broker.refuse = Refusal(pb.Code.PROXY_TIMEOUT, "broker timed out")
        renewer = HandleRenewer(SETTINGS, broker.change, clock)
        renewer.add("c1", "g", "t", "m1", handle(clock.now, 4_000))
        for _ in range(10):
            clock.now += 2_000
            await renewer.scan()
        assert len(broker.calls) == 1 + SETTINGS.max_retries and len(renewer.table) == 0

        broker.calls.clear()
        broker.refuse = Refusal(pb.Code.INVALID_RECEIPT_HANDLE, "expired")
        renewer.add("c1", "g", "t", "m2", handle(clock.now, 4_000))
        for _ in range(5):
            clock.now += 2_000
            await renewer.scan()
        assert len(broker.calls) == 1 and len(renewer.table) == 0

    asyncio.run(scenario())


def test_the_renewal_keys_are_read_and_checked() -> None:
    config = ProxyConfig(namesrv_addr="127.0.0.1:9876")
    assert renew_settings(config) == RenewSettings()  # RocketMQ's defaults
    assert config.enable_proxy_auto_renew and config.default_invisible_time_mills == 60_000
    with pytest.raises(ProxyConfigError, match="renewSliceTimeMillis must exceed renewAheadTimeMillis"):
        ProxyConfig(namesrv_addr="x:1", renew_slice_time_millis=5_000, renew_ahead_time_millis=5_000)
    with pytest.raises(ProxyConfigError, match="renewSchedulePeriodMillis must be positive"):
        ProxyConfig(namesrv_addr="x:1", renew_schedule_period_millis=0)
