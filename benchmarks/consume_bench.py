"""Consumer throughput: lite-pull and push consumers reading a preloaded topic of 100 B messages.

Not a test.  Starts its own ``mqnamesrv`` and ``mqbroker`` (ASYNC_FLUSH, temp dir, free ports)
through :mod:`rocketq.client.testing`, with pulls allowed to carry up to ``--pull-batch``
messages (``maxTransferCountOnMessageInMemory``; RocketMQ's default of 32 is also measured),
preloads ``--messages`` messages into an 8-queue topic with batch sends, then times, each from
start until every message was handed to the application:

* ``LitePullConsumer.poll`` (assign all queues), and its ``poll_batch`` (each pull's queue
  offsets and bodies as two lists, no message object each);
* ``PushConsumer`` with a concurrent listener (``consume_message_batch_max_size`` 32);
* reference, same run: raw pulls through ``MQClientAPI.pull_message`` keeping the record bytes
  undecoded (the transport plus the broker's read path), the eager record decoder alone
  (``iter_stored_messages`` over the pulled bytes) and the consumers' lazy decoding alone
  (``PullResult.messages``: ``scan_messages`` plus reading every body).

Received messages are lazy views (``LazyMessageExt``): fields are decoded on first access.  So
that laziness is not a trick, both consumers read every message's ``body`` (decompressed bytes)
and ``queue_offset`` in the consume loop, and the lazy-decoding reference does the same.

Target: >= 500 000 msg/s on the 2-core machine, client and broker both on it.

    .venv/bin/python benchmarks/consume_bench.py [--messages 300000] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rocketq.client.admin import Admin
from rocketq.client.api import MQClientAPI, PullSysFlag
from rocketq.client.config import ConsumeFromWhere
from rocketq.client.consumer import ConsumeConcurrentlyStatus, LitePullConsumer, PushConsumer
from rocketq.client.model import Message, MessageExt, scan_messages
from rocketq.client.producer import AsyncProducer
from rocketq.client.remoting.headers import PullMessageRequestHeader
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.remoting.route import MessageQueue
from rocketq.client.testing import spawn_broker, spawn_namesrv

TOPIC = "BenchConsume"
QUEUES = 8
TARGET = 500_000
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def preload(ns_addr: str, total: int) -> float:
    body = os.urandom(100)
    async with AsyncProducer(ns_addr, producer_group="bench-preload") as producer:
        mqs = await producer.fetch_publish_message_queues(TOPIC)
        per_queue = total // len(mqs)
        start = time.perf_counter()

        async def fill(mq: MessageQueue) -> None:
            left = per_queue
            while left > 0:
                n = min(1000, left)
                await producer.send_batch([Message(TOPIC, body) for _ in range(n)], queue=mq)
                left -= n

        await asyncio.gather(*(fill(mq) for mq in mqs))
        return per_queue * len(mqs) / (time.perf_counter() - start)


def lite_pull_rate(ns_addr: str, total: int, pull_batch: int, *, columns: bool = False) -> float:
    consumer = LitePullConsumer(
        ns_addr,
        consumer_group=f"bench-lite-{pull_batch}-{'columns' if columns else 'views'}",
        consume_from_where=FIRST,
        pull_batch_size=pull_batch,
        auto_commit=False,
        pull_threshold_for_queue=4 * pull_batch,
        pull_threshold_for_all=50_000,
    )
    consumer.assign(consumer.fetch_message_queues(TOPIC))
    got = touched = 0
    start = time.perf_counter()
    consumer.start()
    try:
        deadline = start + 300
        while got < total and time.perf_counter() < deadline:
            if columns:
                batch = consumer.poll_batch(1000)
                if batch is not None:
                    for body, queue_offset in zip(batch.bodies, batch.queue_offsets, strict=True):
                        touched += len(body) + (queue_offset >= 0)
                    got += len(batch)
                continue
            for msg in consumer.poll(1000):
                touched += len(msg.body) + (msg.queue_offset >= 0)
                got += 1
        elapsed = time.perf_counter() - start
    finally:
        consumer.shutdown()
    assert touched >= got
    return got / elapsed


def push_rate(ns_addr: str, total: int, pull_batch: int) -> float:
    count = 0
    lock = threading.Lock()
    done = threading.Event()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        nonlocal count
        touched = sum(len(m.body) + (m.queue_offset >= 0) for m in msgs)
        assert touched >= len(msgs)
        with lock:
            count += len(msgs)
            if count >= total:
                done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        ns_addr,
        consumer_group=f"bench-push-{pull_batch}",
        consume_from_where=FIRST,
        pull_batch_size=pull_batch,
        consume_message_batch_max_size=32,
        pull_threshold_for_queue=4 * pull_batch,
        consume_thread_nums=4,
        consume_concurrently_max_span=100_000,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    start = time.perf_counter()
    consumer.start()
    try:
        done.wait(300)
        elapsed = time.perf_counter() - start
    finally:
        consumer.shutdown()
    return count / elapsed


async def raw_pull(ns_addr: str, addr: str, total: int, pull_batch: int) -> tuple[float, float, float]:
    """msgs/s of undecoded pulls over every queue, of decoding those bytes eagerly, and of the
    consumers' lazy decoding of them (views plus every body read)."""
    api = MQClientAPI(ns_addr)
    bodies: list[bytes] = []
    got = 0
    try:
        start = time.perf_counter()

        async def drain(queue_id: int) -> None:
            nonlocal got
            offset = 0
            while True:
                header = PullMessageRequestHeader(
                    consumer_group="bench-raw",
                    topic=TOPIC,
                    queue_id=queue_id,
                    queue_offset=offset,
                    max_msg_nums=pull_batch,
                    sys_flag=int(PullSysFlag.SUBSCRIPTION),
                    commit_offset=0,
                    suspend_timeout_millis=0,
                    subscription="*",
                    sub_version=0,
                    expression_type="TAG",
                )
                result = await api.pull_message(addr, header, 10_000)
                if result.next_begin_offset == offset or not result.body:
                    return
                bodies.append(result.body)
                got += result.next_begin_offset - offset
                offset = result.next_begin_offset

        await asyncio.gather(*(drain(q) for q in range(QUEUES)))
        pull_s = got / (time.perf_counter() - start)
    finally:
        await api.close()
    start = time.perf_counter()
    decoded = sum(1 for body in bodies for _ in iter_stored_messages(body))
    decode_s = decoded / (time.perf_counter() - start)
    assert decoded == got, (decoded, got)
    start = time.perf_counter()
    lazy = 0
    for body in bodies:
        for msg in scan_messages(body):
            lazy += len(msg.body) > 0 and msg.queue_offset >= 0
    lazy_s = lazy / (time.perf_counter() - start)
    assert lazy == got, (lazy, got)
    return pull_s, decode_s, lazy_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--pull-batch", type=int, default=1024, help="messages per pull (and the broker's cap)")
    ap.add_argument("--quick", action="store_true", help="100 000 messages")
    args = ap.parse_args()
    total = 100_000 if args.quick else args.messages
    total -= total % QUEUES
    work = Path(tempfile.mkdtemp(prefix="rocketq-consume-bench-"))
    rows: list[tuple[str, float]] = []
    try:
        conf: dict[str, Any] = {
            "flushDiskType": "ASYNC_FLUSH",
            "mappedFileSizeCommitLog": 1 << 30,
            "mappedFileSizeConsumeQueue": 20 * 1_000_000,
            "maxTransferCountOnMessageInMemory": args.pull_batch,
            "maxTransferBytesOnMessageInMemory": 4 << 20,
        }
        with spawn_namesrv(work / "ns") as ns, spawn_broker(work / "b", ns.addr, **conf) as broker:
            with Admin(ns.addr) as admin:
                admin.create_topic(
                    TOPIC, cluster="DefaultCluster", read_queue_nums=QUEUES, write_queue_nums=QUEUES
                )
            time.sleep(0.5)
            load_rate = asyncio.run(preload(ns.addr, total))
            print(
                f"preloaded {total:,} x 100 B messages in {QUEUES} queues at {load_rate:,.0f} msg/s; "
                f"pull batch {args.pull_batch}, {os.cpu_count()} CPUs"
            )
            raw, decode, lazy = asyncio.run(raw_pull(ns.addr, broker.addr, total, args.pull_batch))
            rows.append(
                (f"lite pull, batch {args.pull_batch}", lite_pull_rate(ns.addr, total, args.pull_batch))
            )
            rows.append(
                (
                    f"lite poll_batch, batch {args.pull_batch}",
                    lite_pull_rate(ns.addr, total, args.pull_batch, columns=True),
                )
            )
            rows.append((f"push, batch {args.pull_batch}", push_rate(ns.addr, total, args.pull_batch)))
            rows.append(("lite pull, batch 32", lite_pull_rate(ns.addr, total, 32)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{'case':28} {'msg/s':>12}   target")
    for name, rate in rows:
        print(f"{name:28} {rate:12,.0f}   >= {TARGET:,} msg/s")
    print("\nreferences measured in this run:")
    print(f"{'raw pull, undecoded':28} {raw:12,.0f} msg/s  (MQClientAPI.pull_message, 8 queues in parallel)")
    print(
        f"{'eager record decoding alone':28} {decode:12,.0f} msg/s"
        "  (iter_stored_messages over the pulled bytes)"
    )
    print(
        f"{'lazy decoding + body reads':28} {lazy:12,.0f} msg/s"
        "  (scan_messages, then every body, as the consumers)"
    )
    best = max(rate for _, rate in rows)
    verdict = "met" if best >= TARGET else "MISSED"
    print(
        f"\nbest consumer: {best:,.0f} msg/s vs target {TARGET:,}: {verdict} "
        f"({100 * best / TARGET:.0f}% of target)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
