"""Subscription-group administration: create, update, read and delete a group's settings on brokers.

A subscription group's settings (RocketMQ's ``SubscriptionGroupConfig``) live on each master:
whether the group may consume (``consumeEnable``), how many times a message is redelivered before
it goes to the group's DLQ (``retryMaxTimes``), the queue count of its retry topic
(``retryQueueNums``), and which broker a pull is redirected to (``brokerId`` normally,
``whichBrokerWhenConsumeSlowly`` when the consumer lags).  The calls here are
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200, the whole config as the JSON body; the broker replaces
what it had), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), GET_SUBSCRIPTIONGROUP_CONFIG (352, one group) and
DELETE_SUBSCRIPTIONGROUP (207, header
``groupName`` and ``cleanOffset``), sent to one broker address or every master of a cluster as
Java's ``updateSubGroup`` / ``deleteSubGroup`` do.  When ``retryQueueNums`` differs from the
default, the group's existing retry topic is resized on the same brokers, as Java's tool does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from rocketq.client.admin import AsyncAdmin
from rocketq.client.api import MQClientAPI
from rocketq.client.errors import MQClientError, NoRouteError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import MASTER_ID, retry_topic

__all__ = [
    "DEFAULT_RETRY_QUEUE_NUMS",
    "SubscriptionGroupSettings",
    "delete_sub_group",
    "get_sub_group",
    "query_sub_group",
    "target_brokers",
    "update_sub_group",
]

DEFAULT_RETRY_QUEUE_NUMS = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class SubscriptionGroupSettings:
    """RocketMQ's ``SubscriptionGroupConfig`` as the broker stores it (Java's defaults)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = DEFAULT_RETRY_QUEUE_NUMS
    retry_max_times: int = 16
    broker_id: int = MASTER_ID
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    #: FIFO consumption (RocketMQ 5): 5.x proxies pop the group orderly
    consume_message_orderly: bool = False

    def __post_init__(self) -> None:
        if not self.group_name:
            raise ValueError("a subscription group needs a name")
        if self.retry_queue_nums < 0 or self.retry_max_times < -1:
            raise ValueError(
                f"retryQueueNums must be >= 0 and retryMaxTimes >= -1, "
                f"got {self.retry_queue_nums}/{self.retry_max_times}"
            )

    def to_json(self) -> dict[str, object]:
        return {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "brokerId": self.broker_id,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
        }

    @classmethod
    def from_json(cls, d: dict[str, object]) -> SubscriptionGroupSettings:
        def flag(key: str, default: bool) -> bool:
            v = d.get(key, default)
            return v if isinstance(v, bool) else str(v).lower() == "true"

        def num(key: str, default: int) -> int:
            v = d.get(key, default)
            return int(v) if isinstance(v, (int, str)) else default

        return cls(
            group_name=str(d["groupName"]),
            consume_enable=flag("consumeEnable", True),
            consume_from_min_enable=flag("consumeFromMinEnable", True),
            consume_broadcast_enable=flag("consumeBroadcastEnable", True),
            retry_queue_nums=num("retryQueueNums", DEFAULT_RETRY_QUEUE_NUMS),
            retry_max_times=num("retryMaxTimes", 16),
            broker_id=num("brokerId", MASTER_ID),
            which_broker_when_consume_slowly=num("whichBrokerWhenConsumeSlowly", 1),
            notify_consumer_ids_changed_enable=flag("notifyConsumerIdsChangedEnable", True),
            consume_message_orderly=flag("consumeMessageOrderly", False),
        )

    def __str__(self) -> str:
        """Java's ``SubscriptionGroupConfig.toString()`` (what ``updateSubGroup`` prints)."""
        b = str  # Java prints booleans in lower case
        return (
            f"SubscriptionGroupConfig [groupName={self.group_name}, "
            f"consumeEnable={b(self.consume_enable).lower()}, "
            f"consumeFromMinEnable={b(self.consume_from_min_enable).lower()}, "
            f"consumeBroadcastEnable={b(self.consume_broadcast_enable).lower()}, "
            f"retryQueueNums={self.retry_queue_nums}, retryMaxTimes={self.retry_max_times}, "
            f"brokerId={self.broker_id}, "
            f"whichBrokerWhenConsumeSlowly={self.which_broker_when_consume_slowly}, "
            f"notifyConsumerIdsChangedEnable={b(self.notify_consumer_ids_changed_enable).lower()}]"
        )


async def target_brokers(admin: AsyncAdmin, *, broker_addr: str | None, cluster: str | None) -> list[str]:
    """``[broker_addr]``, or the master addresses of ``cluster`` (Java's
    ``CommandUtil.fetchMasterAddrByClusterName``), sorted."""
    if broker_addr:
        return [broker_addr]
    if not cluster:
        raise MQClientError("give a broker address or a cluster name")
    return sorted((await admin.master_addrs(cluster)).values())


async def update_sub_group(
    admin: AsyncAdmin,
    settings: SubscriptionGroupSettings,
    *,
    broker_addr: str | None = None,
    cluster: str | None = None,
) -> list[str]:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on one broker or every master of ``cluster``; the
    addresses written.  A non-default ``retry_queue_nums`` also resizes the group's retry topic
    where it exists already."""
    addrs = await target_brokers(admin, broker_addr=broker_addr, cluster=cluster)
    body = json.dumps(settings.to_json(), separators=(",", ":")).encode("utf-8")
    for addr in addrs:
        cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        admin.api.check(await admin.api.invoke(addr, cmd), addr)
    if settings.retry_queue_nums != DEFAULT_RETRY_QUEUE_NUMS:
        await _resize_retry_topic(admin, settings, addrs)
    return addrs


async def _resize_retry_topic(
    admin: AsyncAdmin, settings: SubscriptionGroupSettings, addrs: list[str]
) -> None:
    topic = retry_topic(settings.group_name)
    try:
        route = await admin.topic_route(topic)
    except NoRouteError:
        return  # no retry topic yet: the broker creates it with retryQueueNums on first use
    perms = {q.broker_name: q for q in route.queue_datas}
    for bd in route.broker_datas:
        q = perms.get(bd.broker_name)
        if bd.master_addr in addrs and q is not None and q.write_queue_nums != settings.retry_queue_nums:
            await admin.create_topic(
                topic,
                broker_addr=bd.master_addr,
                read_queue_nums=settings.retry_queue_nums,
                write_queue_nums=settings.retry_queue_nums,
                perm=q.perm,
            )


async def get_sub_group(admin: AsyncAdmin, broker_addr: str, group: str) -> SubscriptionGroupSettings | None:
    """The group's settings on one broker (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), None if it has none."""
    cmd = RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    response = admin.api.check(await admin.api.invoke(broker_addr, cmd), broker_addr)
    table = json.loads(response.body.decode("utf-8")).get("subscriptionGroupTable") or {}
    entry = table.get(group)
    return SubscriptionGroupSettings.from_json({"groupName": group, **entry}) if entry is not None else None


async def query_sub_group(api: MQClientAPI, broker_addr: str, group: str) -> SubscriptionGroupSettings | None:
    """GET_SUBSCRIPTIONGROUP_CONFIG (352, header ``group``): one group's settings on one broker
    (which creates it first where it auto-creates groups); None if the broker has no such group."""
    cmd = RemotingCommand.request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group})
    response = await api.invoke(broker_addr, cmd)
    if response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
        return None
    api.check(response, broker_addr)
    body = json.loads(response.body.decode("utf-8"))
    return SubscriptionGroupSettings.from_json({"groupName": group, **body})


async def delete_sub_group(
    admin: AsyncAdmin,
    group: str,
    *,
    broker_addr: str | None = None,
    cluster: str | None = None,
    clean_offset: bool = False,
) -> list[str]:
    """DELETE_SUBSCRIPTIONGROUP on one broker or every master of ``cluster``; the addresses.
    ``clean_offset`` also drops the group's committed offsets there."""
    addrs = await target_brokers(admin, broker_addr=broker_addr, cluster=cluster)
    fields = {"groupName": group, "cleanOffset": str(clean_offset).lower()}
    for addr in addrs:
        cmd = RemotingCommand.request(RequestCode.DELETE_SUBSCRIPTIONGROUP, fields)
        admin.api.check(await admin.api.invoke(addr, cmd), addr)
    return addrs
