"""Unit tests of the proxy's 5.x clients on the brokers, without servers: the language and version
the brokers are told, the HeartbeatData of a client, the relay of brokers' requests over Telemetry
(thread stacks, message verification, transaction checks; answers matched by nonce, no answer in
time), and the account the proxy signs with towards the brokers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.api import MQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.instance import ClientInstance
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import LanguageCode, RemotingCommand
from rocketq.client.remoting.message import encode_stored_message
from rocketq.client.remoting.mq_version import version_name
from rocketq.client.remoting.msgid import encode_offset_msg_id
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.vocabulary import ExpressionType, build_subscription
from rocketq.proxy.broker_auth import broker_client_config, proxy_credentials
from rocketq.proxy.client_registry import (
    GrpcClient,
    GrpcClients,
    heartbeat_data,
    metadata_of,
    remoting_language,
    remoting_version,
)
from rocketq.proxy.config import ProxyConfig, ProxyConfigError, load_proxy_config
from rocketq.proxy.telemetry_relay import TelemetryRelay, running_info_body
from rocketq.proxy.transaction import ProxyTransactionId
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb

CONFIG = ProxyConfig(namesrv_addr="127.0.0.1:9876", grpc_proxy_relay_request_timeout_in_seconds=1)


class _NoChannel:
    remote_address = "127.0.0.1:10911"


def _client(**fields: Any) -> GrpcClient:
    client = GrpcClient("host@1@0@abc", MQClientAPI("127.0.0.1:9876"), **fields)
    client.stream = asyncio.Queue()
    return client


def _consumer() -> GrpcClient:
    return _client(
        language=LanguageCode.PYTHON,
        version=remoting_version("5.1.2"),
        sdk_version="5.1.2",
        client_type=pb.ClientType.PUSH_CONSUMER,
        group="ns1%g1",
        namespace="ns1",
        subscriptions=(build_subscription("ns1%t1", "TagA||TagB", sub_version=7),),
    )


def _request(code: int, **fields: str) -> RemotingCommand:
    return RemotingCommand.request(code, fields)


# ---------------------------------------------------------------------------------- vocabulary


def test_versions_are_mqversion_ordinals_of_the_sdk_release() -> None:
    assert remoting_version("4.9.4") == 401  # rocketq's own DEFAULT_VERSION, V4_9_4
    assert remoting_version("5.0.0") == 413
    assert remoting_version("5.1.2") == 437
    assert remoting_version("5.3.3") == 479  # RocketMQ 5.3.3's CURRENT_VERSION
    # the Node.js SDK's own numbering, garbage and versions outside the regular range: V5_0_0
    for text in ("1.0.8", "", "five", "6.0.0", "4.9.3"):
        assert remoting_version(text) == 413, text
    assert [version_name(v) for v in (401, 437, 479)] == ["V4_9_4", "V5_1_2", "V5_3_3"]
    assert version_name(436) == "436" and version_name(12) == "12"  # a snapshot, an old version


def test_language_from_the_user_agent_before_the_header() -> None:
    node = pb.Settings(user_agent=pb.UA(language=pb.Language.NODE_JS))
    assert remoting_language(node, "HTTP") is LanguageCode.NODE_JS  # the Node SDK's header says HTTP
    assert remoting_language(pb.Settings(), "PYTHON") is LanguageCode.PYTHON
    assert remoting_language(None, "golang") is LanguageCode.GO
    assert (
        remoting_language(pb.Settings(user_agent=pb.UA(language=pb.Language.KOTLIN)), "")
        is LanguageCode.OTHER
    )
    assert metadata_of([("X-MQ-Client-ID", "c1"), ("bin", b"v")]) == {"x-mq-client-id": "c1", "bin": "v"}


def test_heartbeat_data_of_a_producer_and_a_consumer() -> None:
    producer = _client(producer_topics=("t1", "t2"), client_type=pb.ClientType.PRODUCER)
    assert heartbeat_data(producer) == {
        "clientID": "host@1@0@abc",
        "consumerDataSet": [],
        "producerDataSet": [{"groupName": "t1"}, {"groupName": "t2"}],
    }
    data: Any = heartbeat_data(_consumer())
    (consumer,) = data["consumerDataSet"]
    assert data["producerDataSet"] == []
    assert consumer["groupName"] == "ns1%g1" and consumer["consumeType"] == "CONSUME_PASSIVELY"
    assert (consumer["messageModel"], consumer["consumeFromWhere"]) == (
        "CLUSTERING",
        "CONSUME_FROM_LAST_OFFSET",
    )
    (sub,) = consumer["subscriptionDataSet"]
    assert (sub["topic"], sub["subString"], sub["tagsSet"], sub["subVersion"]) == (
        "ns1%t1",
        "TagA||TagB",
        ["TagA", "TagB"],
        7,
    )
    simple = _client(group="g", client_type=pb.ClientType.SIMPLE_CONSUMER)
    assert heartbeat_data(simple)["consumerDataSet"][0]["consumeType"] == "CONSUME_ACTIVELY"  # type: ignore[index]


def test_settings_register_a_client_with_namespaced_names() -> None:
    async def run() -> GrpcClient | None:
        instance = ClientInstance("127.0.0.1:1")  # nothing listens: heartbeats fail and are logged
        clients = GrpcClients(instance, CONFIG, ClientConfig())
        settings = pb.Settings(
            client_type=pb.ClientType.SIMPLE_CONSUMER,
            user_agent=pb.UA(language=pb.Language.PYTHON, version="5.1.2"),
            subscription=pb.Subscription(
                group=pb.Resource(resource_namespace="ns1", name="g1"),
                subscriptions=[
                    pb.SubscriptionEntry(
                        topic=pb.Resource(resource_namespace="ns1", name="t1"),
                        expression=pb.FilterExpression(type=pb.FilterType.SQL, expression="a > 1"),
                    )
                ],
            ),
        )
        stream: asyncio.Queue[spb.TelemetryCommand] = asyncio.Queue()
        assert clients.on_settings({}, settings, stream) is None  # no client id: nobody to register
        client = clients.on_settings({"x-mq-client-id": "c1", "x-mq-language": "PYTHON"}, settings, stream)
        first = client.subscriptions if client is not None else ()
        again = clients.on_settings({"x-mq-client-id": "c1"}, settings, stream)
        assert again is client and again is not None and again.subscriptions == first  # same version
        clients.stream_closed(stream)
        assert client is not None and client.stream is None
        clients.terminate({"x-mq-client-id": "c1"})
        assert clients.get("c1") is None
        await clients.close()
        await instance.close()
        return client

    client = asyncio.run(run())
    assert client is not None
    assert (client.group, client.namespace, client.language, client.version) == (
        "ns1%g1",
        "ns1",
        LanguageCode.PYTHON,
        437,
    )
    (sub,) = client.subscriptions
    assert (sub.topic, sub.expression_type, sub.sub_string) == ("ns1%t1", ExpressionType.SQL92, "a > 1")


# ---------------------------------------------------------------------------------- the relay


async def _answer(client: GrpcClient, relay: TelemetryRelay, reply: Any) -> spb.TelemetryCommand:
    """Take the command the relay sent the client and answer it with ``reply(nonce)``."""
    assert client.stream is not None
    sent = await asyncio.wait_for(client.stream.get(), 5)
    kind = sent.WhichOneof("command")
    assert relay.on_reply(reply(getattr(sent, kind).nonce))
    return sent


def test_running_info_without_jstack_is_answered_by_the_proxy() -> None:
    async def run() -> RemotingCommand | None:
        relay, client = TelemetryRelay(CONFIG), _consumer()
        request = _request(
            RequestCode.GET_CONSUMER_RUNNING_INFO, consumerGroup="ns1%g1", clientId=client.client_id
        )
        answer = await relay.handle(client, request, _NoChannel())  # type: ignore[arg-type]
        assert client.stream is not None and client.stream.empty()  # the client was not asked
        return answer

    answer = asyncio.run(run())
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    doc = json.loads(answer.body)
    assert doc["properties"]["PROP_CLIENT_VERSION"] == "V5_1_2"
    assert doc["properties"]["PROP_CLIENT_LANGUAGE"] == "PYTHON"
    assert doc["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert [s["topic"] for s in doc["subscriptionSet"]] == ["ns1%t1"] and "jstack" not in doc


def test_thread_stack_request_is_relayed_and_its_answer_matched_by_nonce() -> None:
    async def run() -> tuple[RemotingCommand | None, spb.TelemetryCommand, bool]:
        relay, client = TelemetryRelay(CONFIG), _consumer()
        request = _request(RequestCode.GET_CONSUMER_RUNNING_INFO, jstackEnable="true")
        pending = asyncio.ensure_future(relay.handle(client, request, _NoChannel()))  # type: ignore[arg-type]

        def reply(nonce: str) -> spb.TelemetryCommand:
            return spb.TelemetryCommand(
                status=pb.Status(code=pb.Code.OK),
                thread_stack_trace=spb.ThreadStackTrace(nonce=nonce, thread_stack_trace="main: sleeping"),
            )

        sent = await _answer(client, relay, reply)
        answer = await pending
        late = relay.on_reply(reply(sent.print_thread_stack_trace_command.nonce))
        return answer, sent, late

    answer, sent, late = asyncio.run(run())
    assert sent.print_thread_stack_trace_command.nonce
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    assert json.loads(answer.body)["jstack"] == "main: sleeping"
    assert late is False  # the same nonce a second time answers nothing


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (pb.Code.INTERNAL_ERROR, ResponseCode.SYSTEM_ERROR),
        (pb.Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED, ResponseCode.NO_PERMISSION),
    ],
)
def test_thread_stack_failure_status_becomes_javas_remoting_code(code: pb.Code, expected: int) -> None:
    async def run() -> RemotingCommand | None:
        relay, client = TelemetryRelay(CONFIG), _consumer()
        request = _request(RequestCode.GET_CONSUMER_RUNNING_INFO, jstackEnable="true")
        pending = asyncio.ensure_future(relay.handle(client, request, _NoChannel()))  # type: ignore[arg-type]
        await _answer(
            client,
            relay,
            lambda nonce: spb.TelemetryCommand(
                status=pb.Status(code=code), thread_stack_trace=spb.ThreadStackTrace(nonce=nonce)
            ),
        )
        return await pending

    answer = asyncio.run(run())
    assert answer is not None and answer.code == expected


def test_no_answer_in_time_is_system_busy_and_no_stream_is_an_error() -> None:
    async def run() -> tuple[RemotingCommand | None, RemotingCommand | None, int]:
        relay, client = TelemetryRelay(CONFIG), _consumer()
        request = _request(RequestCode.GET_CONSUMER_RUNNING_INFO, jstackEnable="true")
        silent = await relay.handle(client, request, _NoChannel())  # type: ignore[arg-type]
        client.stream = None
        gone = await relay.handle(client, request, _NoChannel())  # type: ignore[arg-type]
        return silent, gone, relay.pending

    silent, gone, pending = asyncio.run(run())
    assert silent is not None and (silent.code, silent.remark) == (
        ResponseCode.SYSTEM_BUSY,
        "call remote timeout",
    )
    assert (
        gone is not None
        and gone.code == ResponseCode.SYSTEM_ERROR
        and "no open Telemetry stream" in (gone.remark or "")
    )
    assert pending == 0  # nothing left waiting


def _stored_message(topic: str, body: bytes, **props: str) -> bytes:
    return encode_stored_message(
        topic=topic,
        queue_id=1,
        queue_offset=5,
        physical_offset=4096,
        born_timestamp=1_700_000_000_000,
        born_host=("127.0.0.1", 5555),
        store_host=("127.0.0.1", 10911),
        body=body,
        properties={MessageConst.UNIQ_KEY: "7F0000010001ABCDEF", MessageConst.TAGS: "TagA", **props},
    )


@pytest.mark.parametrize(
    ("status", "consume_result"),
    [
        (pb.Code.OK, "CR_SUCCESS"),
        (pb.Code.FAILED_TO_CONSUME_MESSAGE, "CR_LATER"),
        (pb.Code.MESSAGE_CORRUPTED, "CR_RETURN_NULL"),
    ],
)
def test_verify_message_relays_the_message_and_maps_the_result(status: pb.Code, consume_result: str) -> None:
    async def run() -> tuple[RemotingCommand | None, spb.TelemetryCommand]:
        relay, client = TelemetryRelay(CONFIG), _consumer()
        request = _request(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, consumerGroup="ns1%g1", clientId=client.client_id
        )
        request.body = _stored_message("ns1%t1", b"hello")
        pending = asyncio.ensure_future(relay.handle(client, request, _NoChannel()))  # type: ignore[arg-type]
        sent = await _answer(
            client,
            relay,
            lambda nonce: spb.TelemetryCommand(
                status=pb.Status(code=status), verify_message_result=spb.VerifyMessageResult(nonce=nonce)
            ),
        )
        return await pending, sent

    answer, sent = asyncio.run(run())
    message = sent.verify_message_command.message
    assert (message.topic.resource_namespace, message.topic.name, message.body) == ("ns1", "t1", b"hello")
    assert message.system_properties.tag == "TagA"
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    result = json.loads(answer.body)
    assert (result["consumeResult"], result["remark"]) == (consume_result, "from gRPC client")


def test_verify_message_echoed_back_unserved_is_request_code_not_supported() -> None:
    async def run() -> RemotingCommand | None:
        relay, client = TelemetryRelay(CONFIG), _consumer()
        request = _request(RequestCode.CONSUME_MESSAGE_DIRECTLY)
        request.body = _stored_message("ns1%t1", b"x")
        pending = asyncio.ensure_future(relay.handle(client, request, _NoChannel()))  # type: ignore[arg-type]
        # what the Node.js SDK 1.0.8 writes back
        await _answer(
            client,
            relay,
            lambda nonce: spb.TelemetryCommand(
                status=pb.Status(code=pb.Code.NOT_IMPLEMENTED),
                verify_message_command=spb.VerifyMessageCommand(nonce=nonce),
            ),
        )
        return await pending

    answer = asyncio.run(run())
    assert answer is not None and answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "does not verify messages (NOT_IMPLEMENTED" in (answer.remark or "")


def test_transaction_check_on_a_clients_connection_goes_to_that_client() -> None:
    offset_msg_id = encode_offset_msg_id("127.0.0.1", 10911, 4096)

    async def run() -> tuple[RemotingCommand | None, spb.TelemetryCommand]:
        relay, client = TelemetryRelay(CONFIG), _client(namespace="ns1", producer_topics=("ns1%t1",))
        request = _request(
            RequestCode.CHECK_TRANSACTION_STATE, tranStateTableOffset="5", commitLogOffset="4096"
        )
        request.body = _stored_message(
            "RMQ_SYS_TRANS_HALF_TOPIC",
            b"tx",
            **{MessageConst.REAL_TOPIC: "ns1%t1", MessageConst.PRODUCER_GROUP: "ns1%t1"},
        )
        answer = await relay.handle(client, request, _NoChannel())  # type: ignore[arg-type]
        assert client.stream is not None
        return answer, client.stream.get_nowait()

    answer, sent = asyncio.run(run())
    assert answer is None  # the broker gets no answer: the client ends the transaction itself
    command = sent.recover_orphaned_transaction_command
    assert (command.message.topic.name, command.message.body) == ("t1", b"tx")
    tid = ProxyTransactionId.parse(command.transaction_id)
    assert tid is not None and (tid.offset_msg_id, tid.tran_state_table_offset) == (offset_msg_id, 5)
    assert tid.message_id == "7F0000010001ABCDEF"


def test_running_info_body_carries_the_jstack_only_when_given() -> None:
    assert "jstack" not in json.loads(running_info_body(_client()))
    assert json.loads(running_info_body(_client(), "t1"))["jstack"] == "t1"


# ---------------------------------------------------------------------------------- ACL towards brokers


def test_the_proxy_signs_with_its_configured_account(tmp_path: Path) -> None:
    assert proxy_credentials(CONFIG, {}) is None and broker_client_config(CONFIG, {}).credentials is None
    inner = ProxyConfig(
        namesrv_addr="n:1",
        enable_acl_rpc_hook_for_cluster_mode=True,
        inner_client_authentication_credentials='{"accessKey": "proxy", "secretKey": "12345678"}',
    )
    assert proxy_credentials(inner, {}) == ("proxy", "12345678")
    creds = broker_client_config(inner, {}).credentials
    assert creds is not None and (creds.access_key, creds.secret_key) == ("proxy", "12345678")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text(
        "accessKey: tools\nsecretKey: toolsSecret\n", encoding="utf-8"
    )
    hook_only = ProxyConfig(namesrv_addr="n:1", enable_acl_rpc_hook_for_cluster_mode=True)
    assert proxy_credentials(hook_only, {"ROCKETMQ_HOME": str(tmp_path)}) == ("tools", "toolsSecret")
    with pytest.raises(ProxyConfigError, match="no account to sign with"):
        proxy_credentials(hook_only, {})
    for bad in ("not json", '{"accessKey": "a"}', "[1]"):
        broken = ProxyConfig(
            namesrv_addr="n:1",
            enable_acl_rpc_hook_for_cluster_mode=True,
            inner_client_authentication_credentials=bad,
        )
        with pytest.raises(ProxyConfigError, match="innerClientAuthenticationCredentials"):
            proxy_credentials(broken, {})


def test_rmq_proxy_json_reads_the_new_keys(tmp_path: Path) -> None:
    path = tmp_path / "rmq-proxy.json"
    keys = {
        "namesrvAddr": "127.0.0.1:9876",
        "enableAclRpcHookForClusterMode": True,
        "innerClientAuthenticationCredentials": '{"accessKey":"a","secretKey":"b"}',
        "channelExpiredTimeout": 5000,
        "grpcProxyRelayRequestTimeoutInSeconds": 3,
    }
    path.write_text(json.dumps(keys), encoding="utf-8")
    loaded = load_proxy_config(path)
    assert loaded.ignored == []
    c = loaded.config
    assert c.enable_acl_rpc_hook_for_cluster_mode and c.inner_client_authentication_credentials.startswith(
        "{"
    )
    assert (c.channel_expired_timeout, c.grpc_proxy_relay_request_timeout_in_seconds) == (5000, 3)
    with pytest.raises(ProxyConfigError, match="grpcProxyRelayRequestTimeoutInSeconds"):
        ProxyConfig(namesrv_addr="n:1", grpc_proxy_relay_request_timeout_in_seconds=0)
    with pytest.raises(ProxyConfigError, match="channelExpiredTimeout"):
        ProxyConfig(namesrv_addr="n:1", channel_expired_timeout=0)
