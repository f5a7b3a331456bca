"""Cost of security: batch produce and lite-pull consume with ACL, TLS, both, and neither, one run.

Not a test.  For each of four set-ups it starts its own ``mqnamesrv`` and ``mqbroker``
(ASYNC_FLUSH, temp dir, free ports) through :mod:`rocketq.client.testing`, creates an 8-queue
topic and measures

* produce: ``AsyncProducer.send_batch`` of ``--batch`` 100 B messages, ``--concurrency`` batches
  in flight, each acknowledged (as ``produce_bench.py``), until ``--messages`` are sent;
* consume: a ``LitePullConsumer`` reading back everything produced (as ``consume_bench.py``),
  every body and queue offset touched.

Set-ups: ``plain`` (the reference, measured in the same run), ``acl`` (``aclEnable=true`` on the
broker, every request signed by the client with RocketMQ's AclClientRPCHook scheme and checked
by the broker), ``tls`` (``tls.server.mode=enforcing``, the client verifies the server against a
test CA made here with the ``openssl`` command) and ``acl+tls``.  It prints each rate with its
overhead against ``plain`` next to the targets (ACL <= 10 %, TLS <= 30 %).  The machine is shared
and small, so besides the wall-clock rates it prints the CPU time per message of the client, the
broker and the NameServer together (``/proc`` and ``time.process_time``: time spent waiting for
a core does not count), which is what the throughput of a dedicated machine is bound by; the
overheads against the targets are computed on it.  The set-ups run ``--rounds`` times in
alternating order; the best figure of each and, with several rounds, the median are printed.

    .venv/bin/python benchmarks/security_bench.py [--messages 300000] [--rounds 3] [--quick]
        [--setups plain,acl,tls,acl+tls]

``--transport`` measures the transport alone instead (no broker): a RemotingServer child process
answering an echo code, plain against TLS, with produce-like (60 KB requests) and consume-like
(260 KB responses) loads, 4 requests in flight, rounds alternating; it prints the client's and
the server's CPU per request (medians) and the TLS overhead.

    .venv/bin/python benchmarks/security_bench.py --transport [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocketq.client.admin import Admin
from rocketq.client.config import ClientConfig, ConsumeFromWhere
from rocketq.client.consumer import LitePullConsumer
from rocketq.client.errors import RocketQError
from rocketq.client.model import Message, SendStatus
from rocketq.client.producer import AsyncProducer, Producer
from rocketq.client.testing import spawn_broker, spawn_namesrv

TOPIC = "BenchSecurity"
QUEUES = 8
ACCESS_KEY, SECRET_KEY = "benchAdmin", "bench-secret-key"
TARGET_OVERHEAD = {"acl": 0.10, "tls": 0.30, "acl+tls": 0.40}  # acl+tls: the two targets added
SETUPS = ("plain", "acl", "tls", "acl+tls")
BROKER_CONF: dict[str, Any] = {
    "flushDiskType": "ASYNC_FLUSH",
    "mappedFileSizeCommitLog": 1 << 30,
    "mappedFileSizeConsumeQueue": 20 * 1_000_000,
    "sendThreadPoolQueueCapacity": 100_000,
    "waitTimeMillsInSendQueue": 5000,
    "maxTransferCountOnMessageInMemory": 1024,
    "maxTransferBytesOnMessageInMemory": 4 << 20,
}
PLAIN_ACL = f"""\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: {ACCESS_KEY}
    secretKey: {SECRET_KEY}
    whiteRemoteAddress: ""
    admin: true
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
"""


@dataclass(frozen=True)
class Pki:
    ca: Path
    cert: Path
    key: Path


def make_pki(directory: Path) -> Pki:
    """A test CA and a server certificate for 127.0.0.1 signed by it (``openssl`` command)."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    ca_ext = (
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    openssl(
        "req", "-x509", *ec, *ca_ext, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=ca"
    )
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (directory / "server.ext").write_text("subjectAltName=IP:127.0.0.1\n", encoding="utf-8")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "server.ext")  # fmt: skip
    return Pki(directory / "ca.pem", directory / "server.pem", directory / "server.key")


def setup_conf(setup: str, pki: Pki, acl_file: Path) -> tuple[dict[str, str], dict[str, Any], ClientConfig]:
    """(NameServer properties, broker.conf keys, client config) of one set-up."""
    ns_props: dict[str, str] = {}
    broker: dict[str, Any] = dict(BROKER_CONF)
    client: dict[str, Any] = {}
    if "tls" in setup:
        tls = {
            "tls.server.mode": "enforcing",
            "tls.server.certPath": str(pki.cert),
            "tls.server.keyPath": str(pki.key),
            "tls.enable": "true",
            "tls.client.trustCertPath": str(pki.ca),
        }
        ns_props.update(tls)
        broker.update(tls)
        client.update(use_tls=True, tls_trust_cert_path=str(pki.ca))
    if "acl" in setup:
        broker.update(aclEnable="true", aclFilePath=str(acl_file), accessKey=ACCESS_KEY, secretKey=SECRET_KEY)
        client.update(access_key=ACCESS_KEY, secret_key=SECRET_KEY)
    return ns_props, broker, ClientConfig(**client)


async def produce(
    ns_addr: str, client: ClientConfig, batch: int, concurrency: int, total: int
) -> tuple[int, float]:
    body = os.urandom(100)
    async with AsyncProducer(ns_addr, producer_group="bench-security", client=client) as producer:
        await producer.send_batch([Message(TOPIC, body) for _ in range(batch)])  # warm up
        sent = 0

        async def worker() -> None:
            nonlocal sent
            while sent < total:
                results = await producer.send_batch([Message(TOPIC, body) for _ in range(batch)])
                if any(r.send_status is not SendStatus.SEND_OK for r in results):
                    raise RuntimeError(f"send not OK: {results[0].send_status}")
                sent += batch

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return sent, time.perf_counter() - start


def consume(ns_addr: str, client: ClientConfig, total: int) -> float:
    consumer = LitePullConsumer(
        ns_addr,
        consumer_group="bench-security-consume",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        pull_batch_size=1024,
        auto_commit=False,
        pull_threshold_for_queue=4096,
        pull_threshold_for_all=50_000,
        client=client,
    )
    consumer.assign(consumer.fetch_message_queues(TOPIC))
    got = touched = 0
    start = time.perf_counter()
    consumer.start()
    try:
        deadline = start + 300
        while got < total and time.perf_counter() < deadline:
            for msg in consumer.poll(1000):
                touched += len(msg.body) + (msg.queue_offset >= 0)
                got += 1
        elapsed = time.perf_counter() - start
    finally:
        consumer.shutdown()
    if got < total:
        raise RuntimeError(f"consumed {got} of {total} messages")
    return got / elapsed


def create_topic(ns_addr: str, client: ClientConfig) -> None:
    with Admin(ns_addr, config=client) as admin:
        admin.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if admin.topic_route(TOPIC).queue_datas:
                    return
            except RocketQError:
                pass
            time.sleep(0.05)
    raise SystemExit("the topic never reached the NameServer")


def check_acl_enforced(ns_addr: str, client: ClientConfig) -> None:
    """An unsigned send must be refused, else the ACL figures would measure nothing."""
    unsigned = dataclasses.replace(client, access_key=None, secret_key=None)
    with Producer(
        ns_addr, producer_group="bench-unsigned", client=unsigned, retry_times_when_send_failed=0
    ) as p:
        try:
            p.send(Message(TOPIC, b"unsigned"))
        except RocketQError:
            return
    raise SystemExit("the broker accepted an unsigned send: ACL is not enforced")


@dataclass
class Figures:
    """One set-up's rates (wall clock) and CPU seconds per million messages (client + servers)."""

    produce_rate: float = 0.0
    consume_rate: float = 0.0
    produce_cpu: float = float("inf")
    consume_cpu: float = float("inf")

    def keep_best(self, other: Figures) -> None:
        self.produce_rate = max(self.produce_rate, other.produce_rate)
        self.consume_rate = max(self.consume_rate, other.consume_rate)
        self.produce_cpu = min(self.produce_cpu, other.produce_cpu)
        self.consume_cpu = min(self.consume_cpu, other.consume_cpu)

    @classmethod
    def median(cls, runs: list[Figures]) -> Figures:
        """Each figure's median over ``runs`` (the rounds of one set-up)."""
        return cls(*(statistics.median(getattr(r, f.name) for r in runs) for f in dataclasses.fields(cls)))


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid``, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds spent by this process and the server processes between start and stop."""

    def __init__(self, pids: list[int]) -> None:
        self._pids = pids
        self._start = self._now()

    def _now(self) -> float:
        return time.process_time() + sum(process_cpu_s(pid) for pid in self._pids)

    def seconds(self) -> float:
        return self._now() - self._start


def run_setup(setup: str, work: Path, pki: Pki, acl_file: Path, args: argparse.Namespace) -> Figures:
    ns_props, broker_conf, client = setup_conf(setup, pki, acl_file)
    work.mkdir(parents=True)
    props = work / "namesrv.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in ns_props.items()), encoding="utf-8")
    try:
        with (
            spawn_namesrv(work / "ns", "-c", str(props)) as ns,
            spawn_broker(work / "b", ns.addr, **broker_conf) as broker,
        ):
            create_topic(ns.addr, client)
            if "acl" in setup:
                check_acl_enforced(ns.addr, client)
            pids = [ns.pid, broker.pid]
            meter = CpuMeter(pids)
            sent, elapsed = asyncio.run(produce(ns.addr, client, args.batch, args.concurrency, args.messages))
            produce_cpu = meter.seconds()
            meter = CpuMeter(pids)
            consume_rate = consume(ns.addr, client, sent + args.batch)  # with the warm-up batch
            consume_cpu = meter.seconds()
            return Figures(sent / elapsed, consume_rate, 1e6 * produce_cpu / sent, 1e6 * consume_cpu / sent)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the CommitLog files are large


def _more(value: float, reference: float) -> str:
    return f"{100 * (value / reference - 1):+6.1f} %"


def _less(rate: float, reference: float) -> str:
    return f"{100 * (1 - rate / reference):+6.1f} %"


def report(best: dict[str, Figures], args: argparse.Namespace, what: str = "best") -> None:
    ref = best["plain"]
    print(
        f"\n{what} of {args.rounds} round(s); 100 B messages, batch {args.batch} x {args.concurrency} in"
        f" flight, {os.cpu_count()} CPUs, client and servers on this machine"
    )
    print("\nCPU seconds per million messages (client + broker + NameServer; overhead vs plain)")
    print(f"{'set-up':9} {'produce':>9} {'overhead':>9} {'consume':>9} {'overhead':>9}   target")
    for setup in args.setups:
        f = best[setup]
        target = "reference" if setup == "plain" else f"overhead <= {100 * TARGET_OVERHEAD[setup]:.0f} %"
        print(
            f"{setup:9} {f.produce_cpu:9.2f} {_more(f.produce_cpu, ref.produce_cpu):>9}"
            f" {f.consume_cpu:9.2f} {_more(f.consume_cpu, ref.consume_cpu):>9}   {target}"
        )
    print("\nthroughput, wall clock (msg/s; loss vs plain; noisy on a shared machine)")
    print(f"{'set-up':9} {'produce':>11} {'loss':>9} {'consume':>11} {'loss':>9}")
    for setup in args.setups:
        f = best[setup]
        print(
            f"{setup:9} {f.produce_rate:11,.0f} {_less(f.produce_rate, ref.produce_rate):>9}"
            f" {f.consume_rate:11,.0f} {_less(f.consume_rate, ref.consume_rate):>9}"
        )


# -- the transport alone (--transport) ----------------------------------------------------------

ECHO_CODE = 4242
TRANSPORT_LOADS = {"produce": (60_000, 300), "consume": (300, 260_000)}  # (request, response) bytes


def serve_transport(mode: str, pki_dir: str, response_size: int) -> None:
    """Child process of ``--transport``: a RemotingServer answering ECHO_CODE with ``response_size``
    bytes, plain or TLS enforcing; prints its port, stops on SIGTERM."""
    import signal
    import ssl

    from rocketq.client.transport.tls import TlsMode
    from rocketq.server import RemotingServer

    body = os.urandom(response_size)

    async def answer(cmd: Any, channel: Any) -> Any:
        return cmd.make_response(0, None, body=body)

    async def run() -> None:
        ctx = None
        if mode == "tls":
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(f"{pki_dir}/server.pem", f"{pki_dir}/server.key")
        server = RemotingServer(tls_mode=TlsMode.ENFORCING if ctx else TlsMode.DISABLED, ssl_context=ctx)
        server.register(ECHO_CODE, answer)
        _, port = await server.start()
        print(port, flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await server.stop(0)

    asyncio.run(run())


def transport_round(mode: str, load: str, pki: Pki, requests: int) -> tuple[float, float]:
    """(client, server) CPU microseconds per request of one run: 4 requests in flight."""
    from rocketq.client.remoting.command import RemotingCommand
    from rocketq.client.transport.aio import RemotingClient
    from rocketq.client.transport.tls import client_ssl_context

    request_size, response_size = TRANSPORT_LOADS[load]
    args = [sys.executable, __file__, "--serve", mode, str(pki.ca.parent), str(response_size)]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        addr = f"127.0.0.1:{int(server.stdout.readline())}"
        body = os.urandom(request_size)

        async def run() -> tuple[float, float]:
            ctx = client_ssl_context(trust_cert_path=str(pki.ca)) if mode == "tls" else None
            client = RemotingClient(ssl_context=ctx)
            await client.invoke(addr, RemotingCommand.request(ECHO_CODE, body=body), 10_000)  # connect
            left = requests

            async def worker() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    await client.invoke(addr, RemotingCommand.request(ECHO_CODE, body=body), 10_000)

            cpu, server_cpu = time.process_time(), process_cpu_s(server.pid)
            await asyncio.gather(*(worker() for _ in range(4)))
            cpu, server_cpu = time.process_time() - cpu, process_cpu_s(server.pid) - server_cpu
            await client.close()
            return 1e6 * cpu / requests, 1e6 * server_cpu / requests

        return asyncio.run(run())
    finally:
        server.terminate()
        server.wait(10)


def transport_bench(pki: Pki, rounds: int, requests: int) -> None:
    """Plain against TLS on the transport alone, rounds alternating, medians printed."""
    for load, (req, resp) in TRANSPORT_LOADS.items():
        runs: dict[str, list[tuple[float, float]]] = {"plain": [], "tls": []}
        for round_no in range(rounds):
            for mode in ("plain", "tls") if round_no % 2 == 0 else ("tls", "plain"):
                runs[mode].append(transport_round(mode, load, pki, requests))
        med = {
            m: (statistics.median(c for c, _ in r), statistics.median(s for _, s in r))
            for m, r in runs.items()
        }
        print(f"\n{load}-like: {req} B requests, {resp} B responses, 4 in flight; CPU us per request, median")
        print(f"{'':6} {'client':>8} {'server':>8} {'total':>8}")
        for mode, (c, srv) in med.items():
            print(f"{mode:6} {c:8.0f} {srv:8.0f} {c + srv:8.0f}")
        plain, tls = sum(med["plain"]), sum(med["tls"])
        print(f"TLS overhead {_more(tls, plain)}")


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":  # the child of --transport
        serve_transport(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=300_000, help="messages produced by each set-up")
    ap.add_argument("--batch", type=int, default=500, help="messages per send_batch")
    ap.add_argument("--concurrency", type=int, default=4, help="batches in flight")
    ap.add_argument("--rounds", type=int, default=3, help="runs of every set-up (best kept)")
    ap.add_argument("--quick", action="store_true", help="100 000 messages, one round")
    ap.add_argument(
        "--transport",
        action="store_true",
        help="measure the transport alone instead: an echo server, plain against TLS (--rounds rounds)",
    )
    ap.add_argument(
        "--setups",
        default=",".join(SETUPS),
        help=f"comma-separated subset of {','.join(SETUPS)} (plain always)",
    )
    args = ap.parse_args()
    chosen = set(args.setups.split(",")) | {"plain"}
    if not chosen <= set(SETUPS):
        raise SystemExit(f"--setups: unknown set-up(s) {sorted(chosen - set(SETUPS))}; expected {SETUPS}")
    args.setups = tuple(s for s in SETUPS if s in chosen)
    if args.quick:
        args.messages, args.rounds = 100_000, 1
    if shutil.which("openssl") is None:
        raise SystemExit("needs the openssl command to make the test certificates")
    work = Path(tempfile.mkdtemp(prefix="rocketq-security-bench-"))
    best = {s: Figures() for s in SETUPS}
    runs: dict[str, list[Figures]] = {s: [] for s in SETUPS}
    try:
        pki_dir = work / "pki"
        pki_dir.mkdir()
        pki = make_pki(pki_dir)
        if args.transport:
            transport_bench(pki, max(args.rounds, 3), 400 if args.quick else 1500)
            return 0
        acl_file = work / "plain_acl.yml"
        acl_file.write_text(PLAIN_ACL, encoding="utf-8")
        for round_no in range(args.rounds):
            order = args.setups if round_no % 2 == 0 else tuple(reversed(args.setups))
            for setup in order:
                f = run_setup(setup, work / f"{setup}-{round_no}", pki, acl_file, args)
                print(
                    f"round {round_no + 1} {setup:8} produce {f.produce_rate:9,.0f} msg/s"
                    f" {f.produce_cpu:6.2f} CPU s/M  consume {f.consume_rate:9,.0f} msg/s"
                    f" {f.consume_cpu:6.2f} CPU s/M"
                )
                best[setup].keep_best(f)
                runs[setup].append(f)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(best, args)
    if args.rounds > 1:  # on a shared machine the median is the steadier of the two
        report({s: Figures.median(r) for s, r in runs.items() if r}, args, "median")
    return 0


if __name__ == "__main__":
    sys.exit(main())
