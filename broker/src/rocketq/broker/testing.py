"""In-process broker harness for tests: start a ``BrokerController`` on a free port with a small
store in a temp dir, run an async scenario against it with a ``RemotingClient``, shut it down.

Real-process tests use the launcher (:mod:`rocketq.client.launcher`, re-exported by
:mod:`rocketq.client.testing`: ``spawn_broker``); this harness is for processor-level tests that
want the broker's objects at hand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rocketq.broker.config_loader import load_broker_config
from rocketq.broker.server import BrokerController
from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.client.transport.aio import RemotingClient

__all__ = ["SMALL_STORE_CONF", "Scenario", "put_test_message", "run_broker", "small_store"]

Scenario = Callable[[BrokerController, RemotingClient, str], Awaitable[None]]

#: broker.conf overrides that keep a test store small and fast
SMALL_STORE_CONF = {
    "brokerName": "broker-t",
    "listenPort": "0",
    "mappedFileSizeCommitLog": str(8 << 20),
    "maxMessageSize": str(64 * 1024),
    "mappedFileSizeConsumeQueue": str(20 * 1000),
    "maxHashSlotNum": "1000",
    "maxIndexNum": "4000",
}


def small_store(root: Path, *, start: bool = False, **settings: Any) -> MessageStore:
    """A MessageStore under ``root`` with small files: 64 KiB CommitLog files, 1000-unit
    ConsumeQueue files, 8 KiB messages, a 100-slot/400-entry IndexFile; ``settings`` (StoreConfig
    fields) change any of these or set others.  ``start=True`` starts it too."""
    defaults: dict[str, Any] = {
        "mapped_file_size_commit_log_bytes": 64 * 1024,
        "max_message_size_bytes": 8 * 1024,
        "mapped_file_size_consume_queue_units": 1000,
        "max_hash_slot_num": 100,
        "max_index_num": 400,
    }
    store = MessageStore(StoreConfig(store_path_root_dir=str(root), **{**defaults, **settings}))
    if start:
        store.start()
    return store


def put_test_message(store: MessageStore, topic: str = "T", body: bytes = b"x" * 100) -> int:
    """Put one message on queue 0 of ``topic``; returns the store's new max offset."""
    msg = MessageToStore(
        topic=topic,
        queue_id=0,
        body=body,
        properties={},
        born_timestamp=1,
        born_host=("127.0.0.1", 1),
        store_host=("127.0.0.1", 2),
    )
    assert store.put_message(msg).status.is_ok
    return store.max_phy_offset


def run_broker(tmp_path: Path, scenario: Scenario, **conf: str) -> None:
    """Run ``scenario(controller, client, "127.0.0.1:port")`` against a broker storing under tmp_path."""
    props = {**SMALL_STORE_CONF, "storePathRootDir": str(tmp_path / "store"), **conf}

    async def main() -> None:
        controller = BrokerController(load_broker_config(None, overrides=props))
        _, port = await controller.start()
        client = RemotingClient()
        try:
            await scenario(controller, client, f"127.0.0.1:{port}")
        finally:
            await client.close()
            await controller.shutdown(grace_s=1)

    asyncio.run(main())
