"""Controller mode's confirm frames over real sockets: the master's HA writers send its confirm
offset whenever it advanced, the slave's HA client hands each higher one to ``on_confirm`` while
it replicates as usual; a bug on either side ends the session, is logged, and replication goes on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from rocketq.broker.controller_mode.handshake import HANDSHAKE_SIZE, decode_handshake, encode_handshake
from rocketq.broker.ha.master import HAService
from rocketq.broker.ha.slave import HAClient
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.testing import put_test_message, small_store
from rocketq.client.testing import async_wait_for


async def _handshake(reader: asyncio.StreamReader) -> int:
    return decode_handshake(await reader.readexactly(HANDSHAKE_SIZE)).broker_id


@contextlib.asynccontextmanager
async def _group(
    m: MessageStore, s: MessageStore, confirm: Callable[[], int], on_confirm: Callable[[int], None]
) -> AsyncIterator[HAService]:
    """A controller-mode master HA service on ``m`` and a slave HA client on ``s`` following it."""
    service = HAService(
        m,
        host="127.0.0.1",
        port=0,
        batch_size=4096,
        heartbeat_interval_s=0.2,
        housekeeping_interval_s=5.0,
        max_gap_not_in_sync=1 << 20,
    )
    service.handshake = _handshake
    service.confirm_offset = confirm
    port = await service.start()
    client = HAClient(
        s,
        master_address=f"127.0.0.1:{port}",
        batch_size=4096,
        heartbeat_interval_s=0.2,
        housekeeping_interval_s=5.0,
        truncate_divergent=True,
    )
    client.handshake = encode_handshake(2, 1)
    client.on_confirm = on_confirm
    client.start()
    try:
        yield service
    finally:
        await client.stop()
        await service.stop()


def test_the_slave_learns_each_higher_confirm_offset(tmp_path: Path) -> None:
    async def main() -> None:
        with small_store(tmp_path / "m") as m, small_store(tmp_path / "s") as s:
            first, second = put_test_message(m), put_test_message(m)
            confirm = [first]
            got: list[int] = []
            async with _group(m, s, lambda: confirm[0], got.append) as service:
                await async_wait_for(
                    lambda: s.max_phy_offset == second and got == [first],
                    "replication + confirm",
                    20.0,
                    interval_s=0.02,
                )
                confirm[0] = second  # the SyncStateSet acknowledged the rest
                service.wakeup()
                await async_wait_for(
                    lambda: got == [first, second], "the higher confirm offset", 20.0, interval_s=0.02
                )
                third = put_test_message(m)
                service.wakeup()
                await async_wait_for(
                    lambda: s.max_phy_offset == third, "the next append", 20.0, interval_s=0.02
                )
                assert got == [first, second]  # unchanged confirm offsets are not sent again
                mine, theirs = s.commit_log.segment_tail(0), m.commit_log.segment_tail(0)
                assert mine is not None and theirs is not None
                assert bytes(mine[2][:third]) == bytes(theirs[2][:third])

    asyncio.run(main())


def test_an_unexpected_error_on_the_slave_ends_the_session_not_replication(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug in the session (here: the confirm listener raises once) is logged with its traceback;
    the client reconnects and goes on replicating from where its log ends."""

    async def main() -> None:
        with small_store(tmp_path / "m") as m, small_store(tmp_path / "s") as s:
            first = put_test_message(m)
            got: list[int] = []

            def listener(offset: int) -> None:
                got.append(offset)
                if len(got) == 1:
                    raise RuntimeError("a bug in a confirm listener")

            async with _group(m, s, lambda: m.max_phy_offset, listener) as service:
                await async_wait_for(lambda: len(got) == 1, "the failing listener", 20.0, interval_s=0.02)
                second = put_test_message(m)
                service.wakeup()
                await async_wait_for(
                    lambda: s.max_phy_offset == second and got == [first, second],
                    "replication to go on",
                    20.0,
                    interval_s=0.02,
                )

    with caplog.at_level(logging.ERROR):
        asyncio.run(main())
    assert "replication from master" in caplog.text and "a bug in a confirm listener" in caplog.text


def test_a_bug_in_a_masters_writer_is_logged_and_the_slave_reconnects(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        with small_store(tmp_path / "m") as m, small_store(tmp_path / "s") as s:
            first = put_test_message(m)
            calls: list[int] = []

            def confirm() -> int:
                calls.append(1)
                if len(calls) == 1:
                    raise RuntimeError("a bug in the confirm offset")
                return m.max_phy_offset

            got: list[int] = []
            async with _group(m, s, confirm, got.append):
                await async_wait_for(
                    lambda: s.max_phy_offset == first and got == [first],
                    "the next session",
                    20.0,
                    interval_s=0.02,
                )

    with caplog.at_level(logging.ERROR):
        asyncio.run(main())
    assert "failed unexpectedly" in caplog.text and "a bug in the confirm offset" in caplog.text
