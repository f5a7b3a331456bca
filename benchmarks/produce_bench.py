"""Producer throughput: batch and single sync sends of 100 B and 1 KiB, every send acknowledged.

Not a test.  Starts its own ``mqnamesrv`` and ``mqbroker`` (ASYNC_FLUSH, temp dir, free ports)
through :mod:`rocketq.client.testing`, creates an 8-queue topic and measures, each for a fixed time:

* batch: ``AsyncProducer.send_batch`` of ``--batch`` messages, ``--concurrency`` batches in
  flight (asyncio tasks), each acknowledged by the broker (SEND_OK);
* single sync: one ``Producer.send`` after the other (the blocking API), each waiting for its ack.

It prints each figure next to the target (batch 100 B >= 250 000 msg/s) and, as the reference
measured in the same run, the store-only append rate (``MessageStore.put_messages`` in this
process, batches of 100, dispatch included: what the broker's store can absorb without the
network, the request decoding and the client) plus the client's batch encoding rate alone.

    .venv/bin/python benchmarks/produce_bench.py [--seconds 5] [--quick] [--profile DIR]

``--profile DIR`` writes cProfile dumps: ``client-batch.prof`` (this process, batch 100 B) and
``broker.prof`` (the broker's main thread: transport and request decoding; the store appends run
in executor threads and are covered by the store-only reference), and prints their top entries.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rocketq.client.admin import Admin
from rocketq.client.launcher import ServerProcess, spawn_broker, spawn_namesrv
from rocketq.client.model import Message
from rocketq.client.producer import AsyncProducer, Producer
from rocketq.client.remoting.msgid import UniqKeyGenerator

TOPIC = "BenchProduce"
TARGET_BATCH_100B = 250_000
BROKER_CONF: dict[str, Any] = {
    "flushDiskType": "ASYNC_FLUSH",
    "mappedFileSizeCommitLog": 1 << 30,
    "mappedFileSizeConsumeQueue": 20 * 1_000_000,
    "sendThreadPoolQueueCapacity": 100_000,
    "waitTimeMillsInSendQueue": 5000,
}


def start_servers(work: Path, profile_dir: Path | None) -> tuple[ServerProcess, ServerProcess]:
    ns = spawn_namesrv(work / "ns")
    if profile_dir is None:
        return ns, spawn_broker(work / "broker", ns.addr, **BROKER_CONF)
    return ns, _spawn_profiled_broker(work / "broker", ns.addr, profile_dir / "broker.prof")


def _spawn_profiled_broker(tmp: Path, ns_addr: str, out: Path) -> ServerProcess:
    """The broker under ``python -m cProfile`` (a clean SIGTERM makes it write ``out``)."""
    return spawn_broker(
        tmp, ns_addr, timeout_s=60, python_args=("-m", "cProfile", "-o", str(out)), **BROKER_CONF
    )


def create_topic(ns_addr: str) -> None:
    with Admin(ns_addr) as admin:
        admin.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=8, write_queue_nums=8)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if admin.topic_route(TOPIC).queue_datas:
                    return
            except Exception:
                pass
            time.sleep(0.05)
    raise SystemExit("the topic never reached the NameServer")


async def _batch_run(
    ns_addr: str, size: int, batch: int, concurrency: int, seconds: float
) -> tuple[int, float]:
    body = os.urandom(size)
    async with AsyncProducer(ns_addr, producer_group=f"bench-batch-{size}") as producer:
        await producer.send_batch([Message(TOPIC, body) for _ in range(batch)])  # warm up
        sent = 0
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal sent
            while time.perf_counter() < deadline:
                results = await producer.send_batch([Message(TOPIC, body) for _ in range(batch)])
                assert all(r.send_status.value == "SEND_OK" for r in results)
                sent += batch

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return sent, time.perf_counter() - start


def batch_rate(ns_addr: str, size: int, batch: int, concurrency: int, seconds: float) -> float:
    sent, elapsed = asyncio.run(_batch_run(ns_addr, size, batch, concurrency, seconds))
    return sent / elapsed


def single_sync_rate(ns_addr: str, size: int, seconds: float) -> float:
    body = os.urandom(size)
    with Producer(ns_addr, producer_group=f"bench-single-{size}") as producer:
        for _ in range(50):
            producer.send(Message(TOPIC, body))
        sent = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            producer.send(Message(TOPIC, body))
            sent += 1
        return sent / (time.perf_counter() - start)


def store_only_rate(size: int, count: int, batch: int = 100) -> float:
    """Messages/s that the store appends (and dispatches) in this process: batches of 100."""
    from rocketq.broker.store.config import FlushDiskType, StoreConfig
    from rocketq.broker.store.message_store import MessageStore
    from rocketq.broker.store.record_batch import MessageToStore

    host = ("127.0.0.1", 10911)
    body = os.urandom(size)
    batches = [
        [
            MessageToStore(
                topic=TOPIC,
                queue_id=b % 8,
                body=body,
                properties={"UNIQ_KEY": f"7F000001{b * batch + i:024X}", "WAIT": "true"},
                born_timestamp=1,
                born_host=host,
                store_host=host,
            )
            for i in range(batch)
        ]
        for b in range(count // batch)
    ]
    root = tempfile.mkdtemp(prefix="rocketq-store-ref-")
    store = MessageStore(
        StoreConfig(
            store_path_root_dir=root,
            mapped_file_size_commit_log_bytes=1 << 30,
            flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        )
    )
    store.start()
    try:
        start = time.perf_counter()
        for b in batches:
            if not store.put_messages(b).is_ok:
                raise RuntimeError("store append failed")
        store.wait_dispatched(300)
        return len(batches) * batch / (time.perf_counter() - start)
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def client_encode_rate(size: int, batch: int, rounds: int = 40) -> float:
    """Messages/s of the client's batch preparation alone (UNIQ_KEY, properties, record encoding)."""
    from rocketq.client.producer.batch import prepare_batches

    body = os.urandom(size)
    uniq = UniqKeyGenerator("127.0.0.1")
    start = time.perf_counter()
    for _ in range(rounds):
        prepare_batches([Message(TOPIC, body) for _ in range(batch)], uniq)
    return rounds * batch / (time.perf_counter() - start)


def _print_profile(path: Path, title: str, limit: int = 18) -> None:
    if not path.exists():
        print(f"(no profile written at {path})")
        return
    print(f"\n--- {title}: top {limit} by total time ({path}) ---")
    stats = pstats.Stats(str(path))
    stats.sort_stats("tottime").print_stats(limit)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="duration of each measurement")
    ap.add_argument("--batch", type=int, default=500, help="messages per send_batch")
    ap.add_argument("--concurrency", type=int, default=4, help="batches in flight")
    ap.add_argument("--quick", action="store_true", help="2 s per measurement")
    ap.add_argument("--profile", type=Path, default=None, help="write cProfile dumps to this directory")
    args = ap.parse_args()
    seconds = 2.0 if args.quick else args.seconds
    profile_dir: Path | None = args.profile
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rocketq-produce-bench-"))
    ns, broker = start_servers(work, profile_dir)
    try:
        create_topic(ns.addr)
        print(
            f"broker {broker.addr} (ASYNC_FLUSH), topic {TOPIC} with 8 queues, {seconds:.0f} s per case, "
            f"batch {args.batch} x {args.concurrency} in flight, {os.cpu_count()} CPUs"
        )
        rows: list[tuple[str, float, str]] = []
        profiler = cProfile.Profile() if profile_dir is not None else None
        if profiler is not None:
            profiler.enable()
        r = batch_rate(ns.addr, 100, args.batch, args.concurrency, seconds)
        if profiler is not None:
            profiler.disable()
            assert profile_dir is not None
            profiler.dump_stats(str(profile_dir / "client-batch.prof"))
        rows.append(("batch, 100 B", r, f">= {TARGET_BATCH_100B:,} msg/s"))
        rows.append(("batch, 1 KiB", batch_rate(ns.addr, 1024, args.batch, args.concurrency, seconds), "-"))
        rows.append(("single sync, 100 B", single_sync_rate(ns.addr, 100, seconds), "-"))
        rows.append(("single sync, 1 KiB", single_sync_rate(ns.addr, 1024, seconds), "-"))
    finally:
        if profile_dir is not None:
            broker.popen.send_signal(signal.SIGTERM)
            try:
                broker.popen.wait(60)
            except subprocess.TimeoutExpired:
                pass
        broker.terminate()
        ns.terminate()
        shutil.rmtree(work, ignore_errors=True)
    store_100 = store_only_rate(100, 100_000 if args.quick else 300_000)
    encode_100 = client_encode_rate(100, args.batch)
    print(f"\n{'case':24} {'msg/s':>12} {'MB/s':>7}   target")
    for name, rate, target in rows:
        size = 100 if "100 B" in name else 1024
        print(f"{name:24} {rate:12,.0f} {rate * size / 1e6:7.1f}   {target}")
    print("\nreferences measured in this run:")
    print(
        f"{'store-only append, 100 B':24} {store_100:12,.0f} msg/s"
        "  (MessageStore.put_messages, batches of 100)"
    )
    print(f"{'client batch encode, 100 B':24} {encode_100:10,.0f} msg/s  (prepare_batches alone)")
    batch_100 = rows[0][1]
    verdict = "met" if batch_100 >= TARGET_BATCH_100B else "MISSED"
    print(
        f"\nbatch 100 B: {batch_100:,.0f} msg/s vs target {TARGET_BATCH_100B:,}: {verdict} "
        f"({100 * batch_100 / TARGET_BATCH_100B:.0f}% of target, "
        f"{100 * batch_100 / store_100:.0f}% of the store-only rate)"
    )
    if profile_dir is not None:
        _print_profile(profile_dir / "client-batch.prof", "client, batch 100 B")
        _print_profile(profile_dir / "broker.prof", "broker main thread, whole run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
