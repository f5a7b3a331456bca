"""The proxy's Prometheus metrics (docs/observability.md "Proxy metrics") after real SDK traffic.

One ``mqnamesrv``, one ``mqbroker`` and an ``mqproxy`` with ``metricsExporterType=PROM`` on a
free port.  The official Python SDK (its own venv, built by test_grpc_python_sdk's fixture) sends
messages one at a time, receives and acks them all, and prints how many calls it made; rocketq's
own stubs send once to an unknown topic.  The scrape must show ``rocketmq_proxy_up``, and
``rocketmq_rpc_latency`` with ``protocol_type="grpc"``, the method as ``request_code`` and the
status code's name as ``response_code``, counting exactly the calls made.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import grpc
import pytest

from rocketq.client.launcher import spawn_proxy
from rocketq.client.testing import create_topic, spawn_broker, spawn_namesrv
from rocketq.client.testing.metrics import Samples, parse_samples, total
from rocketq.proxy.config import ProxyConfigError, load_proxy_config
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb
from rocketq.proxy.v2.service_pb2_grpc import MessagingServiceStub

COUNT = 12
SCRIPT = """
import json, sys
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

addr, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = ClientConfiguration(addr, Credentials(), request_timeout=10)
producer = Producer(config, (topic,))
producer.startup()
for i in range(count):
    m = Message()
    m.topic, m.body = topic, f"m-{i}".encode()
    producer.send(m)
producer.shutdown()
consumer = SimpleConsumer(config, "g-metrics", {topic: FilterExpression()}, await_duration=1)
consumer.startup()
acked = receives = 0
while acked < count and receives < 60:
    receives += 1
    for message in consumer.receive(32, 15):
        consumer.ack(message)
        acked += 1
consumer.shutdown()
print(json.dumps({"acked": acked, "receives": receives}))
"""


def _scrape(addr: str) -> Samples:
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as response:
        return parse_samples(response.read().decode())


def test_proxy_metrics_count_the_sdk_calls(tmp_path: Path, sdk_python: Path) -> None:
    script = tmp_path / "sdk_metrics.py"
    script.write_text(SCRIPT)
    with spawn_namesrv(tmp_path / "ns") as ns, spawn_broker(tmp_path, ns.addr):
        create_topic(ns.addr, "metrics-grpc", 2)
        with spawn_proxy(
            tmp_path / "proxy",
            ns.addr,
            metricsExporterType="PROM",
            metricsPromExporterPort=0,
            proxyName="proxy-under-test",
            grpcClientConsumerMinLongPollingTimeoutMillis=1000,
            grpcClientConsumerMaxLongPollingTimeoutMillis=1000,
        ) as px:
            addr = px.metrics_addr
            assert addr, f"no metrics exporter line in the proxy log:\n{px.log_tail()}"
            with grpc.insecure_channel(px.addr) as channel:
                answer = MessagingServiceStub(channel).SendMessage(  # type: ignore[no-untyped-call]
                    spb.SendMessageRequest(
                        messages=[pb.Message(topic=pb.Resource(name="no-such-topic"), body=b"x")]
                    ),
                    timeout=30,
                )
            assert answer.status.code == pb.Code.TOPIC_NOT_FOUND
            run = subprocess.run(
                [str(sdk_python), str(script), px.addr, "metrics-grpc", str(COUNT)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert run.returncode == 0, f"{run.stderr[-3000:]}\nproxy log:\n{px.log_tail()}"
            out = json.loads(run.stdout.strip().splitlines()[-1])
            assert out["acked"] == COUNT
            samples = _scrape(addr)

    node = {"node_type": "proxy", "node_id": "proxy-under-test", "cluster": "DefaultCluster"}
    assert total(samples, "rocketmq_proxy_up", proxy_mode="cluster", **node) == 1
    assert total(samples, "rocketq_proxy_receive_in_flight", **node) == 0

    def calls(method: str, code: str | None = None) -> float:
        labels = {"protocol_type": "grpc", "request_code": method, **node}
        if code is not None:
            labels["response_code"] = code
        return total(samples, "rocketmq_rpc_latency_count", **labels)

    assert calls("SendMessage", "OK") == COUNT
    assert calls("SendMessage", "TOPIC_NOT_FOUND") == 1
    assert calls("SendMessage") == COUNT + 1
    assert calls("AckMessage", "OK") == COUNT  # the SDK acks one message per call
    assert calls("ReceiveMessage") == out["receives"]
    assert calls("ReceiveMessage", "OK") >= 1
    assert calls("QueryRoute", "OK") >= 1
    # every call lands in a bucket: the +Inf bucket equals the count
    inf = total(samples, "rocketmq_rpc_latency_bucket", request_code="SendMessage", le="+Inf", **node)
    assert inf == COUNT + 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"metricsExporterType": "OTLP_GRPC"}, "not supported by rocketq; use PROM"),
        ({"metricsExporterType": "PROMETHEUS"}, "must be DISABLE or PROM"),
        ({"metricsPromExporterPort": 70000}, "metricsPromExporterPort must be 0..65535"),
    ],
)
def test_bad_metrics_keys_are_refused(tmp_path: Path, value: dict[str, object], message: str) -> None:
    conf = tmp_path / "rmq-proxy.json"
    conf.write_text(json.dumps({"namesrvAddr": "127.0.0.1:9876", **value}))
    with pytest.raises(ProxyConfigError, match=message):
        load_proxy_config(conf)
