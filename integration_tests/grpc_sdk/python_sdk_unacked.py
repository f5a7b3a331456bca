# mypy: ignore-errors
"""Runs in the Python SDK's own venv: a message a SimpleConsumer neither acks nor changes comes back
once its invisible duration is over, printed as one JSON object on the last line of stdout.

Usage: python python_sdk_unacked.py PROXY_ADDR TOPIC GROUP

A SimpleConsumer of GROUP subscribes to TOPIC (one receive fixes its start offsets), a Producer
sends "unacked"; the consumer receives with a 3 s invisible duration and leaves the message alone
until it is delivered a second time (at most 30 s), then acks it.
"""

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer


def main():
    addr, topic, group = sys.argv[1:4]
    config = ClientConfiguration(addr, Credentials())
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=2)
    consumer.startup()
    try:
        consumer.receive(16, 15)  # fixes the group's start offsets
        producer = Producer(config, (topic,))
        producer.startup()
        try:
            m = Message()
            m.topic, m.body = topic, b"unacked"
            sent = producer.send(m).message_id
        finally:
            producer.shutdown()
        deliveries = []
        deadline = time.monotonic() + 30
        while len(deliveries) < 2 and time.monotonic() < deadline:
            for r in consumer.receive(16, 3):
                deliveries.append(
                    {"body": r.body.decode(), "id": r.message_id, "attempt": r.delivery_attempt,
                     "at_ms": int(time.time() * 1000)}
                )  # fmt: skip
                if len(deliveries) >= 2:
                    consumer.ack(r)
    finally:
        consumer.shutdown()
    print(json.dumps({"sent": sent, "deliveries": deliveries}))


if __name__ == "__main__":
    main()
