# mypy: ignore-errors
"""Runs in the Python SDK's own venv: sends COUNT messages to TOPIC through the proxy at PROXY_ADDR,
one every PAUSE_MS, and prints as JSON which were acknowledged (their index and message id) and
how many sends failed.  The test kills and restarts the proxy meanwhile.  After a failed send the
loop goes on past COUNT until 20 sends after the last failure were acknowledged (at most 90 s in
all), so a slow restart on a loaded machine still ends with sends through the new proxy.

Usage: python python_sdk_send_loop.py PROXY_ADDR TOPIC COUNT PAUSE_MS
"""

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, Message, Producer


def main():
    addr, topic, count, pause_ms = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    producer = Producer(ClientConfiguration(addr, Credentials(), request_timeout=2), (topic,))
    producer.startup()
    acked, failed = [], 0
    since_failure = 0  # acknowledged sends since the last failed one
    deadline = time.monotonic() + 90
    try:
        i = 0
        while (i < count or (failed and since_failure < 20)) and time.monotonic() < deadline:
            m = Message()
            m.topic = topic
            m.body = f"k-{i}".encode()
            try:
                acked.append([i, producer.send(m).message_id])
                since_failure += 1
            except Exception:
                failed += 1
                since_failure = 0
            i += 1
            time.sleep(pause_ms / 1000)
    finally:
        producer.shutdown()
    print(json.dumps({"acked": acked, "failed": failed, "sent": i}), flush=True)


if __name__ == "__main__":
    main()
