"""Concurrent gRPC sends leave the proxy as batches (proxy/send_coalescer.py), against real
``mqnamesrv``, ``mqbroker`` and ``mqproxy`` processes.

Many SendMessage calls in flight at once over rocketq's own gRPC stubs: every answer is OK with
the message's own id and the queue offset it was stored at, the broker saw SEND_BATCH_MESSAGE
requests, and a remoting consumer reads each message back at that offset with its tag, keys and
user property, as single sends store them.
"""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import grpc

from rocketq.client.config import ConsumeFromWhere
from rocketq.client.consumer import LitePullConsumer
from rocketq.client.launcher import spawn_proxy
from rocketq.client.testing import create_topic, drain, spawn_broker, spawn_namesrv
from rocketq.client.testing.metrics import parse_samples, total
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb
from rocketq.proxy.v2.service_pb2_grpc import MessagingServiceStub

COUNT = 300
TOPIC = "grpc-batches"


def _request(i: int) -> spb.SendMessageRequest:
    message = pb.Message(
        topic=pb.Resource(name=TOPIC), body=f"body-{i}".encode(), user_properties={"p": str(i)}
    )
    sp = message.system_properties
    sp.message_id, sp.tag = f"01{i:030X}", f"T{i % 3}"
    sp.keys.append(f"k{i}")
    return spb.SendMessageRequest(messages=[message])


async def _send_all(addr: str) -> list[spb.SendMessageResponse]:
    async with grpc.aio.insecure_channel(addr) as channel:
        stub = MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        answers: list[spb.SendMessageResponse] = await asyncio.gather(
            *(stub.SendMessage(_request(i), timeout=60) for i in range(COUNT))
        )
        return answers


def test_concurrent_sends_are_stored_as_single_sends_store_them(tmp_path: Path) -> None:
    with (
        spawn_namesrv(tmp_path / "ns") as ns,
        spawn_broker(tmp_path, ns.addr, metricsExporterType="PROM", metricsPromExporterPort=0) as broker,
    ):
        create_topic(ns.addr, TOPIC, 4)
        with spawn_proxy(tmp_path / "proxy", ns.addr) as px:
            answers = asyncio.run(_send_all(px.addr))
        assert broker.metrics_addr is not None
        with urllib.request.urlopen(f"http://{broker.metrics_addr}/metrics", timeout=10) as response:
            samples = parse_samples(response.read().decode())
        # the broker saw SEND_BATCH_MESSAGE (320) requests: the proxy batched
        assert total(samples, "rocketmq_rpc_latency_count", request_code="320") > 0
        assert [a.status.code for a in answers] == [pb.Code.OK] * COUNT
        offsets = {a.entries[0].message_id: a.entries[0].offset for a in answers}
        assert list(offsets) == [f"01{i:030X}" for i in range(COUNT)]
        consumer = LitePullConsumer(
            ns.addr,
            consumer_group="cg-grpc-batches",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.assign(sorted(consumer.fetch_message_queues(TOPIC)))
        consumer.start()
        try:
            stored = drain(consumer, COUNT, timeout_s=30)
        finally:
            consumer.shutdown()
    assert len(stored) == COUNT
    for m in stored:
        i = int(m.body.decode().removeprefix("body-"))
        assert m.msg_id == f"01{i:030X}"
        assert offsets[m.msg_id] == m.queue_offset
        assert (m.tags, m.keys, m.properties.get("p")) == (f"T{i % 3}", [f"k{i}"], str(i))
