# mypy: ignore-errors
"""Runs in the Python SDK's own venv: 5.x credentials against rocketq's gRPC proxy with enableACL,
printed as one JSON object on the last line of stdout.

Usage: python python_sdk_acl.py PROXY_ADDR TOPIC GROUP CASES_JSON [tls]

With ``tls`` the clients use ``tls_enable=True`` (gRPC checks the server's certificate against the
roots named by GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).
CASES_JSON maps a case name to [accessKey, secretKey] ("" and "": no credentials).  For each case a
SimpleConsumer of GROUP subscribes to TOPIC (one receive), a Producer sends one message there and
the consumer receives; each step's result is its value or the error the SDK raised.
"""

import json
import sys

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer


def attempt(fn):
    try:
        return {"ok": True, "value": fn()}
    except Exception as exc:  # the SDK's errors carry the status code and message
        return {"ok": False, "error": str(exc)}


def run_case(addr, topic, group, name, ak, sk, tls):
    credentials = Credentials(ak, sk) if ak else Credentials()
    config = ClientConfiguration(addr, credentials)
    out = {}
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=1, tls_enable=tls)

    def start():
        consumer.startup()
        return len(consumer.receive(16, 15))  # fixes the group's start offsets

    out["subscribe"] = attempt(start)
    producer = Producer(config, (topic,), tls_enable=tls)

    def send():
        producer.startup()
        m = Message()
        m.topic = topic
        m.body = f"acl-{name}".encode()
        return producer.send(m).message_id

    out["send"] = attempt(send)
    attempt(producer.shutdown)

    def receive():
        got = []
        for _ in range(5):
            for m in consumer.receive(16, 15):
                consumer.ack(m)
                got.append(m.body.decode())
            if got:
                break
        return got

    out["receive"] = attempt(receive)
    attempt(consumer.shutdown)
    return out


def main():
    addr, topic, group, cases = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    tls = sys.argv[5:6] == ["tls"]
    results = {name: run_case(addr, topic, group, name, ak, sk, tls) for name, (ak, sk) in cases.items()}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
