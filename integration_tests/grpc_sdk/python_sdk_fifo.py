# mypy: ignore-errors
"""Runs in the Python SDK's own venv: FIFO consumption through rocketq's gRPC proxy, printed as one
JSON object on the last line of stdout.

Usage: python python_sdk_fifo.py PROXY_ADDR TOPIC GROUP

GROUP is a FIFO group (``mqadmin updateSubGroup -o true``).  A SimpleConsumer of GROUP starts (one
empty receive fixes its start offsets), then a Producer sends four messages to each of the message
groups A, B and C, interleaved (A-0, B-0, C-0, A-1, ...).  The consumer receives one message at a
time, invisible for 3 s, and acks every delivery except the first delivery of A-1, which it lets
time out.  It stops once all twelve are acked (at most 90 s) and prints every delivery in order.
"""

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer


def main():
    addr, topic, group = sys.argv[1:4]
    config = ClientConfiguration(addr, Credentials())
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=1)
    consumer.startup()
    consumer.receive(1, 3)
    producer = Producer(config, (topic,))
    producer.startup()
    for i in range(4):
        for g in "ABC":
            m = Message()
            m.topic = topic
            m.body = f"{g}-{i}".encode()
            m.message_group = g
            producer.send(m)
    producer.shutdown()

    deliveries, acked, failed = [], set(), False
    deadline = time.time() + 90
    while len(acked) < 12 and time.time() < deadline:
        for m in consumer.receive(1, 3):
            body = m.body.decode()
            deliveries.append({"body": body, "group": m.message_group, "attempt": m.delivery_attempt})
            if body == "A-1" and not failed:
                failed = True
                continue  # failed: not acked, comes back after 3 s
            consumer.ack(m)
            acked.add(body)
    consumer.shutdown()
    print(json.dumps({"deliveries": deliveries, "acked": sorted(acked)}))


if __name__ == "__main__":
    main()
