"""PublishRoutes: the producer's topic routes, with auto-creation through the ``TBW102`` template.

Theory of operation (DefaultMQProducerImpl.tryToFindTopicPublishInfo).  Each topic a producer
sends to has a :class:`~rocketq.client.producer.fault.TopicPublishInfo`, fetched from the
NameServer on first use and replaced whenever the client instance's periodic route update sees
it change.  When the NameServer knows no route for a topic, the route of the auto-creation
template (``create_topic_key``, ``TBW102``) stands in, each broker's queue count capped at
``default_topic_queue_nums``: a send there names the template as ``defaultTopic`` and a broker
with ``autoCreateTopicEnable`` creates the topic.  After a failed send on the template the route
is looked up again, since the broker may have created and registered the topic meanwhile.
Every send path of the producer (single messages, batches, encoded batches, half batches) goes
through this table, so auto-creation behaves the same for all of them.

Failover.  After a failed send (:meth:`PublishRoutes.after_failure`) the route is fetched again at
once (rate-limited by the client instance), so a master elected meanwhile is used by the next
attempt.  When the refreshed route offers no other way (no other broker group, and the failed
group's master is still the address that just failed, or still missing), the retry waits for the
next refresh window (``route_refresh_on_failure_interval_ms``), within the send's deadline:
retrying a dead master at once would only spend the retry budget before the controller had time
to elect a new one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable

from rocketq.client.errors import NoRouteError
from rocketq.client.instance import ClientInstance
from rocketq.client.producer.fault import TopicPublishInfo
from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.vocabulary import MASTER_ID, MessageQueue

__all__ = ["PublishRoutes"]


class PublishRoutes:
    """Topic -> TopicPublishInfo for one producer; ``instance`` gives the client instance."""

    def __init__(
        self, instance: Callable[[], ClientInstance], create_topic_key: str, default_topic_queue_nums: int
    ) -> None:
        self._instance = instance
        self.create_topic_key = create_topic_key
        self.default_topic_queue_nums = default_topic_queue_nums
        self.table: dict[str, TopicPublishInfo] = {}

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        info = TopicPublishInfo.from_route(topic, route)
        if info.ok():
            self.table[topic] = info

    async def get(self, topic: str, *, refresh: bool = False) -> TopicPublishInfo:
        """The topic's publish info (cached; ``refresh`` asks the NameServer again)."""
        info = self.table.get(topic)
        if info is not None and info.ok() and not refresh:
            return info
        try:
            route = await self._instance().update_topic_route(topic)
            info = TopicPublishInfo.from_route(topic, route)
        except NoRouteError as unknown:
            try:
                info = await self._from_template(topic)
            except NoRouteError:
                key = self.create_topic_key
                raise NoRouteError(
                    topic,
                    f"The NameServer knows no topic {topic} and no broker offers the auto-creation "
                    f"template {key}: the topic does not exist and topic auto-creation is off.",
                ) from unknown
        if not info.ok():
            raise NoRouteError(topic, "the route has no writable queue")
        self.table[topic] = info
        return info

    async def _from_template(self, topic: str) -> TopicPublishInfo:
        """The TBW102 route with each broker's queue count capped at default_topic_queue_nums."""
        template = await self._instance().update_topic_route(self.create_topic_key)
        nums = self.default_topic_queue_nums
        queue_datas = [
            dataclasses.replace(
                qd,
                read_queue_nums=min(nums, qd.read_queue_nums),
                write_queue_nums=min(nums, qd.read_queue_nums),
            )
            for qd in template.queue_datas
        ]
        route = dataclasses.replace(template, queue_datas=queue_datas)
        return dataclasses.replace(TopicPublishInfo.from_route(topic, route), from_template=True)

    async def after_failure(
        self,
        topic: str,
        info: TopicPublishInfo,
        failed: MessageQueue | None = None,
        *,
        failed_addr: str | None = None,
        deadline: float | None = None,
    ) -> TopicPublishInfo:
        """The publish info for the next attempt after a send to ``failed`` (whose master was
        ``failed_addr``, None when the group had no master) did not succeed.

        A send built on the TBW102 template looks the topic up again (the broker may have created
        and registered it meanwhile).  Otherwise the route is refreshed (rate-limited); when it
        shows no alternative, the call waits for the next refresh window (up to ``deadline``, a
        ``time.monotonic()`` value) and refreshes once more.
        """
        if info.from_template:
            try:
                return await self.get(topic, refresh=True)
            except NoRouteError:
                return info
        inst = self._instance()
        for round_ in range(2):
            await inst.refresh_route_after_failure(topic)
            current = self.table.get(topic)
            info = current if current is not None and current.ok() else info
            if failed is None or self._has_alternative(info, failed.broker_name, failed_addr):
                return info
            interval_s = inst.config.route_refresh_on_failure_interval_ms / 1000
            pause = interval_s if deadline is None else min(interval_s, deadline - time.monotonic())
            if round_ == 1 or pause <= 0:
                return info
            await asyncio.sleep(pause)
        return info

    def _has_alternative(self, info: TopicPublishInfo, broker_name: str, failed_addr: str | None) -> bool:
        """Another broker group to write to, or a new master of the failed one."""
        if any(mq.broker_name != broker_name for mq in info.message_queues):
            return True
        master = self._instance().find_broker_addr(broker_name, MASTER_ID, only_this=True)
        return master is not None and master != failed_addr

    async def broker_addr_of(self, mq: MessageQueue) -> str:
        """The master address of ``mq``'s broker, after the topic's route lookup (template
        included: its route also fills the instance's broker address table)."""
        await self.get(mq.topic)
        return await self._instance().find_master_addr_or_refresh(mq.broker_name, mq.topic)
