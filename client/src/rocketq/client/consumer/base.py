"""What the push and lite-pull consumers share: client instance, offsets, rebalance, one pull.

:class:`ConsumerBase` owns the consumer's :class:`~rocketq.client.instance.ClientInstance` (or
joins one given to it), its offset store (broker-side for clustering, a local file for
broadcasting), its :class:`~rocketq.client.consumer.rebalance.RebalanceImpl`, and implements the
``Member`` interface the instance drives (heartbeat data, route changes, the periodic rebalance and
offset persistence).  :meth:`ConsumerBase.pull_once` is one PULL_MESSAGE against the right
replica: the master unless a previous answer's ``suggestWhichBrokerId`` pointed elsewhere, a
slave of the group while the master is absent from the route or does not answer (then the
pull's commit-offset flag is cleared, as Java does: offsets reach a slave only through
UPDATE_CONSUMER_OFFSET).  A slave answers ``suggestWhichBrokerId=0``, so the consumer goes back
to the master as soon as it is listed and answering again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from rocketq.client.config import ConsumerConfig, MessageModel
from rocketq.client.consumer.allocate import AllocateFn, allocate_strategy
from rocketq.client.consumer.offset_store import (
    InstanceOffsetBroker,
    LocalFileOffsetStore,
    OffsetStore,
    RemoteBrokerOffsetStore,
)
from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.consumer.rebalance import RebalanceImpl, readable_queues
from rocketq.client.consumer.subscription import (
    MessageSelector,
    Subscribable,
    SubscriptionData,
    subscription_refused,
)
from rocketq.client.errors import MQBrokerError, MQClientError, NoRouteError
from rocketq.client.instance import ClientInstance, FindBrokerResult
from rocketq.client.model import PullResult, PullStatus
from rocketq.client.remoting.headers import PullMessageRequestHeader
from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.vocabulary import MASTER_ID, ExpressionType, MessageQueue, PullSysFlag

__all__ = ["ConsumerBase"]

log = logging.getLogger("rocketq.client")
_T = TypeVar("_T")
NO_PROGRESS_DELAY_S = 0.2


class ConsumerBase:
    """Shared machinery; subclasses set ``consume_type`` and implement the rebalance hooks."""

    consume_type = "CONSUME_ACTIVELY"
    orderly = False

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        config: ConsumerConfig | None = None,
        *,
        instance: ClientInstance | None = None,
        allocate: AllocateFn | None = None,
        **settings: Any,
    ) -> None:
        if config is None:
            config = ConsumerConfig(**settings)
        elif settings:
            config = dataclasses.replace(config, **settings)
        self.config = config
        self._namesrv_addr = namesrv_addr
        self._instance = instance
        self._own_instance = instance is None
        self._allocate = allocate or allocate_strategy(config.allocate_strategy)
        self._offset_store: OffsetStore | None = None
        self._rebalance: RebalanceImpl | None = None
        self._suggested_broker: dict[MessageQueue, int] = {}
        self._subscriptions: dict[str, SubscriptionData] = {}
        self.running = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def group(self) -> str:
        return self.config.consumer_group

    @property
    def instance(self) -> ClientInstance:
        """The client instance (created on first use; its background jobs start with ``start()``)."""
        if self._instance is None:
            self._instance = ClientInstance(self._namesrv_addr, config=self.config.client)
        return self._instance

    @property
    def offset_store(self) -> OffsetStore:
        if self._offset_store is None:
            raise MQClientError("the consumer is not started; call start() first")
        return self._offset_store

    @property
    def rebalance(self) -> RebalanceImpl:
        if self._rebalance is None:
            raise MQClientError("the consumer is not started; call start() first")
        return self._rebalance

    async def _start_base(self) -> None:
        inst = self.instance
        if self.config.message_model is MessageModel.BROADCASTING:
            self._offset_store = LocalFileOffsetStore(
                self.config.offset_store_dir, inst.client_id, self.group
            )
        else:
            self._offset_store = RemoteBrokerOffsetStore(InstanceOffsetBroker(inst), self.group)
        await self._offset_store.load()
        self._rebalance = RebalanceImpl(
            self.config, inst, self._offset_store, self._allocate, self, orderly=self.orderly
        )
        self._rebalance.subscriptions = self._subscriptions  # one table, shared
        inst.register(self)
        await inst.start()
        self.running = True

    async def _stop_base(self) -> None:
        self.running = False
        inst = self.instance
        await self.persist_offsets()
        inst.unregister(self)
        await inst.unregister_from_brokers(consumer_group=self.group)
        if self._own_instance:
            await inst.close()

    def _add_subscription(self, topic: str, expression: Subscribable) -> SubscriptionData:
        """Record a subscription; a string that cannot be a tag expression raises MQClientError."""
        sub = MessageSelector.of(expression).subscription(topic)
        self._subscriptions[topic] = sub
        return sub

    def subscriptions(self) -> dict[str, SubscriptionData]:
        return dict(self._subscriptions)

    # ------------------------------------------------------------------ Member

    def topics_in_use(self) -> set[str]:
        return set(self.subscriptions())

    def heartbeat_data(self) -> tuple[str, dict[str, Any]]:
        return "consumer", {
            "consumeFromWhere": self.config.consume_from_where.value,
            "consumeType": self.consume_type,
            "groupName": self.group,
            "messageModel": self.config.message_model.value,
            "subscriptionDataSet": [s.to_obj() for s in self.subscriptions().values()],
            "unitMode": False,
        }

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        if self._rebalance is not None:
            self._rebalance.on_route_changed(topic, route)

    def on_master_changed(self, broker_name: str, master_addr: str | None) -> None:
        if self._rebalance is not None:
            self._rebalance.on_master_changed(broker_name, master_addr)

    async def periodic(self, what: str) -> None:
        if not self.running:
            return
        if what == "rebalance":
            await self.do_rebalance()
        elif what == "persist":
            await self.persist_offsets()

    async def do_rebalance(self) -> None:
        await self.rebalance.do_rebalance()

    async def persist_offsets(self) -> None:
        if self._offset_store is None or self._rebalance is None:
            return
        await self._offset_store.persist_all(list(self.assigned_queues()))

    def assigned_queues(self) -> set[MessageQueue]:
        return set(self.rebalance.process_queue_table)

    # ------------------------------------------------------------------ queues

    async def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        """The readable queues of ``topic`` (refreshing its route)."""
        route = await self.instance.update_topic_route(topic)
        mqs = readable_queues(topic, route)
        if not mqs:
            raise NoRouteError(topic, "the route has no readable queue")
        return mqs

    async def pull_once(
        self,
        mq: MessageQueue,
        sub: SubscriptionData,
        offset: int,
        max_nums: int,
        *,
        block: bool,
        commit_offset: int | None = None,
    ) -> PullResult:
        """One PULL_MESSAGE; ``block`` long-polls for ``broker_suspend_max_time_ms``."""
        c = self.config
        timeout = c.consumer_timeout_when_suspend_ms if block else c.consumer_pull_timeout_ms
        commit = commit_offset if commit_offset is not None and commit_offset >= 0 else None

        async def pull(replica: FindBrokerResult) -> PullResult:
            flag = PullSysFlag.SUBSCRIPTION
            if block:
                flag |= PullSysFlag.SUSPEND
            if commit is not None and not replica.slave:  # slaves never take the pull's commit
                flag |= PullSysFlag.COMMIT_OFFSET
            if self.consume_type == "CONSUME_ACTIVELY":
                flag |= PullSysFlag.LITE_PULL
            header = PullMessageRequestHeader(
                consumer_group=self.group,
                topic=mq.topic,
                queue_id=mq.queue_id,
                queue_offset=offset,
                max_msg_nums=max_nums,
                sys_flag=int(flag),
                commit_offset=commit if commit is not None else 0,
                suspend_timeout_millis=c.broker_suspend_max_time_ms if block else 0,
                subscription=sub.sub_string,
                sub_version=sub.sub_version,
                expression_type=sub.expression_type,
            )
            inst = self.instance
            request = inst.api.pull_message(
                replica.broker_addr, header, timeout, tags_filter=sub.tags_filter()
            )
            if replica.slave:
                return await request
            # a master that hangs holds the pull until its timeout, unless the route shows its
            # successor meanwhile (the connection is then closed and the pull goes there)
            return await inst.watch_route_while(
                mq.topic, request, answer_within_ms=header.suspend_timeout_millis
            )

        broker_id = self._suggested_broker.get(mq, MASTER_ID)
        try:
            result = await self.instance.invoke_on_replica(mq.broker_name, mq.topic, pull, broker_id)
        except MQBrokerError as exc:
            raise (subscription_refused(exc, sub) or exc) from None
        # PullAPIWrapper's pullFromWhichNodeTable: the next pull of mq goes where the broker says
        self._suggested_broker[mq] = result.suggest_which_broker_id
        if result.status is PullStatus.NO_MATCHED_MSG and result.next_begin_offset == offset:
            # a slave behind the consumer (its master, which had the rest, is down) answers
            # "retry immediately" without progress: pause instead of spinning on it
            await asyncio.sleep(NO_PROGRESS_DELAY_S)
        return result

    async def on_replica(
        self, mq: MessageQueue, call: Callable[[str], Awaitable[_T]], *, broker_id: int = MASTER_ID
    ) -> _T:
        """Run the read ``call(address)`` on a live replica of ``mq``'s broker group (the master
        first, a slave while the master is down)."""
        return await self.instance.invoke_on_replica(
            mq.broker_name, mq.topic, lambda replica: call(replica.broker_addr), broker_id
        )

    async def check_client_in_broker(self) -> None:
        """Java's ``checkClientInBroker``: ask the brokers of each SQL92 subscription's topic
        whether they serve it (CHECK_CLIENT_CONFIG); raises SubscriptionRefusedError if one refuses."""
        for sub in self.subscriptions().values():
            if sub.expression_type is ExpressionType.TAG:
                continue
            route = self.instance.topic_routes.get(sub.topic)  # no route yet: nothing to ask
            for bd in route.broker_datas if route is not None else ():
                addr = bd.master_addr
                if addr is None:
                    continue
                try:
                    await self.instance.api.check_client_config(addr, self.group, sub)
                except MQBrokerError as exc:
                    raise (subscription_refused(exc, sub) or exc) from None

    # ------------------------------------------------------------------ rebalance hooks (overridden)

    async def start_queue(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        raise NotImplementedError

    async def remove_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        raise NotImplementedError

    def queues_changed(self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        return None
