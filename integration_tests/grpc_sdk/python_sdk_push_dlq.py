# mypy: ignore-errors
"""Runs in the Python SDK's own venv: a PushConsumer whose listener fails a message at every
delivery, through rocketq's gRPC proxy.

Usage: python python_sdk_push_dlq.py PROXY_ADDR TOPIC GROUP MAX_ATTEMPTS

A PushConsumer of GROUP on TOPIC starts, a Producer sends "pdlq-ok" and "pdlq-dead"; the listener
takes pdlq-ok and fails pdlq-dead (the SDK makes it invisible for the server's back-off, then it
comes back with the next delivery attempt).  Once pdlq-ok came and pdlq-dead came MAX_ATTEMPTS
times (at most 60 s), the line PHASE=consumed is printed; the consumer keeps receiving (what moves
pdlq-dead to %DLQ%GROUP) until a line arrives on stdin (at most 60 s), then shuts down and prints
{"sent": {...}, "deliveries": [...]} as the last line.
"""

import json
import select
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
)


class Listener(MessageListener):
    def __init__(self):
        self.deliveries = []
        self.lock = threading.Lock()

    def consume(self, message):
        body = message.body.decode()
        with self.lock:
            self.deliveries.append(
                {"body": body, "id": message.message_id, "attempt": message.delivery_attempt}
            )
        return ConsumeResult.FAILURE if body == "pdlq-dead" else ConsumeResult.SUCCESS

    def count(self, body):
        with self.lock:
            return sum(d["body"] == body for d in self.deliveries)


def main():
    addr, topic, group, max_attempts = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    config = ClientConfiguration(addr, Credentials())
    listener = Listener()
    consumer = PushConsumer(config, group, listener, {topic: FilterExpression()})
    consumer.startup()
    sent = {}
    try:
        producer = Producer(config, (topic,))
        producer.startup()
        try:
            for body in ("pdlq-ok", "pdlq-dead"):
                m = Message()
                m.topic, m.body = topic, body.encode()
                sent[body] = producer.send(m).message_id
        finally:
            producer.shutdown()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            listener.count("pdlq-ok") and listener.count("pdlq-dead") >= max_attempts
        ):
            time.sleep(0.2)
        print("PHASE=consumed", flush=True)
        select.select([sys.stdin], [], [], 60)
    finally:
        consumer.shutdown()
    with listener.lock:
        print(json.dumps({"sent": sent, "deliveries": listener.deliveries}))


if __name__ == "__main__":
    main()
