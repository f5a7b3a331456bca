"""rocketq next to Redis Streams on the same machine, in one run: produce, consume, durable, 1 KiB, single.

Not a test.  Starts ``redis-server`` (Debian's ``redis-server`` package; the client is redis-py
with hiredis, from the ``bench`` extra) and rocketq's ``mqnamesrv`` with three brokers (one
ASYNC_FLUSH and one SYNC_FLUSH on this run's event loop, one ASYNC_FLUSH on the other), all on
free ports in a temp dir, then measures ``--rounds`` times, alternating which system goes first
in each case, every message acknowledged:

* produce, 100 B: Redis pipelined ``XADD`` of 1000 per round trip (AOF on, ``appendfsync
  everysec``; redis-py's synchronous client, one thread and connection per round trip in
  flight) against ``AsyncProducer.send_batch`` of 1000 (ASYNC_FLUSH, asyncio tasks), each with
  ``--in-flight`` round trips outstanding, for ``--seconds`` each;
* consume of everything the produce case just stored: ``XRANGE ... COUNT 1000`` from the start
  against the lite pull consumer (pulls of 1000), both reading every body: ``poll_batch`` (a
  list of bodies per pull, as ``XRANGE`` gives a list of entries), then, as a second line
  against the same Redis figure, ``poll`` (a message object per message);
* durable: the same produce with ``appendfsync always`` against the SYNC_FLUSH broker;
* 1 KiB produce (as the first case), its MB/s of bodies next to the disk's fsync'd sequential
  write bandwidth measured in the same round (1 MiB writes, ``fsync`` after each, in the same
  directory as the stores);
* single: one at a time, redis-py's synchronous ``XADD`` against the blocking ``Producer.send``
  (each waits for its answer), with p50 / p99 latency; then the same rocketq sends with broker
  and client on the other event loop (asyncio's when the run uses uvloop, a client process of
  its own), right before or after, so the two loops are compared within each round.

It prints each pair with the ratio (rocketq / Redis) per round and the medians over the rounds,
and for the batch cases the CPU per message of the server process (redis-server, the broker)
and of this process (the clients), which moves much less with the machine's load than the rates.
The clients, the servers and the NameServer share the machine's cores; compare the ratios within
a run, not absolute rates across machines.  ``--loop asyncio`` runs rocketq's brokers and
clients on asyncio's own event loop instead of uvloop (``ROCKETQ_EVENT_LOOP``; the other loop of
the single case is then uvloop); Redis is the same.

    pip install -e '.[bench]'         # redis-py + hiredis; and: sudo apt-get install redis-server
    .venv/bin/python benchmarks/vs_redis.py [--rounds 2] [--seconds 3] [--in-flight 2] [--loop uvloop|asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from rocketq.client.admin import Admin
from rocketq.client.config import ConsumeFromWhere
from rocketq.client.consumer import LitePullConsumer
from rocketq.client.launcher import ServerProcess, spawn_broker, spawn_namesrv
from rocketq.client.model import Message, SendStatus
from rocketq.client.producer import AsyncProducer, Producer
from rocketq.client.transport import event_loop

INSTALL_REDIS = (
    "redis-server was not found on PATH. Install Debian's package (sudo apt-get install redis-server) "
    "or put a redis-server binary on PATH, then run this benchmark again."
)
INSTALL_CLIENT = (
    "the Redis client is not installed: run pip install -e '.[bench]' from the repository root "
    "(it installs redis-py and hiredis), then run this benchmark again."
)
BATCH = 1000
QUEUES = 8
BROKER_CONF: dict[str, Any] = {
    "mappedFileSizeCommitLog": 1 << 30,
    "mappedFileSizeConsumeQueue": 20 * 1_000_000,
    "maxTransferCountOnMessageInMemory": BATCH,
    "maxTransferBytesOnMessageInMemory": 4 << 20,
    "sendThreadPoolQueueCapacity": 100_000,
    "waitTimeMillsInSendQueue": 5000,
}


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))]


@dataclass(frozen=True)
class Figure:
    """One measurement: a rate, and latency percentiles (ms) for the single-send case."""

    rate: float
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    count: int = 0  # messages handled while the CPU below was measured (warm-up included)
    server_us: float = 0.0  # CPU of the server process (redis-server / the broker) per message
    client_us: float = 0.0  # CPU of this process (the clients) per message


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc``; 0 where it is missing)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def with_cpu(server_pid: int, measure: Callable[[], Figure]) -> Figure:
    """``measure()`` with the server's and this process's CPU per message it handled: a figure
    that does not move with the machine's load the way the rates do."""
    server, client = _cpu_s(server_pid), time.process_time()
    fig = measure()
    if not fig.count:
        return fig
    per = 1e6 / fig.count
    return replace(
        fig, server_us=(_cpu_s(server_pid) - server) * per, client_us=(time.process_time() - client) * per
    )


# --- Redis -------------------------------------------------------------------------------------


class RedisServer:
    """``redis-server`` on a free port with AOF on, in its own directory; stopped by ``close``."""

    def __init__(self, work: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit(INSTALL_REDIS)
        work.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(work)]
        args += ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]
        # rewrites run between the cases (``reset``), not in the middle of a measurement
        args += ["--auto-aof-rewrite-percentage", "0", "--logfile", str(work / "redis.log")]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL)
        import redis

        self.client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 20
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit(f"redis-server did not start; see {work / 'redis.log'}") from None
                time.sleep(0.05)
        from redis.utils import HIREDIS_AVAILABLE

        self.parser = "hiredis" if HIREDIS_AVAILABLE else "pure Python"

    def set_fsync(self, policy: str) -> None:
        self.client.config_set("appendfsync", policy)

    def reset(self, stream: str) -> None:
        """Drop ``stream`` and shrink the AOF so the next case starts from the same state."""
        self.client.delete(stream)
        self.client.bgrewriteaof()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            info = self.client.info("persistence")
            if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
                return
            time.sleep(0.05)

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def redis_produce(port: int, stream: str, size: int, seconds: float, in_flight: int) -> Figure:
    """Pipelines of BATCH XADDs; ``in_flight`` threads with a connection each (redis-py's
    synchronous client is its fastest: its asyncio pipelines encode slower)."""
    import redis

    body = os.urandom(size)
    counts = [0] * in_flight
    failures: list[BaseException] = []
    clients = [redis.Redis(port=port) for _ in range(in_flight)]

    def one_batch(client: redis.Redis) -> None:
        pipe = client.pipeline(transaction=False)
        for _ in range(BATCH):
            pipe.xadd(stream, {"b": body})
        ids = pipe.execute()
        assert len(ids) == BATCH and all(ids)

    for client in clients:
        one_batch(client)  # warm up (connection, stream)
    deadline = time.perf_counter() + seconds

    def worker(i: int) -> None:
        try:
            while time.perf_counter() < deadline:
                one_batch(clients[i])
                counts[i] += BATCH
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(in_flight)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    for client in clients:
        client.close()
    if failures:
        raise failures[0]
    return Figure(sum(counts) / elapsed, count=sum(counts) + in_flight * BATCH)


#: XRANGE's answer through redis-py: (entry id, {field: value}) pairs
_Entries = list[tuple[bytes, dict[bytes, bytes]]]


def redis_consume(port: int, stream: str) -> tuple[Figure, int]:
    import redis

    client = redis.Redis(port=port)
    got = touched = 0
    start = time.perf_counter()
    low = "-"
    while True:
        entries = cast(_Entries, client.xrange(stream, min=low, max="+", count=BATCH))
        if not entries:
            break
        for _, fields in entries:
            touched += len(fields[b"b"])
        got += len(entries)
        low = "(" + entries[-1][0].decode()
    elapsed = time.perf_counter() - start
    client.close()
    assert touched > 0
    return Figure(got / elapsed, count=got), got


def redis_single(port: int, stream: str, seconds: float) -> Figure:
    import redis

    client = redis.Redis(port=port)
    body = os.urandom(100)
    for _ in range(200):
        client.xadd(stream, {"b": body})
    lat: list[float] = []
    clock = time.perf_counter
    start = clock()
    deadline = start + seconds
    while True:
        t0 = clock()
        if t0 >= deadline:
            break
        assert client.xadd(stream, {"b": body})
        lat.append(clock() - t0)
    elapsed = clock() - start
    client.close()
    return _latency_figure(lat, elapsed)


# --- rocketq -----------------------------------------------------------------------------------


class RocketqServers:
    """A NameServer and three brokers: ``async_addr`` (ASYNC_FLUSH) and ``sync_addr`` (SYNC_FLUSH)
    on this run's event loop, ``other_addr`` (ASYNC_FLUSH) on the other loop (``other_loop``)."""

    def __init__(self, work: Path, other_loop: str) -> None:
        self.procs: list[ServerProcess] = []
        self.ns = spawn_namesrv(work / "ns")
        self.procs.append(self.ns)
        self.other_loop = other_loop
        brokers = {}
        pids = {}
        for name, flush, env in (
            ("vs-async", "ASYNC_FLUSH", None),
            ("vs-sync", "SYNC_FLUSH", None),
            ("vs-other", "ASYNC_FLUSH", {event_loop.EVENT_LOOP_ENV: other_loop}),
        ):
            proc = spawn_broker(
                work / name, self.ns.addr, env=env, brokerName=name, flushDiskType=flush, **BROKER_CONF
            )
            self.procs.append(proc)
            brokers[name] = proc.addr
            pids[name] = proc.popen.pid
        self.async_addr, self.sync_addr, self.other_addr = brokers.values()
        self.async_pid, self.sync_pid = pids["vs-async"], pids["vs-sync"]
        self.admin = Admin(self.ns.addr)

    def new_topic(self, topic: str, broker_addr: str) -> str:
        self.admin.create_topic(
            topic, broker_addr=broker_addr, read_queue_nums=QUEUES, write_queue_nums=QUEUES
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if self.admin.topic_route(topic).queue_datas:
                    return topic
            time.sleep(0.05)
        raise SystemExit(f"topic {topic} never reached the NameServer")

    def close(self) -> None:
        self.admin.close()
        for proc in reversed(self.procs):
            proc.terminate()


async def rocketq_produce(ns_addr: str, topic: str, size: int, seconds: float, in_flight: int) -> Figure:
    body = os.urandom(size)
    async with AsyncProducer(ns_addr, producer_group=f"vs-redis-{topic}") as producer:

        async def one_batch() -> None:
            results = await producer.send_batch([Message(topic, body) for _ in range(BATCH)])
            assert all(r.send_status is SendStatus.SEND_OK for r in results)

        await one_batch()  # warm up (route, connection)
        sent = BATCH
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal sent
            while time.perf_counter() < deadline:
                await one_batch()
                sent += BATCH

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return Figure((sent - BATCH) / (time.perf_counter() - start), count=sent)


def rocketq_consume(ns_addr: str, topic: str, total: int, *, views: bool = False) -> Figure:
    """The lite pull consumer reading every body of ``topic``: ``poll_batch`` (bodies as a list
    per pull) or, with ``views``, ``poll`` (a message object per message)."""
    consumer = LitePullConsumer(
        ns_addr,
        consumer_group=f"vs-redis-{topic}-{'views' if views else 'columns'}",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        pull_batch_size=BATCH,
        auto_commit=False,
        pull_threshold_for_queue=4 * BATCH,
        pull_threshold_for_all=50_000,
    )
    consumer.assign(consumer.fetch_message_queues(topic))
    got = touched = 0
    start = time.perf_counter()
    consumer.start()
    try:
        deadline = start + 300
        while got < total and time.perf_counter() < deadline:
            if views:
                for msg in consumer.poll(1000):
                    touched += len(msg.body)
                    got += 1
                continue
            batch = consumer.poll_batch(1000)
            if batch is not None:
                for body in batch.bodies:
                    touched += len(body)
                got += len(batch)
        elapsed = time.perf_counter() - start
    finally:
        consumer.shutdown()
    if got < total:
        raise SystemExit(f"the lite pull consumer read {got} of {total} messages of {topic} in 300 s")
    assert touched > 0
    return Figure(got / elapsed, count=got)


def rocketq_single(ns_addr: str, topic: str, seconds: float) -> Figure:
    body = os.urandom(100)
    with Producer(ns_addr, producer_group=f"vs-redis-{topic}") as producer:
        for _ in range(200):
            producer.send(Message(topic, body))
        lat: list[float] = []
        clock = time.perf_counter
        start = clock()
        deadline = start + seconds
        while True:
            t0 = clock()
            if t0 >= deadline:
                break
            assert producer.send(Message(topic, body)).send_status is SendStatus.SEND_OK
            lat.append(clock() - t0)
        elapsed = clock() - start
    return _latency_figure(lat, elapsed)


def rocketq_single_other_loop(ns_addr: str, topic: str, seconds: float, loop: str) -> Figure:
    """:func:`rocketq_single` in a child interpreter whose client loop is ``loop``."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from vs_redis import rocketq_single; "
        "f = rocketq_single(sys.argv[2], sys.argv[3], float(sys.argv[4])); print(f.rate, f.p50_ms, f.p99_ms)"
    )
    here = str(Path(__file__).resolve().parent)
    out = subprocess.run(
        [sys.executable, "-c", code, here, ns_addr, topic, str(seconds)],
        env={**os.environ, event_loop.EVENT_LOOP_ENV: loop},
        capture_output=True,
        text=True,
        timeout=seconds + 120,
        check=True,
    ).stdout.split()
    rate, p50, p99 = map(float, out[-3:])
    return Figure(rate, p50, p99)


# --- common ------------------------------------------------------------------------------------


def _latency_figure(lat: list[float], elapsed: float) -> Figure:
    lat.sort()
    return Figure(len(lat) / elapsed, 1000 * percentile(lat, 0.5), 1000 * percentile(lat, 0.99))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def disk_bandwidth(directory: Path, seconds: float) -> float:
    """Bytes/s of 1 MiB sequential writes, each followed by fsync, into a fresh file in ``directory``."""
    chunk = os.urandom(1 << 20)
    path = directory / "disk-bandwidth.tmp"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    written = 0
    try:
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            os.write(fd, chunk)
            os.fsync(fd)
            written += len(chunk)
        return written / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


CASES = (
    "produce 100 B",
    "consume 100 B",
    "consume, poll() views",
    "durable 100 B",
    "produce 1 KiB",
    "single 100 B",
    "single, other loop",
)


def one_round(
    index: int, redis: RedisServer, rq: RocketqServers, args: argparse.Namespace, work: Path
) -> dict[str, tuple[Figure, Figure]]:
    """Every case once, Redis first in even rounds and rocketq first in odd ones."""
    seconds, in_flight = args.seconds, args.in_flight
    ns = rq.ns.addr
    figures: dict[str, dict[str, Figure]] = {case: {} for case in CASES}

    def run_redis() -> None:
        stream = f"vs{index}"
        redis.set_fsync("everysec")
        rpid = redis.proc.pid
        figures["produce 100 B"]["redis"] = with_cpu(
            rpid, lambda: redis_produce(redis.port, stream, 100, seconds, in_flight)
        )
        figures["consume 100 B"]["redis"] = with_cpu(rpid, lambda: redis_consume(redis.port, stream)[0])
        figures["consume, poll() views"]["redis"] = figures["consume 100 B"]["redis"]
        redis.reset(stream)
        redis.set_fsync("always")
        figures["durable 100 B"]["redis"] = with_cpu(
            rpid, lambda: redis_produce(redis.port, stream, 100, seconds, in_flight)
        )
        redis.set_fsync("everysec")
        redis.reset(stream)
        figures["produce 1 KiB"]["redis"] = with_cpu(
            rpid, lambda: redis_produce(redis.port, stream, 1024, seconds, in_flight)
        )
        redis.reset(stream)
        figures["single 100 B"]["redis"] = redis_single(redis.port, stream, seconds)
        figures["single, other loop"]["redis"] = figures["single 100 B"]["redis"]
        redis.reset(stream)

    def produce(topic: str, size: int) -> Figure:
        return event_loop.run(rocketq_produce(ns, topic, size, seconds, in_flight))

    def run_rocketq() -> None:
        topic = rq.new_topic(f"VsRedis{index}", rq.async_addr)
        apid, spid = rq.async_pid, rq.sync_pid
        figures["produce 100 B"]["rocketq"] = with_cpu(apid, lambda: produce(topic, 100))
        total = rq.admin.topic_status(topic)
        count = sum(q.max_offset - q.min_offset for q in total)
        figures["consume 100 B"]["rocketq"] = with_cpu(apid, lambda: rocketq_consume(ns, topic, count))
        figures["consume, poll() views"]["rocketq"] = with_cpu(
            apid, lambda: rocketq_consume(ns, topic, count, views=True)
        )
        durable = rq.new_topic(f"VsRedisDurable{index}", rq.sync_addr)
        figures["durable 100 B"]["rocketq"] = with_cpu(spid, lambda: produce(durable, 100))
        large = rq.new_topic(f"VsRedisLarge{index}", rq.async_addr)
        figures["produce 1 KiB"]["rocketq"] = with_cpu(apid, lambda: produce(large, 1024))
        single = rq.new_topic(f"VsRedisSingle{index}", rq.async_addr)
        other = rq.new_topic(f"VsRedisOther{index}", rq.other_addr)

        def single_here() -> None:
            figures["single 100 B"]["rocketq"] = rocketq_single(ns, single, seconds)

        def single_other() -> None:
            fig = rocketq_single_other_loop(ns, other, seconds, rq.other_loop)
            figures["single, other loop"]["rocketq"] = fig

        for measure in (single_here, single_other) if index % 2 == 0 else (single_other, single_here):
            measure()

    order = (run_redis, run_rocketq) if index % 2 == 0 else (run_rocketq, run_redis)
    for run in order:
        run()
    disk = disk_bandwidth(work, min(seconds, 3.0))
    pairs = {case: (figures[case]["redis"], figures[case]["rocketq"]) for case in CASES}
    pairs["disk"] = (Figure(disk), Figure(disk))
    return pairs


def _cpu_text(r: Figure, q: Figure) -> str:
    return (
        f"CPU us/msg server + client: Redis {r.server_us:.2f} + {r.client_us:.2f}, "
        f"rocketq {q.server_us:.2f} + {q.client_us:.2f}"
    )


def _label(case: str, other_loop: str) -> str:
    return case.replace("other loop", f"{other_loop} loops")


def print_round(index: int, pairs: dict[str, tuple[Figure, Figure]], other_loop: str) -> None:
    first = "Redis" if index % 2 == 0 else "rocketq"
    print(f"\nround {index + 1} ({first} first)")
    print(f"  {'case':22} {'Redis msg/s':>13} {'rocketq msg/s':>14} {'rocketq/Redis':>14}")
    for case in CASES:
        r, q = pairs[case]
        line = f"  {_label(case, other_loop):22} {r.rate:13,.0f} {q.rate:14,.0f} {q.rate / r.rate:13.2f}x"
        if case.startswith("single"):
            line += (
                f"   p50/p99 ms: Redis {r.p50_ms:.3f}/{r.p99_ms:.3f}, rocketq {q.p50_ms:.3f}/{q.p99_ms:.3f}"
            )
        elif r.count and q.count:
            line += f"   {_cpu_text(r, q)}"
        print(line)
    disk = pairs["disk"][0].rate
    large = pairs["produce 1 KiB"][1].rate * 1024
    print(
        f"  disk, 1 MiB writes + fsync: {disk / 1e6:,.0f} MB/s; rocketq 1 KiB produce "
        f"{large / 1e6:,.0f} MB/s of bodies = {100 * large / disk:.0f} % of it"
    )


def print_medians(rounds: list[dict[str, tuple[Figure, Figure]]], other_loop: str) -> None:
    print(f"\nmedians over {len(rounds)} rounds")
    print(f"  {'case':22} {'Redis msg/s':>13} {'rocketq msg/s':>14} {'rocketq/Redis':>14}")

    def med(values: list[float]) -> float:
        return statistics.median(values)

    for case in CASES:
        redis = [p[case][0] for p in rounds]
        rq = [p[case][1] for p in rounds]
        ratio = med([q.rate / r.rate for r, q in zip(redis, rq, strict=True)])
        line = f"  {_label(case, other_loop):22} {med([f.rate for f in redis]):13,.0f}"
        line += f" {med([f.rate for f in rq]):14,.0f}"
        line += f" {ratio:13.2f}x"
        if case.startswith("single"):
            r50, r99 = med([f.p50_ms for f in redis]), med([f.p99_ms for f in redis])
            q50, q99 = med([f.p50_ms for f in rq]), med([f.p99_ms for f in rq])
            line += f"   p50/p99 ms: Redis {r50:.3f}/{r99:.3f}, rocketq {q50:.3f}/{q99:.3f}"
        elif all(f.count for f in redis + rq):
            line += "   " + _cpu_text(
                Figure(
                    0,
                    server_us=med([f.server_us for f in redis]),
                    client_us=med([f.client_us for f in redis]),
                ),
                Figure(0, server_us=med([f.server_us for f in rq]), client_us=med([f.client_us for f in rq])),
            )
        print(line)
    here = med([p["single 100 B"][1].rate / p["single, other loop"][1].rate for p in rounds])
    print(f"  single sends on this run's loops / on {other_loop} loops (paired per round): {here:.2f}x")
    share = med([p["produce 1 KiB"][1].rate * 1024 / p["disk"][0].rate for p in rounds])
    disk = med([p["disk"][0].rate for p in rounds])
    print(
        f"  rocketq 1 KiB produce: {100 * share:.0f} % of the disk's fsync'd bandwidth "
        f"({disk / 1e6:,.0f} MB/s)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="alternations of the two systems (at least 2)")
    ap.add_argument("--seconds", type=float, default=3.0, help="duration of each produce and single case")
    ap.add_argument("--in-flight", type=int, default=2, help="batches/pipelines outstanding while producing")
    ap.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="rocketq's event loops (brokers, clients): uvloop (the default, when installed) or asyncio",
    )
    args = ap.parse_args()
    if args.rounds < 1 or args.seconds <= 0 or args.in_flight < 1:
        ap.error("--rounds and --in-flight must be at least 1 and --seconds positive")
    if shutil.which("redis-server") is None:
        raise SystemExit(INSTALL_REDIS)
    try:
        import hiredis  # noqa: F401
        import redis  # noqa: F401
    except ImportError:
        raise SystemExit(INSTALL_CLIENT) from None
    # read by every rocketq event loop built from here on: this process's and the brokers'
    os.environ[event_loop.EVENT_LOOP_ENV] = args.loop
    work = Path(tempfile.mkdtemp(prefix="rocketq-vs-redis-"))
    redis_server: RedisServer | None = None
    rq: RocketqServers | None = None
    rounds: list[dict[str, tuple[Figure, Figure]]] = []
    try:
        redis_server = RedisServer(work / "redis")
        other_loop = "asyncio" if event_loop.loop_kind() == "uvloop" else "uvloop"
        rq = RocketqServers(work / "rocketq", other_loop)
        version = redis_server.client.info("server")["redis_version"]
        print(
            f"Redis {version} (AOF on, client parser {redis_server.parser}) and rocketq "
            f"({event_loop.loop_kind()} event loops) on {os.cpu_count()} CPUs; "
            f"{args.seconds:g} s per case, batches of {BATCH}, {args.in_flight} in flight, "
            f"rocketq topics of {QUEUES} queues"
        )
        for index in range(args.rounds):
            pairs = one_round(index, redis_server, rq, args, work)
            print_round(index, pairs, other_loop)
            rounds.append(pairs)
    finally:
        if rq is not None:
            rq.close()
        if redis_server is not None:
            redis_server.close()
        shutil.rmtree(work, ignore_errors=True)
    print_medians(rounds, other_loop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
