"""Controller mode's confirm frames over real sockets: the master's HA writers send its confirm
offset whenever it advanced, the slave's HA client hands each higher one to ``on_confirm`` while
it replicates as usual."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketq.broker.controller_mode.handshake import HANDSHAKE_SIZE, decode_handshake, encode_handshake
from rocketq.broker.ha.master import HAService
from rocketq.broker.ha.slave import HAClient
from rocketq.broker.store.message_store import MessageStore, MessageToStore
from rocketq.broker.testing import small_store


def _put(store: MessageStore) -> int:
    msg = MessageToStore(
        topic="T",
        queue_id=0,
        body=b"x" * 100,
        properties={},
        born_timestamp=1,
        born_host=("127.0.0.1", 1),
        store_host=("127.0.0.1", 2),
    )
    assert store.put_message(msg).status.is_ok
    return store.max_phy_offset


async def _until(check: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def test_the_slave_learns_each_higher_confirm_offset(tmp_path: Path) -> None:
    async def main() -> None:
        with small_store(tmp_path / "m") as m, small_store(tmp_path / "s") as s:
            first = _put(m)
            second = _put(m)
            confirm = [first]
            service = HAService(
                m,
                host="127.0.0.1",
                port=0,
                batch_size=4096,
                heartbeat_interval_s=0.2,
                housekeeping_interval_s=5.0,
                max_gap_not_in_sync=1 << 20,
            )

            async def handshake(reader: asyncio.StreamReader) -> int:
                return decode_handshake(await reader.readexactly(HANDSHAKE_SIZE)).broker_id

            service.handshake = handshake
            service.confirm_offset = lambda: confirm[0]
            port = await service.start()
            got: list[int] = []
            client = HAClient(
                s,
                master_address=f"127.0.0.1:{port}",
                batch_size=4096,
                heartbeat_interval_s=0.2,
                housekeeping_interval_s=5.0,
                truncate_divergent=True,
            )
            client.handshake = encode_handshake(2, 1)
            client.on_confirm = got.append
            client.start()
            try:
                await _until(lambda: s.max_phy_offset == second and got == [first], "replication + confirm")
                confirm[0] = second  # the SyncStateSet acknowledged the rest
                service.wakeup()
                await _until(lambda: got == [first, second], "the higher confirm offset")
                third = _put(m)
                service.wakeup()
                await _until(lambda: s.max_phy_offset == third, "the next append")
                assert got == [first, second]  # unchanged confirm offsets are not sent again
                view = m.commit_log.segment_tail(0)
                assert view is not None
                tail = s.commit_log.segment_tail(0)
                assert tail is not None and bytes(tail[2][:third]) == bytes(view[2][:third])
            finally:
                await client.stop()
                await service.stop()

    asyncio.run(main())


def test_an_unexpected_error_ends_the_session_not_replication(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug in the session (here: the confirm listener raises once) is logged with its traceback;
    the client reconnects and goes on replicating from where its log ends."""

    async def main() -> None:
        with small_store(tmp_path / "m") as m, small_store(tmp_path / "s") as s:
            first = _put(m)
            service = HAService(
                m,
                host="127.0.0.1",
                port=0,
                batch_size=4096,
                heartbeat_interval_s=0.2,
                housekeeping_interval_s=5.0,
                max_gap_not_in_sync=1 << 20,
            )

            async def handshake(reader: asyncio.StreamReader) -> int:
                return decode_handshake(await reader.readexactly(HANDSHAKE_SIZE)).broker_id

            service.handshake = handshake
            service.confirm_offset = lambda: m.max_phy_offset
            port = await service.start()
            got: list[int] = []

            def listener(offset: int) -> None:
                got.append(offset)
                if len(got) == 1:
                    raise RuntimeError("a bug in a confirm listener")

            client = HAClient(
                s,
                master_address=f"127.0.0.1:{port}",
                batch_size=4096,
                heartbeat_interval_s=0.2,
                housekeeping_interval_s=5.0,
                truncate_divergent=True,
            )
            client.handshake = encode_handshake(2, 1)
            client.on_confirm = listener
            client.start()
            try:
                await _until(lambda: len(got) == 1, "the failing listener")
                second = _put(m)
                service.wakeup()
                await _until(
                    lambda: s.max_phy_offset == second and got == [first, second], "replication to go on"
                )
            finally:
                await client.stop()
                await service.stop()

    with caplog.at_level(logging.ERROR):
        asyncio.run(main())
    assert "replication from master" in caplog.text and "a bug in a confirm listener" in caplog.text


def test_a_bug_in_a_masters_writer_is_logged_and_the_slave_reconnects(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        with small_store(tmp_path / "m") as m, small_store(tmp_path / "s") as s:
            first = _put(m)
            service = HAService(
                m,
                host="127.0.0.1",
                port=0,
                batch_size=4096,
                heartbeat_interval_s=0.2,
                housekeeping_interval_s=5.0,
                max_gap_not_in_sync=1 << 20,
            )

            async def handshake(reader: asyncio.StreamReader) -> int:
                return decode_handshake(await reader.readexactly(HANDSHAKE_SIZE)).broker_id

            calls: list[int] = []

            def confirm() -> int:
                calls.append(1)
                if len(calls) == 1:
                    raise RuntimeError("a bug in the confirm offset")
                return m.max_phy_offset

            service.handshake = handshake
            service.confirm_offset = confirm
            port = await service.start()
            got: list[int] = []
            client = HAClient(
                s,
                master_address=f"127.0.0.1:{port}",
                batch_size=4096,
                heartbeat_interval_s=0.2,
                housekeeping_interval_s=5.0,
                truncate_divergent=True,
            )
            client.handshake = encode_handshake(2, 1)
            client.on_confirm = got.append
            client.start()
            try:
                await _until(lambda: s.max_phy_offset == first and got == [first], "the next session")
            finally:
                await client.stop()
                await service.stop()

    with caplog.at_level(logging.ERROR):
        asyncio.run(main())
    assert "failed unexpectedly" in caplog.text and "a bug in the confirm offset" in caplog.text
