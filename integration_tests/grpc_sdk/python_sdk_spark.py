# mypy: ignore-errors
"""Runs in the Python SDK's own venv: the SDK's half of the hand-over with the Spark connector,
through rocketq's gRPC proxy.

Usage: python python_sdk_spark.py produce PROXY_ADDR TOPIC
       python python_sdk_spark.py consume PROXY_ADDR TOPIC GROUP N

``produce`` sends three normal messages ("sdk-normal-<i>", tag TagS, keys "ka-<i>" and "kb-<i>",
user property p=<i>) and eight FIFO messages of message groups G1 and G2 sent in turn
("fifo-G1-0", "fifo-G2-0", ... tag TagF), and prints {"sent": [{"body", "id"}, ...]}.

``consume`` starts a SimpleConsumer of GROUP on TOPIC (one receive fixes its start offsets),
prints the line PHASE=ready, waits for a line on stdin (at most 120 s), then receives and acks
until N messages came (at most 60 s), receives once more (nothing acked comes back) and prints
{"received": [...], "late": [...]} as the last line.
"""

import json
import select
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer


def produce(addr, topic):
    producer = Producer(ClientConfiguration(addr, Credentials()), (topic,))
    producer.startup()
    sent = []
    try:
        plan = []
        for i in range(3):
            m = Message()
            m.topic, m.body, m.tag = topic, f"sdk-normal-{i}".encode(), "TagS"
            m.keys = f"ka-{i}"  # the SDK's setter adds a key at each assignment
            m.keys = f"kb-{i}"
            m.add_property("p", str(i))
            plan.append(m)
        for i in range(4):
            for group in ("G1", "G2"):
                m = Message()
                m.topic, m.body, m.tag = topic, f"fifo-{group}-{i}".encode(), "TagF"
                m.message_group = group
                plan.append(m)
        for m in plan:
            sent.append({"body": m.body.decode(), "id": producer.send(m).message_id})
    finally:
        producer.shutdown()
    print(json.dumps({"sent": sent}))


def view(m):
    return {
        "body": m.body.decode(),
        "id": m.message_id,
        "tag": m.tag,
        "keys": sorted(m.keys or []),
        "props": dict(m.properties or {}),
        "attempt": m.delivery_attempt,
    }


def consume(addr, topic, group, n):
    config = ClientConfiguration(addr, Credentials())
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=2)
    consumer.startup()
    try:
        consumer.receive(16, 15)  # fixes the group's start offsets
        print("PHASE=ready", flush=True)
        select.select([sys.stdin], [], [], 120)
        received = []
        deadline = time.monotonic() + 60
        while len(received) < n and time.monotonic() < deadline:
            for m in consumer.receive(16, 15):
                received.append(view(m))
                consumer.ack(m)
        late = [view(m) for m in consumer.receive(16, 15)]
    finally:
        consumer.shutdown()
    print(json.dumps({"received": received, "late": late}))


def main():
    if sys.argv[1] == "produce":
        produce(sys.argv[2], sys.argv[3])
    else:
        consume(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))


if __name__ == "__main__":
    main()
