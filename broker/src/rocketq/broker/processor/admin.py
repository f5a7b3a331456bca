"""Topic, subscription-group and broker administration.

UPDATE_AND_CREATE_TOPIC (17, with RocketMQ 5's ``+key=value`` attributes), GET_TOPIC_CONFIG (351),
DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
GET_SUBSCRIPTIONGROUP_CONFIG (352), DELETE_SUBSCRIPTIONGROUP (207), GET_ALL_CONSUMER_OFFSET (43),
GET_BROKER_RUNTIME_INFO (28) and GET_BROKER_CONFIG (26).  Topic changes reach the NameServers
through the topic manager's change listener (an immediate re-registration).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping

from rocketq.broker.config_keys import broker_properties
from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.broker.subscription_manager import SubscriptionGroupConfig
from rocketq.broker.topic_manager import TopicConfig, validate_topic
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import CreateTopicRequestHeader, DeleteTopicRequestHeader
from rocketq.client.remoting.topic_attributes import merge_topic_attributes
from rocketq.client.remoting.txn_batch import FEATURE_KEY as TRANSACTION_BATCH_FEATURE
from rocketq.client.remoting.vocabulary import validate_group
from rocketq.server import Channel

__all__ = ["AdminProcessor", "dumps"]

BROKER_VERSION = 401  # MQVersion V4_9_4, the protocol level rocketq speaks


def dumps(obj: object) -> bytes:
    """Standard, compact, key-sorted JSON (what RocketMQ's standard-JSON mode emits)."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8")


class AdminProcessor:
    def __init__(
        self, ctx: BrokerContext, *, ha_runtime: Callable[[], Mapping[str, str]] | None = None
    ) -> None:
        """``ha_runtime`` adds the replication keys to GET_BROKER_RUNTIME_INFO (docs/replication.md)."""
        self.ctx = ctx
        self.ha_runtime = ha_runtime

    async def update_and_create_topic(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        header = parse_header(request, CreateTopicRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        remark = validate_topic(header.topic)
        if remark is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        if header.topic == self.ctx.config.broker_cluster_name:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"The specified topic[{header.topic}] is conflict with the cluster name.",
            )
        if not (0 < header.read_queue_nums <= 1024 and 0 < header.write_queue_nums <= 1024):
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                "readQueueNums/writeQueueNums must be 1..1024, "
                f"got {header.read_queue_nums}/{header.write_queue_nums}",
            )
        existing = self.ctx.topics.select(header.topic)
        attributes = merge_topic_attributes(existing.attributes if existing else {}, header.attributes)
        if isinstance(attributes, str):
            return request.make_response(ResponseCode.SYSTEM_ERROR, attributes)
        tc = TopicConfig(
            topic_name=header.topic,
            attributes=attributes,
            read_queue_nums=header.read_queue_nums,
            write_queue_nums=header.write_queue_nums,
            perm=header.perm,
            topic_filter_type=header.topic_filter_type or "SINGLE_TAG",
            topic_sys_flag=header.topic_sys_flag or 0,
            order=header.order,
        )
        self.ctx.topics.update(tc)
        return request.make_response(ResponseCode.SUCCESS)

    async def get_topic_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """GET_TOPIC_CONFIG (351, header ``topic``): the topic's config with its attributes (Java's
        TopicConfigAndQueueMapping without a static-topic mapping); TOPIC_NOT_EXIST otherwise."""
        topic = request.ext_fields.get("topic")
        if not topic:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null")
        tc = self.ctx.topics.select(topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"No topic {topic} in this broker")
        return request.make_response(ResponseCode.SUCCESS, body=dumps({**tc.to_obj(), "mappingDetail": None}))

    async def delete_topic(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, DeleteTopicRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        ctx = self.ctx
        ctx.topics.delete(header.topic)
        ctx.offsets.remove_topic(header.topic)
        store = ctx.store
        await ctx.query_executor.run(lambda: store.delete_topics({header.topic}))
        ctx.stats_items.on_topic_deleted(header.topic)  # as Java's autoDeleteUnusedStats (default on)
        return request.make_response(ResponseCode.SUCCESS)

    async def get_all_topic_config(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        return request.make_response(ResponseCode.SUCCESS, body=dumps(self.ctx.topics.encode()))

    async def update_and_create_subscription_group(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        try:
            obj = json.loads(request.body.decode("utf-8"))
            sgc = SubscriptionGroupConfig.from_json(obj)
        except (UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"bad SubscriptionGroupConfig body: {exc}"
            )
        problem = validate_group(sgc.group_name)
        if problem is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, problem)
        self.ctx.groups.update(sgc)
        return request.make_response(ResponseCode.SUCCESS)

    async def get_all_subscription_group(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        return request.make_response(ResponseCode.SUCCESS, body=dumps(self.ctx.groups.encode()))

    async def get_subscription_group(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        """One group's config (header ``group``), auto-created where the broker allows it, as
        Java's ``findSubscriptionGroupConfig``; SUBSCRIPTION_GROUP_NOT_EXIST otherwise."""
        group = request.ext_fields.get("group")
        if not group:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "the custom field <group> is null")
        sgc = self.ctx.groups.find(group)
        if sgc is None:
            return request.make_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return request.make_response(ResponseCode.SUCCESS, body=dumps(sgc.to_json()))

    async def delete_subscription_group(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        group = request.ext_fields.get("groupName")
        if not group:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "the custom field <groupName> is null")
        self.ctx.groups.delete(group)
        if request.ext_fields.get("cleanOffset", "").lower() == "true":
            self.ctx.offsets.remove_group(group)
        self.ctx.stats_items.on_group_deleted(group)  # as Java's autoDeleteUnusedStats (default on)
        return request.make_response(ResponseCode.SUCCESS)

    async def get_all_consumer_offset(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        return request.make_response(ResponseCode.SUCCESS, body=dumps(self.ctx.offsets.encode()))

    async def get_broker_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        text = "".join(f"{k}={v}\n" for k, v in broker_properties(self.ctx.config).items())
        return request.make_response(ResponseCode.SUCCESS, body=text.encode("utf-8"))

    async def get_broker_runtime_info(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        return request.make_response(ResponseCode.SUCCESS, body=dumps({"table": self.runtime_info()}))

    def runtime_info(self) -> dict[str, str]:
        ctx = self.ctx
        table: dict[str, str] = {}
        try:
            table.update({str(k): str(v) for k, v in dict(ctx.store.runtime_info()).items()})
        except Exception as exc:  # a store that cannot report must not break the admin call
            table["storeRuntimeInfoError"] = str(exc)
        stats = ctx.stats
        uptime_s = max((time.time() * 1000 - stats.boot_timestamp_ms) / 1000.0, 1e-3)
        table.update(
            {
                "brokerVersion": str(BROKER_VERSION),
                "brokerVersionDesc": "V4_9_4 (rocketq)",
                "bootTimestamp": str(stats.boot_timestamp_ms),
                "brokerRole": ctx.config.broker_role.value,
                "brokerName": ctx.config.broker_name,
                "brokerAddr": ctx.broker_addr,
                "msgPutTotalTodayNow": str(stats.put_messages),
                "msgGetTotalTodayNow": str(stats.get_messages),
                "putTps": f"{stats.put_messages / uptime_s:.2f}",
                "getTransferedTps": f"{stats.get_messages / uptime_s:.2f}",
                "sendThreadPoolQueueSize": str(ctx.send_executor.pending),
                "sendThreadPoolQueueCapacity": str(ctx.config.send_thread_pool_queue_capacity),
                "pullThreadPoolQueueSize": str(ctx.pull_executor.pending),
                "pullThreadPoolQueueCapacity": str(ctx.config.pull_thread_pool_queue_capacity),
                "queryThreadPoolQueueSize": str(ctx.query_executor.pending),
                "suspendedPulls": str(ctx.hold.held_count),
                "busyRejects": str(stats.busy_rejects),
                "topicCount": str(len(ctx.topics)),
                "consumerGroupCount": str(len(ctx.consumers.groups())),
                "producerChannelCount": str(ctx.producers.channel_count()),
                # rocketq extension (docs/transactions.md): prepared batches and ranged END_TRANSACTION
                TRANSACTION_BATCH_FEATURE: "1" if ctx.txn is not None else "0",
            }
        )
        if self.ha_runtime is not None:
            table.update(self.ha_runtime())
        return table
