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

Sends to a fixed queue (a selector's choice, an explicit queue, an encoded batch) keep that queue:
moving a key to another queue would break its order.  A selector therefore chooses among
:meth:`PublishRoutes.selector_queues`, the queues of every broker group the producer has seen
for the topic, a group that left the route included, so that a key never maps to another queue
because a group is down.  :meth:`PublishRoutes.queue_state` says whether a chosen queue can be
written now (:class:`QueueState`): its group's master is listed (``WRITABLE``), the group still
lists replicas but no master (``NO_MASTER``: a controller may elect one, the send waits within
its timeout), the group is gone from the route (``GROUP_LOST``: no broker of it is registered,
nothing can take over) or the group no longer has that queue (``QUEUE_GONE``).  The last two fail
the send at once with :func:`queue_unavailable_error`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import time
from collections.abc import Callable, Sequence

from rocketq.client.errors import MQClientError, NoRouteError
from rocketq.client.instance import ClientInstance
from rocketq.client.producer.fault import TopicPublishInfo
from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.vocabulary import MASTER_ID, MessageQueue, ResponseCode, is_writeable

__all__ = ["PublishRoutes", "QueueState", "queue_unavailable_error"]


class QueueState(enum.Enum):
    """Whether a chosen queue can be written now (see :meth:`PublishRoutes.queue_state`)."""

    WRITABLE = "WRITABLE"  # its group's master is listed
    NO_MASTER = "NO_MASTER"  # its group lists replicas but no master: one may be elected
    GROUP_LOST = "GROUP_LOST"  # no broker of its group is registered with the NameServer
    QUEUE_GONE = "QUEUE_GONE"  # its group is listed, without this (writable) queue


def queue_unavailable_error(mq: MessageQueue, state: QueueState) -> MQClientError:
    """The error of a send to a fixed queue that cannot be written and cannot move."""
    group = mq.broker_name
    if state is QueueState.GROUP_LOST:
        why = (
            f"the NameServer lists no broker of group {group} any more (its master is down and no "
            "replica of it is left to take over)"
        )
    else:
        why = f"broker group {group} no longer offers a writable queue {mq.queue_id} of the topic"
    return MQClientError(
        f"cannot send to queue {mq.queue_id} of broker group {group} (topic {mq.topic}): {why}. "
        "A send to a chosen queue (selector, explicit queue) is not moved to another queue, since "
        "that would break the order of its key; it succeeds again once the group is back (restart "
        "its broker), or send without a selector if order does not matter.",
        code=ResponseCode.SERVICE_NOT_AVAILABLE,
    )


class PublishRoutes:
    """Topic -> TopicPublishInfo for one producer; ``instance`` gives the client instance."""

    def __init__(
        self, instance: Callable[[], ClientInstance], create_topic_key: str, default_topic_queue_nums: int
    ) -> None:
        self._instance = instance
        self.create_topic_key = create_topic_key
        self.default_topic_queue_nums = default_topic_queue_nums
        self.table: dict[str, TopicPublishInfo] = {}
        # topic -> broker group -> writeQueueNums, for every group seen writable (selector_queues)
        self._groups: dict[str, dict[str, int]] = {}

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        self._remember_groups(topic, route)
        info = TopicPublishInfo.from_route(topic, route)
        if info.ok():
            self.table[topic] = info

    def _remember_groups(self, topic: str, route: TopicRouteData) -> None:
        """Groups listed writable take the route's queue count, groups listed not writable are
        dropped (an operator's decision), groups missing from the route are kept."""
        groups = self._groups.setdefault(topic, {})
        for qd in route.queue_datas:
            if is_writeable(qd.perm) and qd.write_queue_nums > 0:
                groups[qd.broker_name] = qd.write_queue_nums
            else:
                groups.pop(qd.broker_name, None)

    def selector_queues(self, info: TopicPublishInfo) -> Sequence[MessageQueue]:
        """The queues a selector chooses among: those of every broker group seen writable for the
        topic, in route order (groups by name, queue ids ascending), a group that is down or left
        the route included, so that a key keeps its queue while a group is missing."""
        groups = self._groups.get(info.topic)
        if info.from_template or info.order_topic or not groups:
            return info.message_queues
        return tuple(
            MessageQueue(info.topic, name, queue_id)
            for name in sorted(groups)
            for queue_id in range(groups[name])
        )

    def queue_state(self, mq: MessageQueue) -> QueueState:
        """Whether ``mq`` can be written now, after the instance's cached route of its topic."""
        inst = self._instance()
        route = inst.topic_routes.get(mq.topic)
        if route is None:  # not looked up yet, or sent through the TBW102 template: the send finds out
            return QueueState.WRITABLE
        qd = next((q for q in route.queue_datas if q.broker_name == mq.broker_name), None)
        listed = any(bd.broker_name == mq.broker_name and bd.broker_addrs for bd in route.broker_datas)
        if qd is None:
            return QueueState.NO_MASTER if listed else QueueState.GROUP_LOST
        if not is_writeable(qd.perm) or mq.queue_id >= qd.write_queue_nums:
            return QueueState.QUEUE_GONE
        master = inst.find_broker_addr(mq.broker_name, MASTER_ID, only_this=True)
        return QueueState.WRITABLE if master is not None else QueueState.NO_MASTER

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
        if not info.from_template and info.route is not None:
            self._remember_groups(topic, info.route)
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
        same_queue: bool = False,
    ) -> TopicPublishInfo:
        """The publish info for the next attempt after a send to ``failed`` (whose master was
        ``failed_addr``, None when the group had no master) did not succeed.

        A send built on the TBW102 template looks the topic up again (the broker may have created
        and registered it meanwhile).  Otherwise the route is refreshed (rate-limited); when it
        shows no alternative, the call waits for the next refresh window (up to ``deadline``, a
        ``time.monotonic()`` value) and refreshes once more.  With ``same_queue`` (the next
        attempt goes to ``failed`` again) only a new master of its group is an alternative, and a
        refresh that shows the group lost or the queue gone ends the wait at once.
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
            if failed is None:
                return info
            if same_queue:
                if self.queue_state(failed) in (QueueState.GROUP_LOST, QueueState.QUEUE_GONE):
                    return info
                if self._has_new_master(failed.broker_name, failed_addr):
                    return info
            elif self._has_alternative(info, failed.broker_name, failed_addr):
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
        return self._has_new_master(broker_name, failed_addr)

    def _has_new_master(self, broker_name: str, failed_addr: str | None) -> bool:
        master = self._instance().find_broker_addr(broker_name, MASTER_ID, only_this=True)
        return master is not None and master != failed_addr

    async def broker_addr_of(self, mq: MessageQueue) -> str:
        """The master address of ``mq``'s broker, after the topic's route lookup (template
        included: its route also fills the instance's broker address table)."""
        await self.get(mq.topic)
        return await self._instance().find_master_addr_or_refresh(mq.broker_name, mq.topic)
