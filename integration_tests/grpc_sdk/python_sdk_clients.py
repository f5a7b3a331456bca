# mypy: ignore-errors
"""Runs in the Python SDK's own venv: a Producer, a SimpleConsumer and (with PUSH_GROUP) a
PushConsumer that stay connected to rocketq's gRPC proxy until told to stop, so the test can look
at them from the brokers' side.

Usage: python python_sdk_clients.py PROXY_ADDR TOPIC GROUP [PUSH_GROUP]

Prints {"producer": clientId, "consumer": clientId, "push": clientId or null} once all are up
(after one receive), then waits for a line on stdin: "shutdown" stops the clients
(NotifyClientTermination) and prints "stopped"; end of input leaves without stopping them.
"""

import json
import sys

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
)


class Listener(MessageListener):
    def consume(self, message):
        return ConsumeResult.SUCCESS


def main():
    addr, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
    push_group = sys.argv[4] if len(sys.argv) > 4 else None
    config = ClientConfiguration(addr, Credentials())
    producer = Producer(config, (topic,))
    producer.startup()
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("TagA||TagB")}, await_duration=1)
    consumer.startup()
    consumer.receive(16, 15)
    push = None
    if push_group:
        push = PushConsumer(config, push_group, Listener(), {topic: FilterExpression("TagP")})
        push.startup()
    ids = {"producer": producer.client_id, "consumer": consumer.client_id, "push": push and push.client_id}
    print(json.dumps(ids), flush=True)
    if sys.stdin.readline().strip() == "shutdown":
        producer.shutdown()
        consumer.shutdown()
        if push is not None:
            push.shutdown()
        print("stopped", flush=True)


if __name__ == "__main__":
    main()
