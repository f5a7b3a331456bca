"""Config dataclasses, Message properties, mqadmin argument handling, the background loop."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import gc
import pickle

import pytest

from rocketq.client.cli.common import parse_timestamp
from rocketq.client.cli.mqadmin import GROUPS, LISTING, build_parser, main
from rocketq.client.config import (
    AllocateStrategy,
    ClientConfig,
    CompressionType,
    ConsumeFromWhere,
    ConsumerConfig,
    MessageModel,
    ProducerConfig,
)
from rocketq.client.errors import ClientError, MQBrokerError, NoRouteError, SystemBusyError
from rocketq.client.loop import acquire_loop, release_loop
from rocketq.client.model import Message, PullResult, PullStatus
from rocketq.client.remoting.message import encode_stored_message


def test_defaults_are_rocketmqs() -> None:
    p = ProducerConfig()
    assert (p.send_msg_timeout_ms, p.retry_times_when_send_failed, p.compress_msg_body_over_howmuch) == (
        3000,
        2,
        4096,
    )
    assert p.max_message_size == 4 * 1024 * 1024 and p.compression_type is CompressionType.ZLIB
    c = ConsumerConfig(consumer_group="g")
    assert (c.pull_batch_size, c.consume_thread_nums, c.broker_suspend_max_time_ms) == (32, 20, 15000)
    assert c.message_model is MessageModel.CLUSTERING and c.allocate_strategy is AllocateStrategy.AVG
    assert ClientConfig().poll_name_server_interval_ms == 30000
    assert ClientConfig().persist_consumer_offset_interval_ms == 5000


def test_from_properties_accepts_java_names() -> None:
    c = ConsumerConfig.from_properties(
        {
            "consumerGroup": "cg",
            "pullBatchSize": "64",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
            "messageModel": "BROADCASTING",
            "instanceName": "w1",
            "pollNameServerInterval": "1000",
        }
    )
    assert c.consumer_group == "cg" and c.pull_batch_size == 64
    assert c.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert c.message_model is MessageModel.BROADCASTING
    assert c.client.instance_name == "w1" and c.client.poll_name_server_interval_ms == 1000
    p = ProducerConfig.from_properties(
        {
            "producerGroup": "pg",
            "sendMsgTimeout": "500",
            "sendLatencyFaultEnable": "true",
            "compressionType": "lz4",
        }
    )
    assert (
        p.send_msg_timeout_ms == 500
        and p.send_latency_fault_enable
        and p.compression_type is CompressionType.LZ4
    )
    with pytest.raises(ClientError, match="unknown"):
        ProducerConfig.from_properties({"noSuchKey": "1"})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"consumer_group": ""},
        {"consumer_group": "g", "pull_batch_size": 0},
        {"consumer_group": "g", "consumer_timeout_when_suspend_ms": 1000},
    ],
)
def test_consumer_config_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(ClientError):
        ConsumerConfig(**kwargs)  # type: ignore[arg-type]


def test_message_wire_properties() -> None:
    msg = Message("T", b"x", tags="A", keys=["k1", "k2"], delay_time_level=3, sharding_key="s")
    msg.put_user_property("color", "red")
    assert msg.wire_properties() == {
        "color": "red",
        "TAGS": "A",
        "KEYS": "k1 k2",
        "DELAY": "3",
        "__SHARDINGKEY": "s",
        "WAIT": "true",
    }
    with pytest.raises(ClientError):
        msg.put_user_property("TAGS", "B")
    with pytest.raises(ClientError):
        Message("T", "not bytes")  # type: ignore[arg-type]


def test_a_message_makes_its_properties_dict_on_first_access() -> None:
    msg = Message("T", b"x")
    assert not any(isinstance(o, dict) for o in gc.get_referents(msg))  # none allocated
    assert not msg.has_user_properties and msg.wire_properties() == {"WAIT": "true"}
    assert not any(isinstance(o, dict) for o in gc.get_referents(msg))  # reading the wire map made none
    assert msg.properties == {} and msg.properties is msg.properties  # made once, then kept
    msg.properties["color"] = "red"  # the dict is the message's own: writes stay
    assert msg.has_user_properties and msg.wire_properties()["color"] == "red"
    given = {"a": "b"}
    other = Message("T", b"x", properties=given)
    assert other.properties is given and other.has_user_properties


def test_a_message_is_still_a_dataclass_with_its_properties() -> None:
    msg = Message("T", b"x", tags="A", properties={"color": "red"})
    assert [f.name for f in dataclasses.fields(Message)][-1] == "properties"
    moved = dataclasses.replace(msg, topic="U")
    assert moved.topic == "U" and moved.properties == {"color": "red"} and moved.tags == "A"
    assert dataclasses.asdict(msg)["properties"] == {"color": "red"}
    assert msg == Message("T", b"x", tags="A", properties={"color": "red"}) != Message("T", b"x", tags="A")
    assert Message("T", b"x") == Message("T", b"x")  # an unread and an empty map are equal
    assert "properties={'color': 'red'}" in repr(msg)
    for copied in (pickle.loads(pickle.dumps(msg)), copy.deepcopy(msg)):
        assert copied == msg and copied.properties is not msg.properties
    with pytest.raises(AttributeError):
        msg.colour = "red"  # type: ignore[attr-defined]  # slots: a typo fails loudly
    with pytest.raises(ClientError, match="topic"):
        Message("", b"x")
    with pytest.raises(ClientError, match="delay_time_level"):
        Message("T", b"x", delay_time_level=300)
    assert Message("T", bytearray(b"y")).body == b"y" and type(Message("T", memoryview(b"z")).body) is bytes


def test_pull_result_decodes_lazily_once() -> None:
    body = b"".join(
        encode_stored_message(
            topic="T",
            queue_id=0,
            born_timestamp=1,
            born_host=("1.2.3.4", 1),
            store_host=("1.2.3.4", 2),
            body=b"b%d" % i,
            queue_offset=i,
            properties={"TAGS": "A" if i else "B"},
        )
        for i in range(3)
    )
    result = PullResult(PullStatus.FOUND, 3, 0, 3, body=body, tags_filter=frozenset({"A"}))
    assert [m.queue_offset for m in result.messages] == [1, 2]
    assert result.messages is result.messages
    assert PullResult(PullStatus.NO_NEW_MSG, 3, 0, 3).messages == []


def test_error_classes_carry_code_and_remark() -> None:
    err = MQBrokerError.for_code(2, "[REJECTREQUEST]system busy", "10.0.0.1:10911")
    assert isinstance(err, SystemBusyError) and err.retriable and err.code == 2
    assert "CODE: 2 DESC: [REJECTREQUEST]system busy" in str(err)
    assert not MQBrokerError.for_code(13, "bad").retriable
    assert MQBrokerError.for_code(9999, None).remark == ""
    assert "No route info of this topic: X" in str(NoRouteError("X"))


def test_mqadmin_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["topicRoute", "-n", "127.0.0.1:9876"])  # -t missing
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["updateTopic", "-n", "127.0.0.1:9876", "-t", "T"])  # neither -c nor -b
    assert exit_info.value.code == 2
    assert "updateTopic" in build_parser().format_help()


def test_mqadmin_failure_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topicList", "-n", "127.0.0.1:1"]) == 1
    assert capsys.readouterr().err.startswith("Error: topicList failed:")


def test_parse_timestamp() -> None:
    assert parse_timestamp("1700000000000") == 1700000000000
    assert parse_timestamp("2026-01-01#00:00:00:000") == parse_timestamp("2026-01-01")


def test_shared_loop_is_refcounted_and_refuses_reentry() -> None:
    a = acquire_loop()
    b = acquire_loop()
    assert a is b
    assert a.run(asyncio.sleep(0, "x")) == "x"

    async def reenter() -> None:
        a.run(asyncio.sleep(0))

    with pytest.raises(ClientError):
        a.run(reenter())
    release_loop(b)
    assert a.is_running()
    release_loop(a)
    a._thread.join(5)
    assert not a.is_running()


def test_mqadmin_lists_every_command_of_its_groups_once() -> None:
    names = [name for group in GROUPS for name in group.commands]
    assert sorted(names) == sorted(LISTING) and len(set(LISTING)) == len(LISTING)
    helps = build_parser().format_help()
    assert all(name in helps for name in LISTING)
