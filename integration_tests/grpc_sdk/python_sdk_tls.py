# mypy: ignore-errors
"""Runs in the Python SDK's own venv: one send and receive through rocketq's gRPC proxy, over TLS
or plaintext, printed as one JSON object on the last line of stdout.

Usage: python python_sdk_tls.py PROXY_ADDR TOPIC GROUP tls|plain [AWAIT_S [PAD_BYTES]]

With ``tls`` the clients use ``tls_enable=True`` (gRPC checks the server's certificate against
the roots named by GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).  A SimpleConsumer of GROUP subscribes to
TOPIC (one receive), a Producer sends one message ("over-<mode>", then PAD_BYTES dots) and the
consumer receives it; the bodies are printed without their padding, with their lengths.
"""

import json
import sys

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer


def main():
    addr, topic, group, mode = sys.argv[1:5]
    await_s = int(sys.argv[5]) if len(sys.argv) > 5 else 1  # the receive's long polling
    pad = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    tls = mode == "tls"
    config = ClientConfiguration(addr, Credentials())
    consumer = SimpleConsumer(
        config, group, {topic: FilterExpression()}, await_duration=await_s, tls_enable=tls
    )
    consumer.startup()
    consumer.receive(16, 15)  # fixes the group's start offsets
    producer = Producer(config, (topic,), tls_enable=tls)
    producer.startup()
    m = Message()
    m.topic = topic
    m.body = f"over-{mode}".encode() + b"." * pad
    sent = producer.send(m).message_id
    producer.shutdown()
    got, sizes = [], []
    for _ in range(5):
        for r in consumer.receive(16, 15):
            consumer.ack(r)
            got.append(r.body.decode().rstrip("."))
            sizes.append(len(r.body))
        if got:
            break
    consumer.shutdown()
    print(json.dumps({"sent": sent, "received": got, "sizes": sizes}))


if __name__ == "__main__":
    main()
