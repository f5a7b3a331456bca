"""Unit tests of the gRPC proxy's pieces that need no server: rmq-proxy.json, message conversion,
routes, the Settings reply and the checks of a receive."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from pathlib import Path

import pytest

from rocketq.client.model import MessageExt
from rocketq.client.remoting.msgid import encode_offset_msg_id
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.route import BrokerData, QueueData, TopicRouteData
from rocketq.client.remoting.topic_attributes import (
    TopicMessageType,
    merge_topic_attributes,
    topic_message_type,
)
from rocketq.client.remoting.vocabulary import Perm
from rocketq.proxy.auth import Credential, GrpcAcl, parse_authorization, required_resources
from rocketq.proxy.config import ProxyConfig, ProxyConfigError, load_proxy_config
from rocketq.proxy.consumer import ReceiveOrder, plan_receive
from rocketq.proxy.convert import Refusal, to_grpc_message, to_remoting_message
from rocketq.proxy.groups import GroupPolicy
from rocketq.proxy.naming import unwrap, wrap_resources
from rocketq.proxy.route import ACCEPTED_TYPES, accepted_types, grpc_assignments, grpc_queues
from rocketq.proxy.settings import server_settings
from rocketq.proxy.topics import message_type_of
from rocketq.proxy.transaction import ProxyTransactionId, TelemetryHub
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb
from rocketq.server.acl import AclPerm

CONFIG = ProxyConfig(namesrv_addr="127.0.0.1:9876")


# ---------------------------------------------------------------------- rmq-proxy.json


def test_rmq_proxy_json_keys_override_defaults_and_unread_keys_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "rmq-proxy.json"
    path.write_text(
        json.dumps(
            {"rocketMQClusterName": "DefaultCluster", "grpcServerPort": 18081, "maxMessageSize": "1024"}
        )
    )
    loaded = load_proxy_config(path, namesrv_addr="10.0.0.1:9876")
    assert loaded.config.grpc_server_port == 18081 and loaded.config.max_message_size == 1024
    assert loaded.config.namesrv_addr == "10.0.0.1:9876"
    assert loaded.ignored == ["rocketMQClusterName"]
    assert ProxyConfig(namesrv_addr="x:1").grpc_server_port == 8081  # RocketMQ's default


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"grpcServerPort": "eighty"}', "grpcServerPort must be a number"),
        ('{"grpcServerPort": 70000}', "grpcServerPort must be 0..65535"),
        ('{"proxyMode": "EDGE"}', "CLUSTER or LOCAL"),
        ("[1, 2]", "JSON object"),
        ("{not json", "is not JSON"),
        (
            '{"grpcClientConsumerMinLongPollingTimeoutMillis": 30000}',
            "grpcClientConsumerMinLongPollingTimeoutMillis must be positive and at most",
        ),
    ],
)
def test_bad_proxy_config_is_named(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "rmq-proxy.json"
    path.write_text(content)
    with pytest.raises(ProxyConfigError, match=words):
        load_proxy_config(path, namesrv_addr="127.0.0.1:9876")


def test_a_namesrv_address_is_required() -> None:
    with pytest.raises(ProxyConfigError, match="-n host:port"):
        load_proxy_config(None)


# ---------------------------------------------------------------------- messages


def _sdk(body: bytes = b"hello", **system: object) -> pb.Message:
    message = pb.Message(
        topic=pb.Resource(name="T"),
        body=body,
        system_properties=pb.SystemProperties(message_id="01AA", **system),  # type: ignore[arg-type]
    )
    return message


def test_sdk_message_becomes_remoting_properties() -> None:
    m = _sdk(tag="TagA", keys=["k1", "k2"], message_group="g1")
    m.user_properties["color"] = "red"
    out = to_remoting_message(m, 1024)
    assert not isinstance(out, Refusal)
    props = out.wire_properties()
    assert props[MessageConst.UNIQ_KEY] == "01AA"
    assert props[MessageConst.TAGS] == "TagA" and props[MessageConst.KEYS] == "k1 k2"
    assert props[MessageConst.SHARDING_KEY] == "g1" and props["color"] == "red"

    delayed = _sdk()
    delayed.system_properties.delivery_timestamp.FromMilliseconds(1_900_000_000_123)
    timer = to_remoting_message(delayed, 1024)
    assert not isinstance(timer, Refusal)
    assert timer.wire_properties()[MessageConst.TIMER_DELIVER_MS] == "1900000000123"


@pytest.mark.parametrize(
    ("message", "code"),
    [
        (_sdk(b""), pb.Code.MESSAGE_BODY_EMPTY),
        (_sdk(b"x" * 1025), pb.Code.MESSAGE_BODY_TOO_LARGE),
        (
            _sdk(message_type=pb.MessageType.TRANSACTION, message_group="g"),
            pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        ),
        (_sdk(message_type=pb.MessageType.PRIORITY), pb.Code.NOT_IMPLEMENTED),
        (_sdk(body_encoding=pb.Encoding.GZIP), pb.Code.NOT_IMPLEMENTED),
    ],
)
def test_messages_the_proxy_refuses(message: pb.Message, code: int) -> None:
    out = to_remoting_message(message, 1024)
    assert isinstance(out, Refusal) and out.code == code


def test_system_property_names_and_fifo_with_delay_are_refused() -> None:
    m = _sdk()
    m.user_properties[MessageConst.UNIQ_KEY] = "forged"
    out = to_remoting_message(m, 1024)
    assert isinstance(out, Refusal) and out.code == pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    both = _sdk(message_group="g")
    both.system_properties.delivery_timestamp.FromMilliseconds(1)
    out = to_remoting_message(both, 1024)
    assert isinstance(out, Refusal) and out.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def _stored(properties: dict[str, str], reconsume_times: int = 0) -> MessageExt:
    return MessageExt(
        total_size=0, magic=0, body_crc=0, queue_id=2, flag=0, queue_offset=7, physical_offset=99,
        sys_flag=0, born_timestamp=1_700_000_000_500, born_host=("10.0.0.1", 5000),
        store_timestamp=1_700_000_000_600, store_host=("10.0.0.2", 10911), reconsume_times=reconsume_times,
        prepared_transaction_offset=0, body=b"payload", topic="T", properties=properties,
    )  # fmt: skip


def test_popped_record_becomes_the_sdk_view() -> None:
    props = {
        MessageConst.UNIQ_KEY: "01BB",
        MessageConst.TAGS: "TagA",
        MessageConst.KEYS: "k1 k2",
        MessageConst.SHARDING_KEY: "g1",
        MessageConst.POP_CK: "0 1 2 3 0 broker-a 2 7",
        "color": "red",
    }
    m = to_grpc_message(_stored(props, reconsume_times=2), "handle")
    sp = m.system_properties
    assert sp.message_id == "01BB" and sp.tag == "TagA" and list(sp.keys) == ["k1", "k2"]
    assert sp.body_digest.type == pb.DigestType.MD5
    assert sp.body_digest.checksum == hashlib.md5(b"payload").hexdigest().upper()
    assert sp.message_type == pb.MessageType.FIFO and sp.message_group == "g1"
    assert sp.delivery_attempt == 3 and sp.receipt_handle == "handle"
    assert (sp.queue_id, sp.queue_offset) == (2, 7)
    assert sp.born_timestamp.ToMilliseconds() == 1_700_000_000_500 and sp.store_host == "10.0.0.2:10911"
    assert dict(m.user_properties) == {"color": "red"}  # system properties stay out
    timer = to_grpc_message(_stored({MessageConst.TIMER_DELIVER_MS: "1700000009000"}), None)
    assert timer.system_properties.message_type == pb.MessageType.DELAY
    assert timer.system_properties.delivery_timestamp.ToMilliseconds() == 1_700_000_009_000
    assert to_grpc_message(_stored({}), None).system_properties.message_type == pb.MessageType.NORMAL


# ---------------------------------------------------------------------- routes and settings


def test_route_queues_point_at_the_proxy_read_only_first() -> None:
    route = TopicRouteData(
        queue_datas=[
            QueueData("broker-b", read_queue_nums=3, write_queue_nums=2, perm=int(Perm.READ | Perm.WRITE)),
            QueueData("broker-a", read_queue_nums=2, write_queue_nums=2, perm=int(Perm.READ)),
            QueueData("broker-c", read_queue_nums=2, write_queue_nums=2),  # no master: left out
        ],
        broker_datas=[
            BrokerData("C", "broker-a", {0: "10.0.0.1:10911"}),
            BrokerData("C", "broker-b", {0: "10.0.0.2:10911"}),
            BrokerData("C", "broker-c", {1: "10.0.0.3:10911"}),
        ],
    )
    endpoints = pb.Endpoints(
        scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host="127.0.0.1", port=8081)]
    )
    queues = grpc_queues(pb.Resource(name="T"), route, endpoints)
    got = [(q.broker.name, q.id, q.permission) for q in queues]
    assert got == [
        ("broker-a", 0, pb.Permission.READ),
        ("broker-a", 1, pb.Permission.READ),
        ("broker-b", 0, pb.Permission.READ),
        ("broker-b", 1, pb.Permission.READ_WRITE),
        ("broker-b", 2, pb.Permission.READ_WRITE),
    ]
    assert all(q.broker.endpoints == endpoints and q.topic.name == "T" for q in queues)
    # a push consumer's share: every readable broker with a master, all its queues (-1)
    assignments = grpc_assignments(pb.Resource(name="T"), route, endpoints)
    assert [(a.message_queue.broker.name, a.message_queue.id) for a in assignments] == [
        ("broker-a", -1),
        ("broker-b", -1),
    ]


def test_settings_reply_for_producers_and_consumers() -> None:
    producer = pb.Settings(
        client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(max_body_size=1 << 27)
    )
    reply = server_settings(producer, CONFIG)
    assert reply.publishing.max_body_size == 4 * 1024 * 1024 and reply.publishing.validate_message_type
    assert reply.backoff_policy.max_attempts == 3
    assert reply.backoff_policy.exponential_backoff.initial.ToMilliseconds() == 10
    assert reply.HasField("metric") and not reply.metric.on
    consumer = pb.Settings(
        client_type=pb.ClientType.SIMPLE_CONSUMER, subscription=pb.Subscription(group=pb.Resource(name="g"))
    )
    reply = server_settings(consumer, CONFIG)
    assert reply.WhichOneof("pub_sub") == "subscription" and reply.subscription.group.name == "g"
    assert reply.subscription.receive_batch_size == 32
    assert reply.subscription.long_polling_timeout.ToMilliseconds() == 20_000
    assert reply.backoff_policy.max_attempts == 17
    delays = [d.seconds for d in reply.backoff_policy.customized_backoff.next]
    assert delays[:4] == [1, 5, 10, 30] and delays[-1] == 7200  # RocketMQ's delay levels
    assert not reply.subscription.fifo
    # the group's settings rule: FIFO and retryMaxTimes + 1 deliveries
    fifo = server_settings(consumer, CONFIG, GroupPolicy(fifo=True, max_attempts=4))
    assert fifo.subscription.fifo and fifo.backoff_policy.max_attempts == 4


# ---------------------------------------------------------------------- receive checks


def _receive(invisible_ms: int | None = 30_000, poll_ms: int | None = 20_000) -> spb.ReceiveMessageRequest:
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name="g"),
        message_queue=pb.MessageQueue(topic=pb.Resource(name="T"), broker=pb.Broker(name="broker-a")),
        batch_size=64,
        filter_expression=pb.FilterExpression(type=pb.FilterType.SQL, expression="a > 1"),
    )
    if invisible_ms is not None:
        request.invisible_duration.FromMilliseconds(invisible_ms)
    if poll_ms is not None:
        request.long_polling_timeout.FromMilliseconds(poll_ms)
    return request


def test_receive_plan_clamps_polling_and_batch() -> None:
    order = plan_receive(_receive(poll_ms=60_000), CONFIG, time_remaining_s=None)
    assert order == ReceiveOrder(
        group="g", topic="T", broker_name="broker-a", batch_size=32, invisible_ms=30_000,
        poll_ms=20_000, exp_type="SQL92", exp="a > 1", max_attempts=17,
    )  # fmt: skip
    short = plan_receive(_receive(poll_ms=100), CONFIG, time_remaining_s=None)
    assert isinstance(short, ReceiveOrder) and short.poll_ms == 5_000
    deadline = plan_receive(_receive(), CONFIG, time_remaining_s=8.0)
    assert isinstance(deadline, ReceiveOrder) and deadline.poll_ms == 7_500
    retried = _receive()
    retried.attempt_id = "a-1"  # a FIFO consumer's repeated receive
    again = plan_receive(retried, CONFIG, time_remaining_s=None)
    assert isinstance(again, ReceiveOrder) and again.attempt_id == "a-1"


@pytest.mark.parametrize(
    ("request_", "remaining", "code"),
    [
        (_receive(invisible_ms=1_000), None, pb.Code.ILLEGAL_INVISIBLE_TIME),
        (_receive(invisible_ms=None), None, pb.Code.ILLEGAL_INVISIBLE_TIME),
        (_receive(), 3.0, pb.Code.ILLEGAL_POLLING_TIME),
    ],
)
def test_receive_plan_refusals(
    request_: spb.ReceiveMessageRequest, remaining: float | None, code: int
) -> None:
    out = plan_receive(request_, CONFIG, time_remaining_s=remaining)
    assert isinstance(out, Refusal) and out.code == code
    no_group = _receive()
    no_group.group.name = ""
    refused = plan_receive(no_group, CONFIG, None)
    assert isinstance(refused, Refusal) and refused.code == pb.Code.ILLEGAL_CONSUMER_GROUP


# ---------------------------------------------------------------------- transactions


def test_transaction_id_round_trip_and_refusals() -> None:
    offset_msg_id = encode_offset_msg_id("10.0.0.2", 10911, 123456)
    tid = ProxyTransactionId(offset_msg_id, 42, "01CC")
    parsed = ProxyTransactionId.parse(str(tid))
    assert parsed == tid
    assert parsed.broker_addr() == "10.0.0.2:10911" and parsed.commit_log_offset() == 123456
    for bad in (
        "",
        "01CC",
        f"rqtx1-{offset_msg_id}-x-01CC",
        "rqtx1-nothex-1-01CC",
        f"other-{offset_msg_id}-1-0",
    ):
        assert ProxyTransactionId.parse(bad) is None, bad


def test_telemetry_hub_forwards_checks_to_a_producer_of_the_topic() -> None:
    hub = TelemetryHub()
    a: asyncio.Queue[spb.TelemetryCommand] = asyncio.Queue()
    b: asyncio.Queue[spb.TelemetryCommand] = asyncio.Queue()
    hub.publish(a, ["T1", "T2"], "")
    hub.publish(b, ["ns1%T2"], "ns1")
    message = pb.Message(topic=pb.Resource(name="T1"), body=b"x")
    assert hub.send_check_to_producer_of("T1", message, "tid") and a.qsize() == 1
    check = a.get_nowait().recover_orphaned_transaction_command
    assert (check.transaction_id, check.message.topic.name, check.message.body) == ("tid", "T1", b"x")
    assert not hub.send_check_to_producer_of("T3", message, "tid")
    hub.forget(a)
    assert not hub.send_check_to_producer_of("T1", message, "tid")
    assert hub.send_check_to_producer_of("ns1%T2", message, "tid") and b.qsize() == 1
    topic = b.get_nowait().recover_orphaned_transaction_command.message.topic
    assert (topic.resource_namespace, topic.name) == ("ns1", "T2")  # in the client's namespace


def test_namespaced_resources_are_named_as_on_the_brokers() -> None:
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(resource_namespace="ns1", name="g"),
        message_queue=pb.MessageQueue(topic=pb.Resource(resource_namespace="ns1", name="T")),
    )
    wrapped, namespace = wrap_resources(request)
    assert (
        namespace == "ns1" and wrapped.group.name == "ns1%g" and wrapped.message_queue.topic.name == "ns1%T"
    )
    assert not wrapped.group.resource_namespace and request.group.name == "g"  # the request is unchanged
    send = spb.SendMessageRequest(
        messages=[pb.Message(topic=pb.Resource(resource_namespace="ns1", name="T"))]
    )
    assert wrap_resources(send)[0].messages[0].topic.name == "ns1%T"
    plain, none = wrap_resources(spb.QueryRouteRequest(topic=pb.Resource(name="T")))
    assert (plain.topic.name, none) == ("T", "")
    twice = spb.QueryRouteRequest(topic=pb.Resource(resource_namespace="ns1", name="ns1%T"))
    assert wrap_resources(twice)[0].topic.name == "ns1%T"  # never wrapped twice
    back = unwrap("ns1%T", "ns1")
    assert (back.resource_namespace, back.name) == ("ns1", "T")
    assert to_grpc_message(_stored({}), None, "ns1").topic.name == "T"  # no prefix: kept as it is


# ---------------------------------------------------------------------- credentials


def test_authorization_header_is_parsed_as_rocketmq_does() -> None:
    header = "MQv2-HMAC-SHA1 Credential=ak1/extra, SignedHeaders=x-mq-date-time, Signature=AbC1"
    assert parse_authorization(header) == Credential("ak1", "AbC1")
    assert (
        parse_authorization("MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=00") is None
    )
    assert parse_authorization("") is None


def _signed(ak: str, sk: str, date: str = "20260101T000000Z") -> list[tuple[str, str]]:
    sig = hmac.new(sk.encode(), date.encode(), hashlib.sha1).hexdigest()
    value = f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"
    return [("authorization", value), ("x-mq-date-time", date)]


def test_grpc_acl_decides_as_plain_acl(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(
        "globalWhiteRemoteAddresses: ['10.9.*.*']\n"
        "accounts:\n"
        "  - accessKey: writer1\n    secretKey: secret1\n    defaultTopicPerm: DENY\n"
        "    defaultGroupPerm: SUB\n    topicPerms: ['T=PUB']\n"
    )
    acl = GrpcAcl(path)
    send = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="T"))])
    other = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="U"))])
    receive = spb.ReceiveMessageRequest(
        group=pb.Resource(name="g"), message_queue=pb.MessageQueue(topic=pb.Resource(name="T"))
    )
    peer = "ipv4:127.0.0.1:5555"
    assert acl.refusal(_signed("writer1", "secret1"), peer, send) is None
    # the signature's hex case does not matter
    auth, date = _signed("writer1", "secret1")
    head, _, sig = auth[1].rpartition("=")
    assert acl.refusal([(auth[0], f"{head}={sig.upper()}"), date], peer, send) is None
    assert (
        acl.refusal(_signed("writer1", "wrong"), peer, send) == "check signature failed for accessKey=writer1"
    )
    assert "no ACL account" in (acl.refusal(_signed("nobody", "secret1"), peer, send) or "")
    assert "anonymous" in (acl.refusal([], peer, send) or "")
    assert acl.refusal([], "ipv4:10.9.1.2:1", send) is None  # globally white-listed
    assert "no PUB permission on topic U" in (acl.refusal(_signed("writer1", "secret1"), peer, other) or "")
    assert "no SUB permission on topic T" in (acl.refusal(_signed("writer1", "secret1"), peer, receive) or "")
    assert required_resources(receive) == [("T", AclPerm.SUB), ("%RETRY%g", AclPerm.SUB)]


def test_tls_keys_of_rmq_proxy_json(tmp_path: Path) -> None:
    path = tmp_path / "rmq-proxy.json"
    path.write_text(json.dumps({"tls.server.mode": "permissive", "tls.server.certPath": "/x.pem"}))
    with pytest.raises(ProxyConfigError, match=r"tls.server.keyPath"):
        load_proxy_config(path, namesrv_addr="a:1")
    path.write_text(json.dumps({"tls.server.mode": "sometimes"}))
    with pytest.raises(ProxyConfigError, match=r"tls.server.mode"):
        load_proxy_config(path, namesrv_addr="a:1")
    assert load_proxy_config(None, namesrv_addr="a:1").config.tls().mode.value == "disabled"


# ---------------------------------------------------------------------- topic message types


def test_topic_attribute_changes_as_java_parses_them() -> None:
    assert merge_topic_attributes({}, "+message.type=FIFO") == {"message.type": "FIFO"}
    assert merge_topic_attributes({"message.type": "FIFO"}, "-message.type") == {}
    assert merge_topic_attributes({"message.type": "FIFO"}, None) == {"message.type": "FIFO"}
    assert "is not one of" in str(merge_topic_attributes({}, "+message.type=ORDERED"))
    assert "unsupported attribute 'queue.type'" in str(merge_topic_attributes({}, "+queue.type=BatchCQ"))
    assert "expected +key=value" in str(merge_topic_attributes({}, "message.type=FIFO"))
    assert topic_message_type({"message.type": "MIXED"}) is TopicMessageType.MIXED
    assert topic_message_type({}) is None


def test_message_type_of_an_sdk_message() -> None:
    typed = pb.Message(system_properties=pb.SystemProperties(message_type=pb.MessageType.TRANSACTION))
    assert message_type_of(typed) is TopicMessageType.TRANSACTION
    fifo = pb.Message(system_properties=pb.SystemProperties(message_group="g"))
    assert message_type_of(fifo) is TopicMessageType.FIFO
    assert message_type_of(pb.Message()) is TopicMessageType.NORMAL
    lite = pb.Message(system_properties=pb.SystemProperties(message_type=pb.MessageType.LITE))
    assert message_type_of(lite) is None


def test_queues_accept_the_topic_message_type() -> None:
    assert accepted_types(None) == ACCEPTED_TYPES
    assert accepted_types(TopicMessageType.MIXED) == ACCEPTED_TYPES
    assert accepted_types(TopicMessageType.FIFO) == (pb.MessageType.FIFO,)
    assert accepted_types(TopicMessageType.DELAY) == (pb.MessageType.DELAY,)
    route = TopicRouteData(
        queue_datas=[QueueData("b", read_queue_nums=2, write_queue_nums=2, perm=int(Perm.READ | Perm.WRITE))],
        broker_datas=[BrokerData("c", "b", {0: "127.0.0.1:1"})],
    )
    queues = grpc_queues(pb.Resource(name="T"), route, pb.Endpoints(), (pb.MessageType.FIFO,))
    assert [list(q.accept_message_types) for q in queues] == [[pb.MessageType.FIFO]] * 2
