"""POP + ack throughput next to lite-pull throughput, 100 B messages, measured in the same run.

Not a test.  Starts its own ``mqnamesrv`` and ``mqbroker`` (ASYNC_FLUSH, temp dir, free ports),
preloads ``--messages`` messages into an 8-queue topic with batch sends (consume_bench's preload),
then times, each from start until every message was handed out (and, for POP, acked):

* ``LitePullConsumer.poll`` with RocketMQ's 32-message pulls (consume_bench's ``lite_pull_rate``):
  the reference;
* raw POP_MESSAGE (queueId -1, 32 messages) + one BATCH_ACK_MESSAGE per pop over the asyncio
  remoting client (one connection), ``--consumers`` pops in flight, the acks built from the
  response header's offset strings with the records left undecoded: the broker's POP path;
* ``AsyncSimpleConsumer.receive(32)`` + ``ack`` of each message, ``--consumers`` consumers: the
  user-facing path (one ACK_MESSAGE per message, as the 5.x SDKs do), and the same with
  ``ack_many`` (one BATCH_ACK_MESSAGE per receive).

The clock stops when the last message is acked, as lite pull's stops at its last message: pops
still long-polling the drained topic then (up to ``pollTime``, 1 s) are not consumption time.

Target (issue 31): POP + ack at least 50 % of lite pull.

    .venv/bin/python benchmarks/pop_bench.py [--messages 100000] [--consumers 8]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

from consume_bench import QUEUES, TOPIC, lite_pull_rate, preload  # type: ignore[import-not-found]  # benchmarks/ is on sys.path

from rocketq.client.admin import Admin
from rocketq.client.consumer import AsyncSimpleConsumer
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.pop import (
    BatchAck,
    BatchAckMessageRequestBody,
    ConsumeInitMode,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    RetryFlag,
    parse_msg_offset_info,
    parse_start_offset_info,
)
from rocketq.client.testing import spawn_broker, spawn_namesrv
from rocketq.client.transport.aio import RemotingClient

TARGET_RATIO = 0.5
BROKER = "broker-a"


async def raw_pop_rate(addr: str, total: int, consumers: int) -> float:
    client = RemotingClient()
    done = 0
    finished: float | None = None
    start = time.perf_counter()

    async def consume() -> None:
        nonlocal done, finished
        while done < total:
            header = PopMessageRequestHeader(
                consumer_group="bench-pop-raw",
                topic=TOPIC,
                queue_id=-1,
                max_msg_nums=32,
                invisible_time=60_000,
                poll_time=1000,
                born_time=int(time.time() * 1000),
                init_mode=0,
            )
            response = await client.invoke(
                addr, RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields()), 10_000
            )
            if response.code != ResponseCode.SUCCESS:
                continue
            rh = PopMessageResponseHeader.from_ext_fields(response.ext_fields)
            # a batch ack needs only the header's offset strings: the body stays undecoded, so
            # this measures the broker's POP path rather than this process's record decoder
            starts = parse_start_offset_info(rh.start_offset_info) or {}
            offsets = parse_msg_offset_info(rh.msg_offset_info) or {}
            acks = tuple(
                BatchAck(
                    consumer_group="bench-pop-raw",
                    topic=TOPIC,
                    retry_flag=RetryFlag(key.split("@")[0]),
                    start_offset=starts[key],
                    queue_id=int(key.split("@")[1]),
                    revive_queue_id=rh.revive_qid,
                    pop_time=rh.pop_time,
                    invisible_time=rh.invisible_time,
                    ack_indexes=tuple(o - starts[key] for o in offs),
                )
                for key, offs in offsets.items()
            )
            count = sum(len(offs) for offs in offsets.values())
            body = BatchAckMessageRequestBody(BROKER, acks).encode()
            answer = await client.invoke(
                addr, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, body), 10_000
            )
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            done += count
            if done >= total and finished is None:
                finished = time.perf_counter()

    try:
        await asyncio.gather(*(consume() for _ in range(consumers)))
    finally:
        await client.close()
    return done / ((finished or time.perf_counter()) - start)


async def simple_consumer_rate(ns_addr: str, total: int, consumers: int, *, batch_ack: bool) -> float:
    done = 0
    finished: float | None = None
    start = time.perf_counter()
    group = "bench-pop-simple-batch" if batch_ack else "bench-pop-simple"

    async def consume() -> None:
        nonlocal done, finished
        async with AsyncSimpleConsumer(
            ns_addr, group, {TOPIC: "*"}, await_duration_s=1, init_mode=ConsumeInitMode.MIN
        ) as consumer:
            while done < total:
                msgs = await consumer.receive(32, 60)
                if batch_ack:
                    await consumer.ack_many(msgs)
                else:
                    await asyncio.gather(*(consumer.ack(m) for m in msgs))
                done += len(msgs)
                if done >= total and finished is None:
                    finished = time.perf_counter()

    await asyncio.gather(*(consume() for _ in range(consumers)))
    return done / ((finished or time.perf_counter()) - start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--consumers", type=int, default=8, help="pops in flight / SimpleConsumers")
    args = ap.parse_args()
    total = args.messages - args.messages % QUEUES
    work = Path(tempfile.mkdtemp(prefix="rocketq-pop-bench-"))
    try:
        with (
            spawn_namesrv(work / "ns") as ns,
            spawn_broker(work / "b", ns.addr, flushDiskType="ASYNC_FLUSH", brokerName=BROKER) as broker,
        ):
            with Admin(ns.addr) as admin:
                admin.create_topic(
                    TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES, cluster="DefaultCluster"
                )
            time.sleep(1.0)
            produced = asyncio.run(preload(ns.addr, total))
            print(f"preloaded {total:,} messages of 100 B at {produced:,.0f} msg/s")
            lite = lite_pull_rate(ns.addr, total, 32)
            raw = asyncio.run(raw_pop_rate(broker.addr, total, args.consumers))
            simple = asyncio.run(simple_consumer_rate(ns.addr, total, args.consumers, batch_ack=False))
            simple_batch = asyncio.run(simple_consumer_rate(ns.addr, total, args.consumers, batch_ack=True))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{'case':50} {'msg/s':>10}  vs lite pull (target >= {TARGET_RATIO:.0%})")
    print(f"{'lite pull, 32 per pull (reference)':50} {lite:10,.0f}")
    for name, rate in (
        (f"raw POP 32 + BATCH_ACK, {args.consumers} in flight", raw),
        (f"SimpleConsumer receive(32) + ack, {args.consumers} consumers", simple),
        (f"SimpleConsumer receive(32) + ack_many, {args.consumers} consumers", simple_batch),
    ):
        print(f"{name:50} {rate:10,.0f}  {rate / lite:6.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
