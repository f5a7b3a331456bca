# mypy: ignore-errors
"""Runs in the Python SDK's own venv: sends to a topic with message.type=FIFO through rocketq's gRPC
proxy, printed as one JSON object on the last line of stdout.

Usage: python python_sdk_types.py PROXY_ADDR TOPIC

A Producer sends a FIFO message (message group "g1") and a normal one; each result is the message
id or the error the SDK raised.
"""

import json
import sys

from rocketmq import ClientConfiguration, Credentials, Message, Producer


def attempt(producer, message):
    try:
        return {"ok": True, "value": producer.send(message).message_id}
    except Exception as exc:  # the SDK's errors carry the status code and message
        return {"ok": False, "error": str(exc)}


def main():
    addr, topic = sys.argv[1:3]
    producer = Producer(ClientConfiguration(addr, Credentials()), (topic,))
    producer.startup()
    fifo, normal = Message(), Message()
    for m, body in ((fifo, b"typed-fifo"), (normal, b"typed-normal")):
        m.topic = topic
        m.body = body
    fifo.message_group = "g1"
    out = {"fifo": attempt(producer, fifo), "normal": attempt(producer, normal)}
    producer.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
