"""Rebalance: deciding which queues this consumer owns, and starting/stopping work on them.

Theory of operation (RebalanceImpl).  For each subscribed topic the consumer knows the topic's
readable queues (from the route: ``readQueueNums`` of every readable broker).  In clustering
mode it asks a broker for the group's live client ids (GET_CONSUMER_LIST_BY_GROUP), sorts both
lists and runs the allocation strategy; in broadcasting mode it takes every queue.  Then it
reconciles the process-queue table with the result: queues it lost are marked dropped and handed
to the owner's ``remove_queue`` (which persists the offset, unlocks orderly queues), queues it
gained get their start offset (``compute_pull_from_where``: the committed offset, else
``consume_from_where``) and a new ProcessQueue, and the owner starts pulling them.  Orderly
consumers only take a new queue once the broker lock (LOCK_BATCH_MQ) is held, and re-lock all
their queues every ``lock_interval_ms``.  A lock is only worth something on the group's current
master: when the client instance sees a group's master move (an elected master), the orderly
consumer marks that group's queues unlocked (pulling and consuming them pause) and locks them on
the new master at once; a lock that finds no master, or whose broker does not answer, refreshes
the topic's route first (rate-limited), so the lock follows the election within about a second.

The owner (push or lite-pull consumer) implements :class:`RebalanceOwner`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol

from rocketq.client.config import ConsumeFromWhere, ConsumerConfig, MessageModel
from rocketq.client.consumer.allocate import AllocateFn, mq_sort_key
from rocketq.client.consumer.offset_store import OffsetStore, ReadOffsetType
from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.consumer.subscription import SubscriptionData
from rocketq.client.errors import RocketQError
from rocketq.client.instance import ClientInstance, FindBrokerResult
from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.vocabulary import MASTER_ID, RETRY_GROUP_TOPIC_PREFIX, MessageQueue

__all__ = ["RETRY_GROUP_TOPIC_PREFIX", "RebalanceImpl", "RebalanceOwner", "readable_queues"]

log = logging.getLogger("rocketq.client")

_HALF_HOUR_MS = 30 * 60 * 1000


def readable_queues(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """``topicRouteData2TopicSubscribeInfo``: readQueueNums of every readable broker."""
    return set(route.readable_queues(topic))


class RebalanceOwner(Protocol):
    async def start_queue(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None: ...

    async def remove_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Stop work on a queue that is no longer ours; False keeps it (e.g. orderly, busy)."""
        ...

    def queues_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None: ...


class RebalanceImpl:
    """Queue assignment of one consumer group on one client instance."""

    def __init__(
        self,
        config: ConsumerConfig,
        instance: ClientInstance,
        offset_store: OffsetStore,
        allocate: AllocateFn,
        owner: RebalanceOwner,
        *,
        orderly: bool = False,
        now_ms: int | None = None,
    ) -> None:
        self.config = config
        self.group = config.consumer_group
        self.instance = instance
        self.offset_store = offset_store
        self.allocate = allocate
        self.owner = owner
        self.orderly = orderly
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.topic_subscribe_info: dict[str, set[MessageQueue]] = {}
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self._lock = asyncio.Lock()
        self._stopped = False
        self._relock_tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ rebalance

    async def do_rebalance(self) -> None:
        """One rebalance round; rounds never overlap (a broker notification can arrive mid-round)."""
        async with self._lock:
            if self._stopped:
                return
            for topic in list(self.subscriptions):
                try:
                    await self.rebalance_by_topic(topic)
                except RocketQError as exc:
                    log.warning("rebalance of %s for group %s failed: %s", topic, self.group, exc)
            self._truncate_unsubscribed()

    async def stop(self) -> None:
        """No more rounds; waits for the one in progress (which may still take and lock queues)."""
        async with self._lock:
            self._stopped = True

    async def rebalance_by_topic(self, topic: str) -> None:
        mq_set = self.topic_subscribe_info.get(topic)
        if mq_set is None:
            route = await self.instance.update_topic_route(topic)
            mq_set = self.topic_subscribe_info[topic] = readable_queues(topic, route)
        if self.config.message_model is MessageModel.BROADCASTING:
            allocated = set(mq_set)
        else:
            cids = await self.find_consumer_id_list(topic)
            if not cids:
                log.warning("no consumer of group %s found for topic %s", self.group, topic)
                return
            mq_all = sorted(mq_set, key=mq_sort_key)
            allocated = set(self.allocate(self.group, self.instance.client_id, mq_all, sorted(cids)))
        if await self.update_process_queue_table(topic, allocated):
            self.owner.queues_changed(topic, set(mq_set), allocated)

    async def find_consumer_id_list(self, topic: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP against one broker of the topic (any live replica: the
        clients heartbeat to slaves too, so a slave knows the group while its master is down)."""
        route = await self.instance.get_route(topic)
        api = self.instance.api
        for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):

            async def ask(replica: FindBrokerResult) -> list[str]:
                return await api.get_consumer_id_list(replica.broker_addr, self.group)

            try:
                return await self.instance.invoke_on_replica(bd.broker_name, topic, ask)
            except RocketQError as exc:
                log.warning("GET_CONSUMER_LIST_BY_GROUP on %s failed: %s", bd.broker_name, exc)
        return []

    async def update_process_queue_table(self, topic: str, mq_set: set[MessageQueue]) -> bool:
        changed = False
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic != topic:
                continue
            # a dropped queue is one whose removal was refused last round (orderly, busy): retry
            if mq not in mq_set or pq.is_pull_expired() or pq.dropped:
                pq.dropped = True
                if await self.owner.remove_queue(mq, pq):
                    del self.process_queue_table[mq]
                    changed = True
        for mq in sorted(mq_set - set(self.process_queue_table), key=mq_sort_key):
            if self.orderly and not await self.lock(mq):
                continue
            self.offset_store.remove_offset(mq)  # forget a stale in-memory value
            try:
                next_offset = await self.compute_pull_from_where(mq)
            except RocketQError as exc:
                log.warning("cannot find where to start %s: %s", mq, exc)
                continue
            if next_offset < 0:
                continue
            pq = ProcessQueue()
            if self.orderly:
                pq.locked = True
            self.process_queue_table[mq] = pq
            await self.owner.start_queue(mq, pq, next_offset)
            changed = True
        return changed

    def _truncate_unsubscribed(self) -> None:
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic not in self.subscriptions:
                pq.dropped = True
                del self.process_queue_table[mq]

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The committed offset, else the start chosen by ``consume_from_where``."""
        last = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return last
        api = self.instance.api
        where = self.config.consume_from_where
        is_retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET and is_retry:
            return 0
        if where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET or is_retry:

            async def max_offset(replica: FindBrokerResult) -> int:
                return await api.get_max_offset(replica.broker_addr, mq.topic, mq.queue_id)

            return await self.instance.invoke_on_replica(mq.broker_name, mq.topic, max_offset)
        configured = self.config.consume_timestamp_ms
        ts = int(time.time() * 1000) - _HALF_HOUR_MS if configured is None else configured

        async def search(replica: FindBrokerResult) -> int:
            return await api.search_offset(replica.broker_addr, mq.topic, mq.queue_id, ts)

        return await self.instance.invoke_on_replica(mq.broker_name, mq.topic, search)

    # ------------------------------------------------------------------ orderly locks

    async def _master_addr(self, broker_name: str, topic: str) -> str | None:
        """The group's master (LOCK_BATCH_MQ goes there only), after a route refresh if absent."""
        addr = self.instance.find_broker_addr(broker_name, MASTER_ID, only_this=True)
        if addr is None:
            await self.instance.refresh_route_after_failure(topic)
            addr = self.instance.find_broker_addr(broker_name, MASTER_ID, only_this=True)
        return addr

    async def lock(self, mq: MessageQueue) -> bool:
        addr = await self._master_addr(mq.broker_name, mq.topic)
        if addr is None:
            return False
        try:
            locked = await self.instance.api.lock_batch_mq(addr, self.group, [mq])
        except RocketQError as exc:
            log.warning("LOCK_BATCH_MQ of %s failed: %s", mq, exc)
            await self.instance.refresh_route_after_failure(mq.topic)
            return False
        pq = self.process_queue_table.get(mq)
        if pq is not None and mq in locked:
            pq.locked = True
            pq.last_lock_timestamp = _now_ms()
        return mq in locked

    async def lock_all(self) -> None:
        """Re-lock every queue we hold, one LOCK_BATCH_MQ per broker."""
        by_broker: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq in self.process_queue_table:
            by_broker[mq.broker_name].append(mq)
        for broker_name, mqs in by_broker.items():
            addr = await self._master_addr(broker_name, mqs[0].topic)
            if addr is None:
                continue
            try:
                locked = await self.instance.api.lock_batch_mq(addr, self.group, mqs)
            except RocketQError as exc:
                log.warning("LOCK_BATCH_MQ on %s failed: %s", addr, exc)
                await self.instance.refresh_route_after_failure(mqs[0].topic)
                continue
            now = _now_ms()
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is None:
                    continue
                pq.locked = mq in locked
                if pq.locked:
                    pq.last_lock_timestamp = now

    async def unlock(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        by_broker: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq in mqs:
            by_broker[mq.broker_name].append(mq)
        for broker_name, items in by_broker.items():
            addr = self.instance.find_broker_addr(broker_name, 0, only_this=True)
            if addr is None:
                continue
            try:
                await self.instance.api.unlock_batch_mq(addr, self.group, items, oneway=oneway)
            except RocketQError as exc:
                log.warning("UNLOCK_BATCH_MQ on %s failed: %s", addr, exc)

    # ------------------------------------------------------------------ routes

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        if topic in self.subscriptions:
            self.topic_subscribe_info[topic] = readable_queues(topic, route)

    def on_master_changed(self, broker_name: str, master_addr: str | None) -> None:
        """Orderly: the locks held on the old master mean nothing on the new one; lock again."""
        if not self.orderly:
            return
        mqs = [mq for mq in self.process_queue_table if mq.broker_name == broker_name]
        for mq in mqs:
            self.process_queue_table[mq].locked = False
        if mqs and master_addr is not None and not self._stopped:
            task = asyncio.get_running_loop().create_task(self.lock_all())
            self._relock_tasks.add(task)
            task.add_done_callback(self._relock_tasks.discard)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
