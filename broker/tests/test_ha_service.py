"""HAService and HAClient in one event loop, over real sockets and real stores in temp dirs:
catch-up to identical segments, SYNC_MASTER waits, the divergent-report rule and garbage."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from rocketq.broker.ha.master import HAService
from rocketq.broker.ha.protocol import TRANSFER_HEADER, encode_report
from rocketq.broker.ha.slave import HAClient, SlaveStatus
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import PutMessageStatus
from rocketq.broker.testing import small_store
from rocketq.client.testing import async_wait_for


def _fill(store: MessageStore, n: int, first: int = 0) -> int:
    """Append ``n`` messages; returns the CommitLog end after them."""
    for i in range(first, first + n):
        msg = MessageToStore(
            topic="T",
            queue_id=0,
            body=bytes([i % 256]) * 300,
            properties={"KEYS": f"k{i}"},
            born_timestamp=1,
            born_host=("127.0.0.1", 1),
            store_host=("127.0.0.1", 2),
        )
        assert store.put_message(msg).status.is_ok
    return store.max_phy_offset


def _master(store: MessageStore) -> HAService:
    return HAService(
        store,
        host="127.0.0.1",
        port=0,
        batch_size=4096,
        heartbeat_interval_s=0.2,
        housekeeping_interval_s=2.0,
        max_gap_not_in_sync=1 << 20,
    )


def _client(store: MessageStore, port: int, *, truncate: bool = True) -> HAClient:
    return HAClient(
        store,
        master_address=f"127.0.0.1:{port}",
        batch_size=4096,
        heartbeat_interval_s=0.2,
        housekeeping_interval_s=2.0,
        truncate_divergent=truncate,
    )


def _run(tmp: Path, body: Callable[[MessageStore, MessageStore, HAService], Awaitable[None]]) -> None:
    async def main() -> None:
        with small_store(tmp / "m") as master_store, small_store(tmp / "s") as slave_store:
            service = _master(master_store)
            await service.start()
            try:
                await body(master_store, slave_store, service)
            finally:
                await service.stop()

    asyncio.run(main())


def _segments(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "commitlog").iterdir())}


def test_slave_catches_up_and_sync_master_waits(tmp_path: Path) -> None:
    async def body(master: MessageStore, slave: MessageStore, service: HAService) -> None:
        assert await service.wait_replicated(1, 0.5) is PutMessageStatus.SLAVE_NOT_AVAILABLE
        end = _fill(master, 500)  # a few segments before the slave connects
        client = _client(slave, service.port)
        client.start()
        try:
            await async_wait_for(lambda: slave.max_phy_offset == end, "the slave at the end offset")
            assert client.status is SlaveStatus.REPLICATING
            end = _fill(master, 10, 500)
            assert await service.wait_replicated(end, 10.0) is PutMessageStatus.PUT_OK
            assert service.push_to_slave_max_offset >= end
            _, in_sync, connections = service.runtime_info()
            assert in_sync == 1 and len(connections) == 1 and connections[0].in_sync
        finally:
            await client.stop()
        await async_wait_for(lambda: not service.connections, "the master to drop the connection")
        assert await service.wait_replicated(end + 1, 0.5) is PutMessageStatus.SLAVE_NOT_AVAILABLE
        assert slave.wait_dispatched()
        assert slave.get_max_offset_in_queue("T", 0) == 510

    _run(tmp_path, body)
    assert _segments(tmp_path / "s") == _segments(tmp_path / "m")


def test_a_report_beyond_the_master_acknowledges_nothing(tmp_path: Path) -> None:
    async def body(master: MessageStore, slave: MessageStore, service: HAService) -> None:
        end = _fill(master, 20)
        reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
        writer.write(encode_report(end + 1000))
        header = await asyncio.wait_for(reader.readexactly(TRANSFER_HEADER.size), 5.0)
        assert TRANSFER_HEADER.unpack(header) == (end, 0)  # the master's heartbeat: it continues at its max
        await async_wait_for(lambda: bool(service.connections), "a slave connection")
        assert service.push_to_slave_max_offset == 0
        assert all(c.acked < 0 for c in service.connections)
        assert await service.wait_replicated(end, 0.3) is PutMessageStatus.SLAVE_NOT_AVAILABLE
        writer.close()

    _run(tmp_path, body)


def test_garbage_closes_the_connection(tmp_path: Path) -> None:
    async def body(master: MessageStore, slave: MessageStore, service: HAService) -> None:
        _fill(master, 5)
        for garbage in (b"\xff" * 8, encode_report(10) + encode_report(9)):
            reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
            writer.write(garbage)
            rest = b""
            while True:  # whatever the master sent before it saw the garbage, then EOF
                chunk = await asyncio.wait_for(reader.read(65536), 5.0)
                if not chunk:
                    break
                rest += chunk
            writer.close()
        await async_wait_for(lambda: not service.connections, "the master to drop the connection")

    _run(tmp_path, body)


def test_divergent_slave_truncates_or_refuses(tmp_path: Path) -> None:
    for truncate in (True, False):
        root = tmp_path / str(truncate)

        async def body(
            master: MessageStore, slave: MessageStore, service: HAService, *, truncate: bool = truncate
        ) -> None:
            end = _fill(master, 50)
            _fill(slave, 80)  # another history, longer than the master's
            client = _client(slave, service.port, truncate=truncate)
            client.start()
            try:
                if truncate:
                    await async_wait_for(
                        lambda: slave.max_phy_offset == end and client.status is SlaveStatus.REPLICATING,
                        "the slave replicating up to the end offset",
                    )
                    assert slave.wait_dispatched()
                    assert slave.get_max_offset_in_queue("T", 0) == 50
                else:
                    await async_wait_for(
                        lambda: client.status is SlaveStatus.DIVERGENT_REFUSED,
                        "the slave to refuse the divergent master",
                    )
                    assert not client.readable
                    assert slave.max_phy_offset > end
            finally:
                await client.stop()

        _run(root, body)


def test_stopping_a_master_with_a_connected_slave_logs_no_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """stop() ends the slaves' connections by cancelling their handlers; that is no error (Python
    3.11's start_server logs a handler that ends cancelled as "Exception in callback")."""

    async def body(master: MessageStore, slave: MessageStore, service: HAService) -> None:
        end = _fill(master, 5)
        client = _client(slave, service.port)
        client.start()
        try:
            await async_wait_for(
                lambda: slave.max_phy_offset == end and bool(service.connections),
                "the slave connected and at the end offset",
            )
            await service.stop()  # with the slave still connected
            await asyncio.sleep(0.1)  # the handler's done callback runs
        finally:
            await client.stop()

    with caplog.at_level(logging.ERROR):
        _run(tmp_path, body)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_sync_master_times_out_sends_a_stalled_slave_does_not_acknowledge(tmp_path: Path) -> None:
    """A slave in sync that stops reporting: each waiting send answers FLUSH_SLAVE_TIMEOUT after
    its own timeout (one timer serves them all), a send the slave acknowledges meanwhile PUT_OK."""

    async def body(master: MessageStore, slave: MessageStore, service: HAService) -> None:
        end = _fill(master, 20)
        _reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
        writer.write(encode_report(end))  # in sync at ``end``, then silent
        await async_wait_for(
            lambda: service.push_to_slave_max_offset == end, "the master to have pushed up to the end offset"
        )
        later = _fill(master, 5, 20)
        loop = asyncio.get_running_loop()
        t0 = loop.time()

        async def timed(timeout_s: float) -> tuple[PutMessageStatus, float]:
            status = await service.wait_replicated(later, timeout_s)
            return status, loop.time() - t0

        waits = [asyncio.create_task(timed(t)) for t in (0.2, 0.4, 0.6)]
        acked = asyncio.create_task(service.wait_replicated(end, 0.2))  # already acknowledged
        (s1, t1), (s2, t2), (s3, t3) = await asyncio.gather(*waits)
        assert await acked is PutMessageStatus.PUT_OK
        assert s1 is s2 is s3 is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        assert 0.2 <= t1 < t2 < t3 and t3 >= 0.6  # each after its own timeout, never before
        # the slave reports again: a new send is acknowledged, nothing is left waiting
        waiting = asyncio.create_task(service.wait_replicated(later, 1.0))
        await asyncio.sleep(0.05)
        writer.write(encode_report(later))
        assert await waiting is PutMessageStatus.PUT_OK
        assert not service._waiters
        await async_wait_for(
            lambda: not service._deadlines, "no pending confirm deadline", 5.0
        )  # (the last deadline passed)
        writer.close()

    _run(tmp_path, body)
