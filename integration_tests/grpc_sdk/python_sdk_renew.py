# mypy: ignore-errors
"""Runs in the Python SDK's own venv: PushConsumers whose listener runs longer than the proxy's
defaultInvisibleTimeMills, to show the proxy renewing (or, when it is told not to, not renewing)
the receipt handles of their receives.

Usage: python python_sdk_renew.py PROXY_ADDR SLEEP_S QUIET_S TOPIC:GROUP [TOPIC:GROUP ...]

For each TOPIC:GROUP a PushConsumer starts, then one message "slow-<topic>" is sent to the topic.
The listener sleeps SLEEP_S seconds on the message's first delivery and returns SUCCESS (the SDK
then acks it); any later delivery is recorded and returns SUCCESS at once.  After the first
delivery's listener returned, the consumers stay QUIET_S seconds more, long enough for an un-acked
message to come back.  Prints {"deliveries": [{topic, body, attempt, at_s}...]} as one JSON line.
"""

import json
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


class SlowListener(MessageListener):
    def __init__(self, sleep_s, started):
        self.sleep_s = sleep_s
        self.started = started
        self.seen = []
        self.finished = threading.Event()
        self.lock = threading.Lock()

    def consume(self, message):
        with self.lock:
            self.seen.append(
                {
                    "topic": message.topic,
                    "body": message.body.decode(),
                    "attempt": message.delivery_attempt,
                    "at_s": round(time.monotonic() - self.started, 2),
                }
            )
        if message.delivery_attempt == 1:
            time.sleep(self.sleep_s)
            self.finished.set()
        return ConsumeResult.SUCCESS


def main():
    addr, sleep_s, quiet_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    pairs = [arg.split(":", 1) for arg in sys.argv[4:]]
    config = ClientConfiguration(addr, Credentials())
    started = time.monotonic()
    consumers, listeners = [], []
    producer = Producer(config, tuple(topic for topic, _ in pairs))
    producer.startup()
    try:
        for topic, group in pairs:
            listener = SlowListener(sleep_s, started)
            push = PushConsumer(config, group, listener, {topic: FilterExpression()})
            push.startup()
            consumers.append(push)
            listeners.append(listener)
        time.sleep(2)  # the consumers' first receives fix the groups' start offsets
        for topic, _ in pairs:
            m = Message()
            m.topic = topic
            m.body = f"slow-{topic}".encode()
            if "fifo" in topic:
                m.message_group = "mg-1"
            producer.send(m)
        for listener in listeners:
            listener.finished.wait(sleep_s + 30)
        time.sleep(quiet_s)
    finally:
        for push in consumers:
            push.shutdown()
        producer.shutdown()
    deliveries = [seen for listener in listeners for seen in listener.seen]
    print(json.dumps({"deliveries": deliveries}), flush=True)


if __name__ == "__main__":
    main()
