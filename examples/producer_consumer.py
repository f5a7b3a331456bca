"""Produce and consume with rocketq against a running NameServer (``rocketq dev``).

    rocketq dev                                   # terminal 1: prints NAMESRV_ADDR
    export NAMESRV_ADDR=127.0.0.1:9876            # terminal 2: the printed address
    python examples/producer_consumer.py          # or: python examples/producer_consumer.py -n host:port

It sends ten ordered messages (three sharding keys) and a batch, reads them back with a
lite-pull consumer, then consumes them again with an orderly push consumer of another group,
and prints the group's progress.  Exit status 0 when every message came back.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from rocketq.client.admin import Admin
from rocketq.client.consumer import (
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    LitePullConsumer,
    PushConsumer,
)
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer, SelectMessageQueueByHash

TOPIC = "ExampleTopic"


def produce(namesrv: str) -> int:
    with Producer(namesrv, producer_group="example-producer") as producer:
        for i in range(10):
            order_id = f"order-{i % 3}"
            msg = Message(TOPIC, f"{order_id} step {i}".encode(), tags="TagA", keys=order_id)
            result = producer.send(msg, selector=SelectMessageQueueByHash(), arg=order_id)
            print(
                f"sent {msg.body!r} -> queue {result.message_queue.queue_id} offset {result.queue_offset}"
                f" msgId {result.msg_id}"
            )
        batch = [Message(TOPIC, f"batch {i}".encode(), tags="TagB") for i in range(5)]
        for result in producer.send_batch(batch):
            print(f"batch of {len(result.msg_id.split(','))} -> queue {result.message_queue.queue_id}")
    return 15


def lite_pull(namesrv: str, expected: int) -> int:
    consumer = LitePullConsumer(
        namesrv, consumer_group="example-lite", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC, "TagA || TagB")
    consumer.start()
    got: list[MessageExt] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            got.extend(consumer.poll(1000))
        consumer.commit()
    finally:
        consumer.shutdown()
    print(f"lite pull consumer read {len(got)} messages")
    return len(got)


def push_orderly(namesrv: str, expected: int) -> int:
    seen: list[str] = []
    done = threading.Event()

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeOrderlyStatus:
        for m in msgs:
            seen.append(m.body.decode())
            print(f"  [queue {m.queue_id} offset {m.queue_offset}] {m.body.decode()}")
        if len(seen) >= expected:
            done.set()
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(
        namesrv,
        consumer_group="example-orderly",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener_orderly(listener)
    consumer.start()
    try:
        done.wait(30)
    finally:
        consumer.shutdown()
    return len(seen)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", "--namesrv", default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"))
    args = parser.parse_args()
    with Admin(args.namesrv) as admin:
        admin.create_topic(TOPIC, read_queue_nums=4, write_queue_nums=4)
    sent = produce(args.namesrv)
    read = lite_pull(args.namesrv, sent)
    pushed = push_orderly(args.namesrv, sent)
    with Admin(args.namesrv) as admin:
        lag = sum(p.lag for p in admin.consumer_progress("example-orderly", TOPIC))
    print(f"sent {sent}, lite-pulled {read}, pushed {pushed}, remaining lag of example-orderly: {lag}")
    return 0 if read >= sent and pushed >= sent else 1


if __name__ == "__main__":
    sys.exit(main())
