"""The gRPC endpoint (``mqproxy``) with the official Python SDK next to rocketq's remoting clients.

Not a test.  Starts its own ``mqnamesrv``, ``mqbroker`` (ASYNC_FLUSH) and ``mqproxy`` (metrics on,
``metricsExporterType=PROM``) on free ports, plus a *null* gRPC server: rocketq's proxy service
skeleton on grpcio's asyncio server that answers every call at once without a broker (this file,
``--null-server``).  The official SDK, ``rocketmq-python-client`` 5.1.2, runs in its own venv (the
one the sdk_python fixture of integration_tests/conftest.py builds under ``~/.cache/rocketq-tests``) as one
long-lived worker process that takes one case at a time.  Each case runs for ``--seconds`` (produce)
or until ``--consume-messages`` are acked (consume); cases alternate between the endpoint and its
remoting counterpart, the order flipped every round, for ``--rounds`` rounds (2 by default: about
2.5 minutes):

* produce async: the SDK's ``send_async``, ``--inflight`` sends in flight (a semaphore released by
  each future), vs ``AsyncProducer.send`` from ``--inflight`` tasks (one message each, as the SDK's
  SendMessage carries one message); 100 B and 1 KiB bodies; every message acknowledged;
* produce sync: the SDK's ``send`` one at a time vs the blocking ``Producer.send`` one at a time;
* consume: ``SimpleConsumer.receive(32)`` then ``ack`` of each message in turn (the SDK's
  ``ack_async`` needs an event loop in the calling thread in 5.1.2), ``--consumers`` threads sharing
  one consumer, vs rocketq's remoting POP consumer ``AsyncSimpleConsumer.receive(32)`` then
  ``await ack`` of each message in turn, ``--consumers`` tasks: the same POP + ACK_MESSAGE work on
  the broker.  Each side drains a topic
  of its own, preloaded with the same number of 100 B messages.

The SDK against the null server is the ceiling: what the SDK and a Python gRPC server cost with no
work behind them; the endpoint cannot beat it.  Every figure is noisy on a shared 2-core machine:
the ratios within one run are what counts.  The CPU each process used per message (``/proc``: the
proxy, the null server, the SDK's worker, the remoting client) is printed too: CPU time, unlike
rates, depends little on what else runs.  Target: endpoint produce >= 50 % of remoting.

    .venv/bin/python benchmarks/grpc_bench.py [--rounds 2] [--seconds 3] [--profile DIR]

``--profile DIR`` runs the proxy under cProfile and prints its top functions at the end
(``DIR/proxy.prof``; the proxy's rates and CPU figures then include the profiler's cost).  cProfile
sees the event loop's thread only: grpcio's completion handling shows up as the time of
``Context.run`` itself, and its C threads not at all (they used about a tenth of the proxy's CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import pstats
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from rocketq.client.consumer import AsyncSimpleConsumer
from rocketq.client.launcher import PROXY_BOOT_RE, spawn_broker, spawn_namesrv
from rocketq.client.model import Message
from rocketq.client.producer import AsyncProducer, Producer
from rocketq.client.remoting.pop import ConsumeInitMode
from rocketq.client.testing import create_topic

TARGET_RATIO = 0.5
QUEUES = 8
PRODUCE_TOPIC = "BenchGrpcProduce"
ROOT = Path(__file__).resolve().parent.parent
SDK_FIXTURE_FILE = ROOT / "integration_tests" / "conftest.py"

#: the SDK side, run by the SDK venv's interpreter: one JSON command per stdin line, one JSON answer
SDK_WORKER = r'''
import json, os, sys, threading, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

producers = {}

def producer_for(addr, topic):
    key = (addr, topic)
    if key not in producers:
        p = Producer(ClientConfiguration(addr, Credentials(), request_timeout=10), (topic,))
        p.startup()
        for _ in range(20):  # route, connection and settings before the clock starts
            m = Message(); m.topic = topic; m.body = b"warm-up"; p.send(m)
        producers[key] = p
    return producers[key]

def produce(addr, topic, size, seconds, inflight):
    p = producer_for(addr, topic)
    body = os.urandom(size)
    acked = errors = 0
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(max(inflight, 1))
    def done(future):
        nonlocal acked, errors
        with lock:
            if future.exception() is None: acked += 1
            else: errors += 1
        slots.release()
    start = time.perf_counter(); deadline = start + seconds
    while time.perf_counter() < deadline:
        m = Message(); m.topic = topic; m.body = body
        if inflight == 0:
            try:
                p.send(m); acked += 1
            except Exception:
                errors += 1
        else:
            slots.acquire()
            p.send_async(m).add_done_callback(done)
    for _ in range(max(inflight, 1)):  # every send answered
        slots.acquire()
    return {"acked": acked, "errors": errors, "elapsed": time.perf_counter() - start}

def consume(addr, topic, group, count, consumers):
    c = SimpleConsumer(ClientConfiguration(addr, Credentials(), request_timeout=10), group,
                       {topic: FilterExpression()}, await_duration=1)
    c.startup()
    acked = errors = 0
    lock = threading.Lock()
    start = time.perf_counter()
    finished = [None]
    def loop():
        nonlocal acked, errors
        try:
            while acked < count and time.perf_counter() - start < 300:
                for m in c.receive(32, 30):
                    c.ack(m)  # ack_async cannot run off the SDK's loop thread in 5.1.2
                    with lock:
                        acked += 1
                        if acked >= count and finished[0] is None:
                            finished[0] = time.perf_counter()
        except Exception as exc:
            with lock:
                errors += 1
            print("consume failed:", repr(exc), file=sys.stderr, flush=True)
    threads = [threading.Thread(target=loop) for _ in range(consumers)]
    for t in threads: t.start()
    for t in threads: t.join()
    elapsed = (finished[0] or time.perf_counter()) - start
    c.shutdown()
    return {"acked": acked, "errors": errors, "elapsed": elapsed}

def register(addr, topic, group):
    """One empty receive: the group's offsets start here (the proxy pops with init mode MAX)."""
    c = SimpleConsumer(ClientConfiguration(addr, Credentials(), request_timeout=10), group,
                       {topic: FilterExpression()}, await_duration=1)
    c.startup()
    for _ in range(2):
        for m in c.receive(32, 30): c.ack(m)
    c.shutdown()
    return {}

print("READY", flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    op = cmd.pop("op")
    if op == "quit": break
    result = {"produce": produce, "consume": consume, "register": register}[op](**cmd)
    print("RESULT " + json.dumps(result), flush=True)
for p in producers.values(): p.shutdown()
'''


# ---------------------------------------------------------------------------------------- processes


def sdk_python() -> Path:
    """The SDK venv's interpreter, from the integration tests' sdk_python fixture (built once, cached)."""
    spec = importlib.util.spec_from_file_location("_grpc_sdk_fixtures", SDK_FIXTURE_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    try:
        python: Path = module.sdk_python.__wrapped__()
    except BaseException as exc:  # pytest.skip: PyPI unreachable
        raise SystemExit(f"cannot build the SDK's venv: {exc}") from None
    return python


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class SdkWorker:
    """The SDK worker process: ``call(op, **args)`` sends one command and waits for its answer."""

    def __init__(self, python: Path, work: Path) -> None:
        script = work / "sdk_worker.py"
        script.write_text(SDK_WORKER)
        self.log = work / "sdk_worker.log"
        self.proc = subprocess.Popen(
            [str(python), str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.log, "wb"),  # closed with the process
            text=True,
            cwd=str(work),
        )
        self._read_until("READY")

    def _read_until(self, prefix: str) -> str:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        raise SystemExit(f"the SDK worker died; its log:\n{self.log.read_text()[-3000:]}")

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self._read_until("RESULT "))
        return answer

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.call_quit()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def call_quit(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write('{"op": "quit"}\n')
        self.proc.stdin.close()


class Child:
    """A server process of this benchmark (the proxy, the null server) with its log and address."""

    def __init__(self, args: list[str], log: Path, pattern: re.Pattern[str], timeout_s: float = 60) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            stdin=subprocess.DEVNULL,
            stdout=open(log, "wb"),  # closed with the process
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while (match := pattern.search(log.read_text(errors="replace"))) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"{args} did not start; its log:\n{log.read_text()[-3000:]}")
            time.sleep(0.05)
        self.addr = match.group(1)

    def cpu_s(self) -> float:
        return cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        """SIGTERM (a profiled proxy writes its profile on the way out), SIGKILL after 30 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_proxy(work: Path, ns_addr: str, profile: Path | None) -> Child:
    conf = {
        "grpcServerBindAddress": "127.0.0.1",
        "grpcServerPort": 0,
        "metricsExporterType": "PROM",
        "metricsPromExporterPort": 0,
        "grpcClientConsumerMinLongPollingTimeoutMillis": 1000,
    }
    (work / "rmq-proxy.json").write_text(json.dumps(conf))
    head = ["-m", "cProfile", "-o", str(profile)] if profile is not None else []
    args = [*head, "-m", "rocketq.proxy", "-n", ns_addr, "-pc", str(work / "rmq-proxy.json")]
    return Child(args, work / "proxy.log", PROXY_BOOT_RE)


# ---------------------------------------------------------------------------------------- null server

NULL_RE = re.compile(r"null gRPC server listening on (\S+:\d+)")


def null_server_main() -> int:
    """``--null-server``: answer the SDK's calls at once, no broker behind (the SDK's ceiling)."""
    import grpc
    from google.protobuf.timestamp_pb2 import Timestamp

    from rocketq.proxy.config import ProxyConfig
    from rocketq.proxy.settings import server_settings
    from rocketq.proxy.status import ok
    from rocketq.proxy.v2 import definition_pb2 as pb
    from rocketq.proxy.v2 import service_pb2 as spb
    from rocketq.proxy.v2.service_pb2_grpc import (
        MessagingServiceServicer,
        add_MessagingServiceServicer_to_server,
    )

    config = ProxyConfig(namesrv_addr="127.0.0.1:1")
    body = b"x" * 100
    import hashlib

    digest = pb.Digest(type=pb.DigestType.MD5, checksum=hashlib.md5(body).hexdigest().upper())

    class Null(MessagingServiceServicer):
        def __init__(self, endpoints: pb.Endpoints) -> None:
            self.endpoints = endpoints
            self.offset = 0

        async def QueryRoute(self, request: Any, context: Any) -> Any:
            broker = pb.Broker(name="null", id=0, endpoints=self.endpoints)
            types = [
                pb.MessageType.NORMAL,
                pb.MessageType.FIFO,
                pb.MessageType.DELAY,
                pb.MessageType.TRANSACTION,
            ]
            queues = [
                pb.MessageQueue(
                    topic=request.topic,
                    id=i,
                    permission=pb.Permission.READ_WRITE,
                    broker=broker,
                    accept_message_types=types,
                )
                for i in range(QUEUES)
            ]
            return spb.QueryRouteResponse(status=ok(), message_queues=queues)

        async def Heartbeat(self, request: Any, context: Any) -> Any:
            return spb.HeartbeatResponse(status=ok())

        async def Telemetry(self, requests: Any, context: Any) -> AsyncIterator[Any]:
            async for command in requests:
                if command.WhichOneof("command") == "settings":
                    yield spb.TelemetryCommand(
                        status=ok(), settings=server_settings(command.settings, config)
                    )

        async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
            return spb.NotifyClientTerminationResponse(status=ok())

        async def SendMessage(self, request: Any, context: Any) -> Any:
            entries = []
            for m in request.messages:
                self.offset += 1
                entries.append(
                    spb.SendResultEntry(
                        status=ok(), message_id=m.system_properties.message_id, offset=self.offset
                    )
                )
            return spb.SendMessageResponse(status=ok(), entries=entries)

        async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
            yield spb.ReceiveMessageResponse(status=ok())
            now = Timestamp()
            now.GetCurrentTime()
            for _ in range(request.batch_size or 32):
                self.offset += 1
                sp = pb.SystemProperties(
                    message_id=f"{self.offset:032X}",
                    body_digest=digest,
                    body_encoding=pb.Encoding.IDENTITY,
                    message_type=pb.MessageType.NORMAL,
                    born_timestamp=now,
                    born_host="127.0.0.1:1",
                    store_timestamp=now,
                    store_host="127.0.0.1:1",
                    queue_id=0,
                    queue_offset=self.offset,
                    delivery_attempt=1,
                    receipt_handle=f"null {self.offset}",
                )
                yield spb.ReceiveMessageResponse(
                    message=pb.Message(topic=request.message_queue.topic, system_properties=sp, body=body)
                )
            yield spb.ReceiveMessageResponse(delivery_timestamp=now)

        async def AckMessage(self, request: Any, context: Any) -> Any:
            entries = [
                spb.AckMessageResultEntry(
                    message_id=e.message_id, receipt_handle=e.receipt_handle, status=ok()
                )
                for e in request.entries
            ]
            return spb.AckMessageResponse(status=ok(), entries=entries)

    async def serve() -> None:
        server = grpc.aio.server()
        port = server.add_insecure_port("127.0.0.1:0")
        endpoints = pb.Endpoints(
            scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host="127.0.0.1", port=port)]
        )
        add_MessagingServiceServicer_to_server(Null(endpoints), server)  # type: ignore[no-untyped-call]
        await server.start()
        print(f"null gRPC server listening on 127.0.0.1:{port}", flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await server.stop(1)

    asyncio.run(serve())
    return 0


# ---------------------------------------------------------------------------------------- remoting side


def remoting_produce(ns_addr: str, size: int, seconds: float, inflight: int) -> dict[str, Any]:
    body = os.urandom(size)
    if inflight == 0:
        with Producer(ns_addr, producer_group="bench-grpc-sync") as producer:
            for _ in range(20):
                producer.send(Message(PRODUCE_TOPIC, b"warm-up"))
            acked = 0
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                producer.send(Message(PRODUCE_TOPIC, body))
                acked += 1
            return {"acked": acked, "errors": 0, "elapsed": time.perf_counter() - start}

    async def run() -> dict[str, Any]:
        async with AsyncProducer(ns_addr, producer_group="bench-grpc-async") as producer:
            for _ in range(20):
                await producer.send(Message(PRODUCE_TOPIC, b"warm-up"))
            acked = 0
            start = time.perf_counter()
            deadline = start + seconds

            async def worker() -> None:
                nonlocal acked
                while time.perf_counter() < deadline:
                    await producer.send(Message(PRODUCE_TOPIC, body))
                    acked += 1

            await asyncio.gather(*(worker() for _ in range(inflight)))
            return {"acked": acked, "errors": 0, "elapsed": time.perf_counter() - start}

    return asyncio.run(run())


async def _remoting_consume(
    ns_addr: str, topic: str, group: str, count: int, consumers: int
) -> dict[str, Any]:
    acked = 0
    finished: float | None = None
    async with AsyncSimpleConsumer(
        ns_addr, group, {topic: "*"}, await_duration_s=1, init_mode=ConsumeInitMode.MIN
    ) as consumer:
        start = time.perf_counter()

        async def loop() -> None:
            nonlocal acked, finished
            while acked < count and time.perf_counter() - start < 300:
                for m in await consumer.receive(32, 30):
                    await consumer.ack(m)  # one at a time, as the SDK's loop
                    acked += 1
                    if acked >= count and finished is None:
                        finished = time.perf_counter()

        await asyncio.gather(*(loop() for _ in range(consumers)))
        return {"acked": acked, "errors": 0, "elapsed": (finished or time.perf_counter()) - start}


def remoting_consume(ns_addr: str, topic: str, group: str, count: int, consumers: int) -> dict[str, Any]:
    return asyncio.run(_remoting_consume(ns_addr, topic, group, count, consumers))


def preload(ns_addr: str, topic: str, count: int) -> None:
    async def run() -> None:
        async with AsyncProducer(ns_addr, producer_group="bench-grpc-preload") as producer:
            body = os.urandom(100)
            for first in range(0, count, 200):
                await producer.send_batch([Message(topic, body) for _ in range(min(200, count - first))])

    asyncio.run(run())


# ---------------------------------------------------------------------------------------- the run


class Results:
    """Per case: the endpoint, remoting and null-server rates of every round, and proxy CPU."""

    def __init__(self) -> None:
        self.rates: dict[tuple[str, str], list[float]] = {}
        #: (case, process) -> CPU microseconds per message of each round
        self.cpu_us: dict[tuple[str, str], list[float]] = {}

    def add(self, case: str, side: str, result: dict[str, Any]) -> float:
        if result["errors"] or not result["acked"]:
            raise SystemExit(
                f"{case} {side}: {result['errors']} sends or receives failed, {result['acked']} acknowledged"
                " (the SDK worker's errors are in its log, sdk_worker.log)"
            )
        rate = float(result["acked"]) / float(result["elapsed"])
        self.rates.setdefault((case, side), []).append(rate)
        return rate

    def note_cpu(self, case: str, process: str, seconds: float, result: dict[str, Any]) -> None:
        self.cpu_us.setdefault((case, process), []).append(seconds * 1e6 / max(result["acked"], 1))

    def median(self, case: str, side: str) -> float:
        return statistics.median(self.rates[(case, side)])


@contextlib.contextmanager
def cluster(work: Path, profile: Path | None) -> Iterator[tuple[str, Child, Child]]:
    with spawn_namesrv(work / "ns") as ns, spawn_broker(work / "b", ns.addr, flushDiskType="ASYNC_FLUSH"):
        proxy = start_proxy(work, ns.addr, profile)
        null = Child([str(Path(__file__).resolve()), "--null-server"], work / "null.log", NULL_RE)
        try:
            yield ns.addr, proxy, null
        finally:
            null.stop()
            proxy.stop()


def _order(round_no: int) -> list[str]:
    """The sides of a case in this round: endpoint and remoting swap places every round."""
    return ["endpoint", "remoting", "null"] if round_no % 2 == 0 else ["remoting", "endpoint", "null"]


def _sdk_case(
    sdk: SdkWorker, proxy: Child, target: Child, results: Results, case: str, **cmd: Any
) -> dict[str, Any]:
    """One SDK case, with the CPU per message of the server and of the SDK's process."""
    server, client = target.cpu_s(), cpu_seconds(sdk.proc.pid)
    result = sdk.call(**cmd, addr=target.addr)
    names = ("proxy", "SDK -> proxy") if target is proxy else ("null server", "SDK -> null")
    server_used, client_used = target.cpu_s() - server, cpu_seconds(sdk.proc.pid) - client
    for name, used in zip(names, (server_used, client_used), strict=True):
        results.note_cpu(case, name, used, result)
    return result


def measure_produce(
    args: argparse.Namespace,
    round_no: int,
    ns_addr: str,
    proxy: Child,
    null: Child,
    sdk: SdkWorker,
    results: Results,
) -> None:
    for inflight in (args.inflight, 0):
        for size in (100, 1024):
            label = "100 B" if size == 100 else "1 KiB"
            case = f"produce async {label} x{inflight}" if inflight else f"produce sync {label}"
            for side in _order(round_no):
                if side == "remoting":
                    cpu = time.process_time()
                    result = remoting_produce(ns_addr, size, args.seconds, inflight)
                    results.note_cpu(case, "remoting client", time.process_time() - cpu, result)
                else:
                    result = _sdk_case(
                        sdk,
                        proxy,
                        proxy if side == "endpoint" else null,
                        results,
                        case,
                        op="produce",
                        topic=PRODUCE_TOPIC,
                        size=size,
                        seconds=args.seconds,
                        inflight=inflight,
                    )
                rate = results.add(case, side, result)
                print(f"  {case:26} {side:9} {rate:9,.0f} msg/s", flush=True)


def measure_consume(
    args: argparse.Namespace,
    round_no: int,
    ns_addr: str,
    proxy: Child,
    null: Child,
    sdk: SdkWorker,
    results: Results,
) -> None:
    case = f"consume 100 B x{args.consumers}"
    topic = {side: f"BenchGrpcConsume{round_no}{side.capitalize()}" for side in ("endpoint", "remoting")}
    group = {side: f"bench-grpc-{side}-{round_no}" for side in ("endpoint", "remoting")}
    sdk.call("register", addr=proxy.addr, topic=topic["endpoint"], group=group["endpoint"])
    for name in topic.values():
        preload(ns_addr, name, args.consume_messages)
    for side in _order(round_no):
        if side == "remoting":
            cpu = time.process_time()
            result = remoting_consume(
                ns_addr, topic[side], group[side], args.consume_messages, args.consumers
            )
            results.note_cpu(case, "remoting client", time.process_time() - cpu, result)
        else:
            result = _sdk_case(
                sdk,
                proxy,
                proxy if side == "endpoint" else null,
                results,
                case,
                op="consume",
                topic=topic.get(side, "null-topic"),
                group=group.get(side, "null-group"),
                count=args.consume_messages,
                consumers=args.consumers,
            )
        rate = results.add(case, side, result)
        print(f"  {case:26} {side:9} {rate:9,.0f} msg/s", flush=True)


def report(results: Results, args: argparse.Namespace) -> None:
    print(
        f"\nmedians of {args.rounds} rounds, msg/s (endpoint = SDK 5.1.2 -> mqproxy -> broker;"
        " remoting = rocketq's client -> broker; ceiling = SDK -> null gRPC server)"
    )
    print(
        f"{'case':26} {'endpoint':>9} {'remoting':>9} {'ratio':>6} {'ceiling':>9} {'of ceil':>7}"
        "  per round (endpoint / remoting)"
    )
    cases = list(dict.fromkeys(case for case, _ in results.rates))
    for case in cases:
        e, r, n = (results.median(case, side) for side in ("endpoint", "remoting", "null"))
        rounds = "  ".join(
            f"{a:,.0f}/{b:,.0f}"
            for a, b in zip(results.rates[(case, "endpoint")], results.rates[(case, "remoting")], strict=True)
        )
        print(f"{case:26} {e:9,.0f} {r:9,.0f} {e / r:6.0%} {n:9,.0f} {e / n:7.0%}  {rounds}")
    who = ("proxy", "null server", "SDK -> proxy", "SDK -> null", "remoting client")
    print(
        f"\nCPU microseconds per message (medians; /proc, all threads)\n{'case':26}"
        + "".join(f"{w:>16}" for w in who)
    )
    for case in cases:
        cpu = (statistics.median(results.cpu_us[(case, w)]) for w in who)
        print(f"{case:26}" + "".join(f"{c:16,.0f}" for c in cpu))
    for case in cases:
        if case.startswith("produce"):
            ratio = results.median(case, "endpoint") / results.median(case, "remoting")
            verdict = "met" if ratio >= TARGET_RATIO else "MISSED"
            print(f"target endpoint >= {TARGET_RATIO:.0%} of remoting, {case}: {ratio:.0%} {verdict}")


def main() -> int:
    if "--null-server" in sys.argv[1:]:
        return null_server_main()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="rounds, the order flipped each round (>= 2)")
    ap.add_argument("--seconds", type=float, default=3.0, help="duration of each produce case")
    ap.add_argument("--inflight", type=int, default=16, help="async sends in flight, both sides")
    ap.add_argument("--consumers", type=int, default=4, help="receive loops, both sides")
    ap.add_argument("--consume-messages", type=int, default=4000, help="messages drained per consume case")
    ap.add_argument("--profile", type=Path, default=None, help="run the proxy under cProfile, dump in DIR")
    args = ap.parse_args()
    if args.rounds < 1 or args.seconds <= 0 or args.inflight < 1 or args.consumers < 1:
        ap.error("--rounds, --seconds, --inflight and --consumers must be positive")
    profile: Path | None = None
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        profile = args.profile.resolve() / "proxy.prof"
    python = sdk_python()
    results = Results()
    with tempfile.TemporaryDirectory(prefix="rocketq-grpc-bench-") as tmp:
        work = Path(tmp)
        with cluster(work, profile) as (ns_addr, proxy, null):
            topics = [PRODUCE_TOPIC] + [
                f"BenchGrpcConsume{r}{side}" for r in range(args.rounds) for side in ("Endpoint", "Remoting")
            ]
            for topic in topics:
                create_topic(ns_addr, topic, QUEUES)
            print(
                f"proxy {proxy.addr} (metrics on), null server {null.addr}, {os.cpu_count()} CPUs,"
                f" {args.seconds:.0f} s per produce case, {args.consume_messages} messages per consume case"
            )
            sdk = SdkWorker(python, work)
            try:
                for round_no in range(args.rounds):
                    print(f"\nround {round_no + 1}/{args.rounds}")
                    measure_produce(args, round_no, ns_addr, proxy, null, sdk, results)
                    measure_consume(args, round_no, ns_addr, proxy, null, sdk, results)
            finally:
                sdk.close()
    report(results, args)
    if profile is not None and profile.exists():
        print(f"\n--- proxy, whole run: top 30 by total time ({profile}) ---")
        pstats.Stats(str(profile)).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
