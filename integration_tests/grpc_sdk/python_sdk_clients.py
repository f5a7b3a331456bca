# mypy: ignore-errors
"""Runs in the Python SDK's own venv: a Producer and a SimpleConsumer that stay connected to
rocketq's gRPC proxy until told to stop, so the test can look at them from the brokers' side.

Usage: python python_sdk_clients.py PROXY_ADDR TOPIC GROUP

Prints {"producer": clientId, "consumer": clientId} once both are up (after one receive), then
waits for a line on stdin: "shutdown" stops both clients (NotifyClientTermination) and prints
"stopped"; end of input leaves without stopping them.
"""

import json
import sys

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Producer, SimpleConsumer


def main():
    addr, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
    config = ClientConfiguration(addr, Credentials())
    producer = Producer(config, (topic,))
    producer.startup()
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("TagA||TagB")}, await_duration=1)
    consumer.startup()
    consumer.receive(16, 15)
    print(json.dumps({"producer": producer.client_id, "consumer": consumer.client_id}), flush=True)
    if sys.stdin.readline().strip() == "shutdown":
        producer.shutdown()
        consumer.shutdown()
        print("stopped", flush=True)


if __name__ == "__main__":
    main()
