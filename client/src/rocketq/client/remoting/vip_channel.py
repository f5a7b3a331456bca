"""The VIP channel: a broker's second remoting port, ``listenPort - 2`` (RocketMQ 4.x's 10909).

A RocketMQ broker serves on that port ("fast remoting server") every request except the ones that
may park for long (pulls, pops, peeks, notifications, polling info), so that sends and admin calls
of clients with ``vipChannelEnabled`` are not queued behind long polls.  Clients derive the port
from the advertised address (``MixAll.brokerVIPChannel``): the NameServer route carries only
``listenPort``.  This module holds both halves of that agreement: the codes the broker leaves off
the VIP port, the codes a client sends through it (Java's ``MQClientAPIImpl`` and
``DefaultMQProducerImpl`` choices), and the address rule.
"""

from __future__ import annotations

from rocketq.client.remoting.codes import RequestCode

__all__ = ["NOT_ON_VIP_CHANNEL", "VIA_VIP_CHANNEL", "VIP_PORT_OFFSET", "vip_channel_addr"]

#: the VIP port is the listen port minus this (Java: ``MixAll.brokerVIPChannel``)
VIP_PORT_OFFSET = 2

#: requests a broker does not serve on its VIP port (Java registers them on the main server only)
NOT_ON_VIP_CHANNEL: frozenset[int] = frozenset(
    {
        RequestCode.PULL_MESSAGE,
        RequestCode.LITE_PULL_MESSAGE,
        RequestCode.PEEK_MESSAGE,
        RequestCode.POP_MESSAGE,
        RequestCode.NOTIFICATION,
        RequestCode.POLLING_INFO,
    }
)

#: requests a client with ``vip_channel_enabled`` sends to the VIP port: sends (the producer's
#: choice) and the broker calls Java's ``MQClientAPIImpl`` routes through ``brokerVIPChannel``;
#: pulls, heartbeats, transaction ends and NameServer calls keep the advertised address
VIA_VIP_CHANNEL: frozenset[int] = frozenset(
    {
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.CONSUMER_SEND_MSG_BACK,
        RequestCode.QUERY_MESSAGE,
        RequestCode.VIEW_MESSAGE_BY_ID,
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        RequestCode.GET_MAX_OFFSET,
        RequestCode.GET_MIN_OFFSET,
        RequestCode.GET_EARLIEST_MSG_STORETIME,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
        RequestCode.LOCK_BATCH_MQ,
        RequestCode.UNLOCK_BATCH_MQ,
        RequestCode.QUERY_ASSIGNMENT,
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_AND_CREATE_TOPIC_LIST,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.GET_TOPIC_STATS_INFO,
        RequestCode.GET_CONSUME_STATS,
        RequestCode.GET_PRODUCER_CONNECTION_LIST,
        RequestCode.GET_CONSUMER_CONNECTION_LIST,
        RequestCode.GET_BROKER_RUNTIME_INFO,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
        RequestCode.QUERY_TOPICS_BY_CONSUMER,
        RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER,
        RequestCode.QUERY_CONSUME_TIME_SPAN,
        RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
        RequestCode.DELETE_EXPIRED_COMMITLOG,
        RequestCode.CLEAN_UNUSED_TOPIC,
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        RequestCode.QUERY_CORRECTION_OFFSET,
        RequestCode.CLONE_GROUP_OFFSET,
        RequestCode.VIEW_BROKER_STATS_DATA,
        RequestCode.GET_BROKER_CONSUME_STATS,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
        RequestCode.GET_ALL_TOPIC_CONFIG,
        RequestCode.QUERY_CONSUME_QUEUE,
        RequestCode.RESUME_CHECK_HALF_MESSAGE,
        RequestCode.GET_TOPIC_CONFIG,
    }
)


def vip_channel_addr(addr: str) -> str:
    """``host:port`` of the VIP channel of the broker at ``addr`` (``host:(port - 2)``).

    An address without a numeric port, or one whose port is below 2, is returned unchanged (Java
    does the same for an address it cannot split).
    """
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or int(port) < VIP_PORT_OFFSET:
        return addr
    return f"{host}:{int(port) - VIP_PORT_OFFSET}"
