"""SEND_MESSAGE with timer properties and RECALL_MESSAGE, in one process: a real BrokerController on
a real store, spoken to over TCP (the answers, their codes and remarks, what is stored where)."""

from __future__ import annotations

import time
from pathlib import Path

from rocketq.broker.server import BrokerController
from rocketq.broker.testing import run_broker
from rocketq.client.remoting.batch import encode_batch
from rocketq.client.remoting.codes import RequestCode as RC
from rocketq.client.remoting.codes import ResponseCode as R
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import RecallMessageRequestHeader
from rocketq.client.remoting.message import decode_stored_message
from rocketq.client.remoting.properties import encode_properties
from rocketq.client.remoting.recall_handle import build_recall_handle, decode_recall_handle
from rocketq.client.remoting.vocabulary import TIMER_TOPIC
from rocketq.client.testing import send_header
from rocketq.client.transport.aio import RemotingClient


def send_request(props: dict[str, str], topic: str = "T1", *, batch: bytes | None = None) -> RemotingCommand:
    header = send_header(topic, queue_id=1, properties=encode_properties(props), default_topic_queue_nums=4)
    if batch is not None:
        header = header.replace(batch=True)
        return RemotingCommand.request(RC.SEND_BATCH_MESSAGE, header.to_ext_fields(), batch)
    return RemotingCommand.request(RC.SEND_MESSAGE_V2, header.to_ext_fields(), b"body")


def recall_request(handle: str, topic: str = "T1") -> RemotingCommand:
    fields = RecallMessageRequestHeader(
        producer_group="pg", topic=topic, recall_handle=handle
    ).to_ext_fields()
    return RemotingCommand.request(RC.RECALL_MESSAGE, fields)


def timer_topic_properties(c: BrokerController) -> list[dict[str, str]]:
    assert c.store.wait_dispatched()
    g = c.store.get_message("g", TIMER_TOPIC, 0, 0, 32, 1 << 20)
    try:
        return [decode_stored_message(b).properties for b in g.buffers]
    finally:
        g.release()


def test_timer_send_answers_and_recall_checks(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        r = await client.invoke(addr, send_request({"TIMER_DELAY_SEC": "30", "UNIQ_KEY": "U1"}), 5000)
        assert r.code == R.SUCCESS
        handle = decode_recall_handle(r.ext_fields["recallHandle"])
        assert (handle.topic, handle.broker_name, handle.message_id) == ("T1", c.config.broker_name, "U1")
        [stored] = timer_topic_properties(c)
        assert stored["REAL_TOPIC"] == "T1" and stored["REAL_QID"] == "1"
        assert int(handle.timestamp) == int(stored["TIMER_OUT_MS"]) + 1

        r = await client.invoke(addr, send_request({"TIMER_DELAY_SEC": "100000000"}), 5000)
        assert r.code == R.MESSAGE_ILLEGAL and "timer message illegal" in (r.remark or "")
        r = await client.invoke(addr, send_request({"TIMER_DELIVER_MS": "1"}), 5000)  # past: plain message
        assert r.code == R.SUCCESS and "recallHandle" not in r.ext_fields
        batch = encode_batch([(0, b"a", {"TIMER_DELAY_SEC": "30"})])
        r = await client.invoke(addr, send_request({}, batch=batch), 5000)
        assert r.code == R.SUCCESS and "recallHandle" not in r.ext_fields

        r_handle = build_recall_handle("T1", c.config.broker_name, handle.timestamp, "U1")
        for bad, remark in (
            ("???", "recall handle is invalid"),
            (build_recall_handle("T2", c.config.broker_name, handle.timestamp, "U1"), "topic not match"),
            (build_recall_handle("T1", "other-broker", handle.timestamp, "U1"), "not available"),
            (build_recall_handle("T1", c.config.broker_name, int(time.time() * 1000) - 5, "U1"), "timestamp"),
        ):
            r = await client.invoke(addr, recall_request(bad), 5000)
            assert r.code == R.ILLEGAL_OPERATION and remark in (r.remark or ""), (bad, r.remark)
        r = await client.invoke(addr, recall_request(r_handle, topic="NoSuchTopic"), 5000)
        assert r.code == R.TOPIC_NOT_EXIST
        r = await client.invoke(addr, recall_request(r_handle), 5000)
        assert r.code == R.SUCCESS and r.ext_fields["msgId"] == "U1"
        tomb = timer_topic_properties(c)[-1]
        assert tomb["TIMER_DEL_UNIQKEY"] == "T1+U1" and tomb["TAGS"] == "_RECALL_TAG_"
        assert tomb["TIMER_OUT_MS"] == stored["TIMER_OUT_MS"]  # the recalled message's slot

    run_broker(tmp_path, scenario, recallMessageEnable="true")


def test_recall_disabled_and_wheel_disabled(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        r = await client.invoke(addr, send_request({"TIMER_DELAY_SEC": "30"}), 5000)
        assert r.code == R.SYSTEM_ERROR and "timerWheelEnable is false" in (r.remark or "")
        r = await client.invoke(addr, send_request({"KEYS": "k"}), 5000)
        assert r.code == R.SUCCESS
        handle = build_recall_handle("T1", c.config.broker_name, int(time.time() * 1000) + 60_000, "U")
        r = await client.invoke(addr, recall_request(handle), 5000)
        assert r.code == R.NO_PERMISSION and "recallMessageEnable=false" in (r.remark or "")

    run_broker(tmp_path, scenario, timerWheelEnable="false")
