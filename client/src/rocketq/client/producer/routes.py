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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rocketq.client.errors import NoRouteError
from rocketq.client.instance import ClientInstance
from rocketq.client.producer.fault import TopicPublishInfo
from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.vocabulary import MessageQueue

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

    async def after_failure(self, topic: str, info: TopicPublishInfo) -> TopicPublishInfo:
        """A send built on the TBW102 template failed: the broker may have created (and
        registered) the topic with another queue count meanwhile, so look the route up again."""
        if not info.from_template:
            return info
        try:
            return await self.get(topic, refresh=True)
        except NoRouteError:
            return info

    async def broker_addr_of(self, mq: MessageQueue) -> str:
        """The master address of ``mq``'s broker, after the topic's route lookup (template
        included: its route also fills the instance's broker address table)."""
        await self.get(mq.topic)
        return await self._instance().find_master_addr_or_refresh(mq.broker_name, mq.topic)
