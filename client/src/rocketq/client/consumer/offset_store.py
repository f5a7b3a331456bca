"""Consumer offset stores: where a group's progress per queue is kept.

* :class:`RemoteBrokerOffsetStore` (clustering): an in-memory table ``MessageQueue -> offset``,
  read from the queue's master (a slave while the master is down) with QUERY_CONSUMER_OFFSET the
  first time and written back with UPDATE_CONSUMER_OFFSET (oneway) by :meth:`persist_all` every
  5 s and on shutdown.  Queues no
  longer assigned are dropped from the table on the next persist, as in RocketMQ.
* :class:`LocalFileOffsetStore` (broadcasting): the same table, persisted to
  ``<offset_store_dir>/<clientId>/<group>/offsets.json`` (written to a temporary file and
  renamed; the previous version is kept as ``offsets.json.bak``).  The client id contains the
  instance name: set ``ClientConfig.instance_name`` for offsets that survive a restart.

``read_offset`` returns -1 when no offset is known, as Java's ``readOffset``.  An offset is the
*next* offset to consume.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from rocketq.client.errors import RocketQError
from rocketq.client.instance import ClientInstance, FindBrokerResult
from rocketq.client.remoting.route import MessageQueue

__all__ = [
    "InstanceOffsetBroker",
    "LocalFileOffsetStore",
    "OffsetStore",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
]

log = logging.getLogger("rocketq.client")


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetBroker(Protocol):
    """The broker side of a remote offset store (a ClientInstance provides it)."""

    async def query_offset(self, group: str, mq: MessageQueue) -> int | None: ...

    async def commit_offset(self, group: str, mq: MessageQueue, offset: int, *, oneway: bool) -> None: ...


class OffsetStore:
    """In-memory offset table shared by both stores; subclasses add the durable side."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.offset_table: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        return None

    def update_offset(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None:
        old = self.offset_table.get(mq)
        if old is None or not increase_only or offset > old:
            self.offset_table[mq] = offset

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        if read_type is not ReadOffsetType.READ_FROM_STORE:
            offset = self.offset_table.get(mq)
            if offset is not None or read_type is ReadOffsetType.READ_FROM_MEMORY:
                return -1 if offset is None else offset
        stored = await self._read_from_store(mq)
        if stored is None:
            return -1
        self.update_offset(mq, stored)
        return stored

    async def _read_from_store(self, mq: MessageQueue) -> int | None:
        return None

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        return None

    async def persist(self, mq: MessageQueue) -> None:
        return None

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)

    def clone_offset_table(self, topic: str) -> dict[MessageQueue, int]:
        return {mq: off for mq, off in self.offset_table.items() if mq.topic == topic}


class RemoteBrokerOffsetStore(OffsetStore):
    """Clustering: offsets live on each queue's master broker."""

    def __init__(self, broker: OffsetBroker, group: str) -> None:
        super().__init__(group)
        self.broker = broker

    async def _read_from_store(self, mq: MessageQueue) -> int | None:
        return await self.broker.query_offset(self.group, mq)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Commit the offsets of ``mqs`` (oneway); forget queues that are no longer assigned."""
        keep = set(mqs)
        if not keep:
            return
        unused = []
        for mq, offset in list(self.offset_table.items()):
            if mq in keep:
                try:
                    await self.broker.commit_offset(self.group, mq, offset, oneway=True)
                except (RocketQError, OSError) as exc:
                    log.warning("persisting the offset %d of %s failed: %s", offset, mq, exc)
            else:
                unused.append(mq)
        for mq in unused:
            del self.offset_table[mq]

    async def persist(self, mq: MessageQueue) -> None:
        offset = self.offset_table.get(mq)
        if offset is not None:
            await self.broker.commit_offset(self.group, mq, offset, oneway=True)

    async def commit_sync(self, mq: MessageQueue, offset: int) -> None:
        """Commit one offset and wait for the broker's answer (lite pull ``commit_sync``)."""
        self.update_offset(mq, offset)
        await self.broker.commit_offset(self.group, mq, offset, oneway=False)


class LocalFileOffsetStore(OffsetStore):
    """Broadcasting: offsets in a JSON file per client id and group."""

    def __init__(self, base_dir: str | os.PathLike[str], client_id: str, group: str) -> None:
        super().__init__(group)
        safe_client = client_id.replace(os.sep, "_")
        self.path = Path(base_dir) / safe_client / group / "offsets.json"

    def _read_file(self, path: Path) -> dict[MessageQueue, int] | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("cannot read the offsets file %s: %s", path, exc)
            return None
        table: dict[MessageQueue, int] = {}
        for item in data.get("offsetTable", []):
            mq = MessageQueue(str(item["topic"]), str(item["brokerName"]), int(item["queueId"]))
            table[mq] = int(item["offset"])
        return table

    async def load(self) -> None:
        table = self._read_file(self.path)
        if table is None:
            table = self._read_file(self.path.with_name("offsets.json.bak"))
        if table:
            self.offset_table.update(table)

    async def _read_from_store(self, mq: MessageQueue) -> int | None:
        table = self._read_file(self.path)
        return None if table is None else table.get(mq)

    def _write(self) -> None:
        items = [
            {"brokerName": mq.broker_name, "offset": off, "queueId": mq.queue_id, "topic": mq.topic}
            for mq, off in sorted(
                self.offset_table.items(), key=lambda kv: (kv[0].topic, kv[0].broker_name, kv[0].queue_id)
            )
        ]
        text = json.dumps({"offsetTable": items}, indent=1, sort_keys=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name("offsets.json.tmp")
        tmp.write_text(text, encoding="utf-8")
        if self.path.exists():
            with contextlib.suppress(OSError):
                os.replace(self.path, self.path.with_name("offsets.json.bak"))
        os.replace(tmp, self.path)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        if not self.offset_table:
            return
        await asyncio.get_running_loop().run_in_executor(None, self._write)

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all([mq])


class InstanceOffsetBroker:
    """:class:`OffsetBroker` over a ClientInstance: the queue's master, found in the route, or a
    slave of its group while the master is absent or does not answer (Java's
    ``findBrokerAddressInAdmin``): commits made meanwhile land on the slave, so a consumer that
    restarts during the outage resumes there; back on the master, the next persist commits the
    in-memory offsets again (nothing is skipped, a re-read is at most the last interval)."""

    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance

    async def query_offset(self, group: str, mq: MessageQueue) -> int | None:
        api = self.instance.api

        async def query(replica: FindBrokerResult) -> int | None:
            return await api.query_consumer_offset(replica.broker_addr, group, mq.topic, mq.queue_id)

        return await self.instance.invoke_on_replica(mq.broker_name, mq.topic, query)

    async def commit_offset(self, group: str, mq: MessageQueue, offset: int, *, oneway: bool) -> None:
        api = self.instance.api

        async def commit(replica: FindBrokerResult) -> None:
            await api.update_consumer_offset(
                replica.broker_addr, group, mq.topic, mq.queue_id, offset, oneway=oneway
            )

        await self.instance.invoke_on_replica(mq.broker_name, mq.topic, commit)
