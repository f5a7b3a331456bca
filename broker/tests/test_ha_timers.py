"""The HA connections' timers, over real sockets: heartbeat reports and ``haHousekeepingInterval``
on both sides (they run beside the reads, not as a timeout per read), and a master writer woken
by an append rather than by its poll."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rocketq.broker.ha import master
from rocketq.broker.ha.master import HAService
from rocketq.broker.ha.protocol import OFFSET_REPORT, TRANSFER_HEADER, encode_report
from rocketq.broker.ha.slave import HAClient
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.testing import put_test_message, small_store
from rocketq.client.testing import async_wait_for

HEARTBEAT_S = 0.1
HOUSEKEEPING_S = 0.5


def _slave(store: MessageStore, master_address: str) -> HAClient:
    return HAClient(
        store,
        master_address=master_address,
        batch_size=4096,
        heartbeat_interval_s=HEARTBEAT_S,
        housekeeping_interval_s=HOUSEKEEPING_S,
        truncate_divergent=True,
    )


def test_slave_reports_while_idle_and_leaves_a_silent_master(tmp_path: Path) -> None:
    """A master that accepts and then sends nothing: the slave reports every heartbeat interval and
    closes the connection after the housekeeping interval (then reconnects)."""

    async def main() -> None:
        connections: list[tuple[float, list[float], float]] = []  # (accepted, report times, closed)

        async def silent_master(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted, reports = time.monotonic(), []
            while data := await reader.read(64):
                reports += [time.monotonic()] * (len(data) // OFFSET_REPORT.size)
            connections.append((accepted, reports, time.monotonic()))
            writer.close()

        server = await asyncio.start_server(silent_master, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        with small_store(tmp_path / "s") as store:
            client = _slave(store, f"127.0.0.1:{port}")
            client.start()
            try:
                await async_wait_for(
                    lambda: bool(connections), "the slave to close its connection", 20, interval_s=0.05
                )
            finally:
                await client.stop()
        server.close()
        assert connections, "the slave never closed its connection to a master that sent nothing"
        accepted, reports, closed = connections[0]
        assert closed - accepted >= HOUSEKEEPING_S, (
            f"the slave left after {closed - accepted:.2f} s, before haHousekeepingInterval"
        )
        # the first report at connect, then one per heartbeat interval while nothing arrives
        assert len(reports) >= 3, f"only {len(reports)} reports in {closed - accepted:.2f} s of silence"

    asyncio.run(main())


def test_master_drops_a_silent_slave_and_wakes_on_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slave that reports once: an append reaches it as a transfer without waiting for a poll
    (the poll interval is set far away), and after the housekeeping interval of silence the master
    closes the connection."""

    monkeypatch.setattr(master, "POLL_INTERVAL_S", 30.0)

    async def main() -> None:
        with small_store(tmp_path / "m") as store:
            service = HAService(
                store,
                host="127.0.0.1",
                port=0,
                batch_size=4096,
                heartbeat_interval_s=60.0,
                housekeeping_interval_s=HOUSEKEEPING_S,
                max_gap_not_in_sync=1 << 20,
            )
            port = await service.start()
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(encode_report(0))
                # the master answers the first report with a heartbeat (size 0)
                header = await asyncio.wait_for(reader.readexactly(TRANSFER_HEADER.size), 5)
                assert TRANSFER_HEADER.unpack(header) == (0, 0)
                end = put_test_message(store)
                service.wakeup()
                try:
                    header = await asyncio.wait_for(reader.readexactly(TRANSFER_HEADER.size), 5)
                except (asyncio.IncompleteReadError, TimeoutError):
                    pytest.fail("wakeup() did not push the append to the slave (the poll is 30 s away)")
                assert TRANSFER_HEADER.unpack(header) == (0, end), "wakeup() did not push the append"
                await asyncio.wait_for(reader.readexactly(end), 5)
                started = time.monotonic()
                rest = await asyncio.wait_for(reader.read(), 10)  # EOF once the master gives up
                waited = time.monotonic() - started
                assert rest == b"", f"unexpected bytes from the master: {rest[:16].hex()}"
                assert waited >= HOUSEKEEPING_S * 0.8, f"the master closed after {waited:.2f} s"
                writer.close()
                await async_wait_for(
                    lambda: not service.connections, "the master to drop the silent slave", 5, interval_s=0.02
                )
                assert not service.connections, "the master still counts the silent slave"
            finally:
                await service.stop()

    asyncio.run(main())


def test_stop_ends_the_slave_even_when_a_cancellation_is_dropped(tmp_path: Path) -> None:
    """Python 3.11's ``asyncio.wait_for`` drops a cancellation that arrives just as the future it
    waits for completes (the session's wait for its closed connection, right after the master
    closed it).  A session that swallows the cancellation this way and returns must not leave the
    slave reconnecting forever while ``stop`` waits: it returns, and nothing runs on."""

    async def main() -> None:
        with small_store(tmp_path / "s") as store:
            client = _slave(store, "127.0.0.1:1")
            sessions: list[str] = []
            in_session = asyncio.Event()
            swallow = True

            async def session(addr: str) -> bool:
                sessions.append(addr)
                in_session.set()
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    if not swallow:
                        raise
                return False  # what wait_for does when its future completed meanwhile

            client._connect_and_replicate = session  # type: ignore[method-assign]
            client.start()
            await asyncio.wait_for(in_session.wait(), 10)
            stopper = asyncio.ensure_future(client.stop())
            done, _ = await asyncio.wait({stopper}, timeout=10)
            if not done:  # let the task end for good before failing
                swallow = False
                assert client._task is not None
                client._task.cancel()
                await asyncio.gather(stopper, return_exceptions=True)
            assert done, "stop() did not return within 10 s: the slave task ran on"
            count = len(sessions)
            await asyncio.sleep(0.5)  # the backoff after a session is 0.1 s: a live task would reconnect
            assert len(sessions) == count, f"the slave reconnected after stop: {sessions}"

    asyncio.run(main())
