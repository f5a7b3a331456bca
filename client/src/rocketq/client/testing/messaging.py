"""Topic, produce, consume and pull helpers for tests, over the public client API.

What many integration tests do before they check anything: create a topic and wait until the
NameServer answers its route (the broker registers a new topic asynchronously), send a few
messages and read them back with a lite pull consumer, drain a consumer up to a count within a
bound, build the SEND_MESSAGE_V2 and PULL_MESSAGE headers of direct requests, and read every
message of a queue or a topic the way a consumer pulling from offset 0 sees them.  Each helper is
bounded in time; the waits fail naming what they waited for (:mod:`rocketq.client.testing.wait`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from rocketq.client.admin import Admin
from rocketq.client.api import BlockingMQClientAPI, MQClientAPI
from rocketq.client.config import ClientConfig, ConsumeFromWhere
from rocketq.client.consumer import LitePullConsumer
from rocketq.client.errors import NoRouteError, RocketQError
from rocketq.client.model import Message, MessageExt, PullStatus, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from rocketq.client.remoting.vocabulary import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DEFAULT_CLUSTER,
    SUB_ALL,
    ExpressionType,
    PullSysFlag,
    SubscriptionData,
)
from rocketq.client.testing.wait import DEFAULT_WAIT_S, wait_for

__all__ = [
    "create_topic",
    "drain",
    "ha_max_offset",
    "has_route",
    "heartbeat_consumer",
    "produce_and_consume",
    "pull_header",
    "pull_queue",
    "read_topic",
    "send_header",
    "wait_route",
]


#: The consumer group of the probes that read what a topic holds (they commit no offset).
PROBE_GROUP = "cg-probe"


def has_route(admin: Admin, topic: str) -> bool:
    """Whether the NameServer answers a route with queues for ``topic``."""
    try:
        return bool(admin.topic_route(topic).queue_datas)
    except NoRouteError:  # the NameServer has not heard of it yet
        return False


async def heartbeat_consumer(
    api: MQClientAPI, broker: str, group: str, subscription: SubscriptionData
) -> None:
    """One HEART_BEAT from ``api``'s client id: a clustering push consumer of ``group`` with
    ``subscription``, so the broker lists it (consumerConnection, queryCq -g, consumerStatus)."""
    consumer = {
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
        "groupName": group, "messageModel": "CLUSTERING", "unitMode": False,
        "subscriptionDataSet": [subscription.to_obj()],
    }  # fmt: skip
    heartbeat = {"clientID": api.client_id, "consumerDataSet": [consumer], "producerDataSet": []}
    await api.send_heartbeat(broker, heartbeat)


def wait_route(admin: Admin, topic: str, timeout_s: float = DEFAULT_WAIT_S) -> None:
    """Wait until the NameServer answers a route with queues for ``topic``."""
    wait_for(lambda: has_route(admin, topic), f"the route of {topic}", timeout_s)


def create_topic(
    ns_addr: str,
    topic: str,
    queues: int = 4,
    *,
    broker_addr: str | None = None,
    config: ClientConfig | None = None,
    timeout_s: float = DEFAULT_WAIT_S,
) -> None:
    """Create ``topic`` with ``queues`` read and write queues on ``broker_addr`` (default: every
    master of ``DefaultCluster``) and wait until the NameServer answers its route."""
    with Admin(ns_addr, config=config) as admin:
        where = {"broker_addr": broker_addr} if broker_addr else {"cluster": DEFAULT_CLUSTER}
        admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues, **where)
        wait_route(admin, topic, timeout_s)


def drain(
    consumer: LitePullConsumer, n: int, timeout_s: float = DEFAULT_WAIT_S, poll_ms: int = 500
) -> list[MessageExt]:
    """Poll ``consumer`` until it returned ``n`` messages or ``timeout_s`` passed; everything it
    returned (the caller asserts on what it expected)."""
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        got.extend(consumer.poll(poll_ms))
    return got


def produce_and_consume(
    ns_addr: str, topic: str, *, group: str, client: ClientConfig | None = None, n: int = 20
) -> None:
    """Send ``n`` messages ``m0``, ``m1`` ... to ``topic`` (all must be SEND_OK) and read exactly
    them back from the first offset with a lite pull consumer of ``group``."""
    with Producer(ns_addr, producer_group=f"pg-{topic}", client=client) as producer:
        results = [producer.send(Message(topic, f"m{i}".encode())) for i in range(n)]
    assert {r.send_status for r in results} == {SendStatus.SEND_OK}
    consumer = LitePullConsumer(
        ns_addr,
        consumer_group=group,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        client=client,
    )
    consumer.assign(sorted(consumer.fetch_message_queues(topic)))
    consumer.start()
    try:
        got = drain(consumer, n)
    finally:
        consumer.shutdown()
    assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(n))


def pull_header(
    topic: str,
    queue_id: int,
    offset: int,
    *,
    group: str,
    max_msg_nums: int,
    sys_flag: int = int(PullSysFlag.SUBSCRIPTION),
    suspend_ms: int = 0,
    subscription: str = SUB_ALL,
    expression_type: ExpressionType | None = ExpressionType.TAG,
) -> PullMessageRequestHeader:
    """The header of a direct PULL_MESSAGE of ``topic``'s queue ``queue_id`` from ``offset``
    (no commit; ``suspend_ms`` > 0 adds the SUSPEND flag of a long poll)."""
    return PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=max_msg_nums,
        sys_flag=sys_flag | (int(PullSysFlag.SUSPEND) if suspend_ms else 0),
        commit_offset=0,
        suspend_timeout_millis=suspend_ms,
        subscription=subscription,
        sub_version=0,
        expression_type=expression_type,
    )


def send_header(
    topic: str,
    *,
    queue_id: int = 0,
    properties: str = "",
    default_topic_queue_nums: int = 4,
    producer_group: str = "pg",
    sys_flag: int = 0,
    batch: bool = False,
    reconsume_times: int | None = None,
    max_reconsume_times: int | None = None,
) -> SendMessageRequestHeaderV2:
    """The header of a direct SEND_MESSAGE_V2 to ``topic``'s queue ``queue_id``, born now (a broker
    that auto-creates topics creates it from ``TBW102`` with ``default_topic_queue_nums`` queues)."""
    return SendMessageRequestHeaderV2(
        producer_group=producer_group,
        topic=topic,
        default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
        default_topic_queue_nums=default_topic_queue_nums,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp=int(time.time() * 1000),
        flag=0,
        properties=properties,
        reconsume_times=reconsume_times,
        max_reconsume_times=max_reconsume_times,
        batch=batch,
    )


def pull_queue(
    api: BlockingMQClientAPI,
    addr: str,
    topic: str,
    queue_id: int,
    *,
    group: str = PROBE_GROUP,
    max_msg_nums: int = 32,
    timeout_ms: int = 5000,
    refused_ok: bool = True,
    start_offset: int = 0,
) -> list[MessageExt]:
    """Every message of ``topic``'s queue ``queue_id`` on the broker at ``addr``, as a consumer of
    ``group`` pulling from ``start_offset`` gets them.  A pull the broker refuses (e.g. of a topic
    it does not have yet) ends the read when ``refused_ok``, else raises."""
    out: list[MessageExt] = []
    offset = start_offset
    while True:
        header = pull_header(topic, queue_id, offset, group=group, max_msg_nums=max_msg_nums)
        try:
            result = api.pull_message(addr, header, timeout_ms=timeout_ms)
        except RocketQError:
            if refused_ok:
                return out
            raise
        if result.status is not PullStatus.FOUND:
            return out
        out.extend(result.messages)
        offset = result.next_begin_offset


def read_topic(
    ns_addr: str,
    topic: str,
    *,
    group: str = PROBE_GROUP,
    client: ClientConfig | None = None,
    max_msg_nums: int = 256,
    start: Mapping[int, int] | None = None,
) -> list[MessageExt]:
    """Every message of every readable queue of ``topic`` on its masters, queue by queue, pulled
    by a consumer of ``group`` with the settings (credentials, TLS) of ``client`` from offset 0,
    or from ``start[queue_id]`` (for a topic on one broker group); a refused pull raises."""
    with BlockingMQClientAPI(ns_addr, config=client) as api:
        route = api.get_topic_route(topic)
        out: list[MessageExt] = []
        for queue in route.readable_queues(topic):
            addr = route.master_addr(queue.broker_name)
            if addr is not None:
                first = (start or {}).get(queue.queue_id, 0)
                batch = pull_queue(
                    api, addr, topic, queue.queue_id, group=group, max_msg_nums=max_msg_nums,
                    refused_ok=False, start_offset=first,
                )  # fmt: skip
                out.extend(batch)
        return out


def ha_max_offset(status: Mapping[str, Any]) -> int:
    """A broker's CommitLog max offset from its GET_BROKER_HA_STATUS answer: the master's own, a
    slave's as its HA client reports it."""
    if status["master"]:
        return int(status["masterCommitLogMaxOffset"])
    return int(status["haClientRuntimeInfo"]["maxOffset"])
