"""Controller mode's ReplicasManager without a controller: a slave's read limit follows the
master's confirm frames, and an unexpected error in a role switch is logged, not fatal."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.broker.config_loader import load_broker_config
from rocketq.broker.controller_mode.controller_requests import ReplicaInfo
from rocketq.broker.controller_mode.replicas_manager import ReplicasManager
from rocketq.broker.ha.replication import Replication
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.testing import put_test_message, small_store
from rocketq.client.transport.aio import RemotingClient


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = small_store(tmp_path)
    s.start()
    yield s
    s.shutdown()


def _manager(store: MessageStore, tmp_path: Path) -> ReplicasManager:
    config = load_broker_config(
        None,
        overrides={
            "enableControllerMode": "true",
            "controllerAddr": "127.0.0.1:1",
            "storePathRootDir": str(tmp_path),
        },
    )

    async def role_changed(_: object) -> None:
        return None

    return ReplicasManager(
        config,
        store,
        Replication(config, store),
        RemotingClient(),
        broker_addr=lambda: "127.0.0.1:10911",
        on_role_changed=role_changed,
    )


def _put(store: MessageStore, n: int) -> list[int]:
    """Put ``n`` messages; the CommitLog offset each record ends at."""
    return [put_test_message(store, body=f"m{i}".encode()) for i in range(n)]


def test_a_slave_reads_up_to_the_confirm_offset_its_master_sent(store: MessageStore, tmp_path: Path) -> None:
    ends = _put(store, 5)
    rm = _manager(store, tmp_path)
    woken: list[int] = []
    rm.confirm_listeners.append(lambda: woken.append(1))
    assert not rm.is_master
    assert store.read_limit is not None
    assert store.read_limit() == 0  # nothing confirmed yet, no epoch: nothing readable
    rm._on_master_confirm(ends[1])
    assert store.read_limit() == ends[1] and woken == [1]
    rm._on_master_confirm(ends[0])  # never backwards
    assert store.read_limit() == ends[1] and woken == [1]
    rm._on_master_confirm(ends[-1])  # all of it confirmed
    assert store.read_limit() is None and woken == [1, 1]
    _put(store, 1)  # replicated beyond the last confirm frame: not readable yet
    assert store.read_limit() == ends[-1]
    rm._stepdown_limit = ends[2]  # a deposed master that has not truncated yet: its own limit wins
    assert store.read_limit() == ends[2]


def test_an_unexpected_error_in_a_role_switch_is_logged_and_retried(
    store: MessageStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rm = _manager(store, tmp_path)
    calls: list[ReplicaInfo] = []

    async def broken(info: ReplicaInfo) -> None:
        calls.append(info)
        raise RuntimeError("a bug")

    rm._become_slave = broken  # type: ignore[method-assign]
    info = ReplicaInfo(
        master_broker_id=2,
        master_address="127.0.0.1:2",
        master_epoch=3,
        sync_state_set=frozenset({2}),
        sync_state_set_epoch=1,
    )
    with caplog.at_level(logging.ERROR):
        asyncio.run(rm.apply(info))
        asyncio.run(rm.apply(info))  # the next replica info tries again
    assert len(calls) == 2
    assert "unexpected error switching to follow master 127.0.0.1:2 (epoch 3)" in caplog.text
    assert "RuntimeError: a bug" in caplog.text


def test_a_deposed_master_sends_no_confirm_offset(store: MessageStore, tmp_path: Path) -> None:
    ends = _put(store, 3)
    rm = _manager(store, tmp_path)
    rm.is_master = True
    assert rm._ha_confirm() == rm.confirm_offset == ends[-1]  # alone in its SyncStateSet: all of it
    rm.is_master = False  # stepping down: its writers may still run once
    assert rm._ha_confirm() == -1
    assert rm.confirm_offset == ends[-1]  # what the controller heartbeat reports off master
