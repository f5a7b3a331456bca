"""Produce throughput with the Prometheus exporter off and on, in the same run (docs/observability.md).

Not a test.  Starts one ``mqnamesrv`` and two identical brokers (ASYNC_FLUSH, temp dirs, free
ports) through :mod:`rocketq.client.launcher`: ``bench-off`` with ``metricsExporterType=DISABLE``
and ``bench-on`` with ``metricsExporterType=PROM``, each with a 4-queue topic of its own.  Each
round drives both brokers *at once* from one producer, the same number of requests in flight to
each, for ``--seconds`` (so load changes on a shared machine hit both alike), in two workloads:

* single: ``AsyncProducer.send`` of 100 B messages, ``--concurrency`` sends in flight per broker
  (the per-request cost: the RPC timer and the messages-in counters are paid per request);
* batch: ``send_batch`` of 100 x 100 B, 4 batches in flight per broker.

A thread scrapes ``bench-on``'s exporter every second throughout (and checks the text parses and
``rocketmq_messages_in_total`` never goes down), so "on" includes collection and scraping.
It prints the median msg/s of each side, the median of the per-round differences, and the target
(on within 5 % of off).

First, the same comparison without the network and the client, which on a shared machine cost far
more than the broker and drown a few microseconds: an in-process broker (PROM on, scraped every
second) answers ``--inproc-sends`` SEND_MESSAGE_V2 requests (100 B) per round and side, in blocks
of 64 alternating between its send processor with the metrics hooks and RPC timer and one
without them (same store), and prints the median CPU time per send of each side (the event
loop thread's CPU time, so other processes on a shared machine do not count).

    .venv/bin/python benchmarks/metrics_bench.py [--rounds 7] [--seconds 3] [--concurrency 32] [--inproc-only]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from prometheus_client.parser import text_string_to_metric_families

from rocketq.broker.config_loader import load_broker_config
from rocketq.broker.processor.send import SendMessageProcessor
from rocketq.broker.server import BrokerController
from rocketq.client.admin import Admin
from rocketq.client.launcher import ServerProcess, spawn_broker, spawn_namesrv
from rocketq.client.model import Message
from rocketq.client.producer import AsyncProducer
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import SendMessageRequestHeaderV2
from rocketq.server import Channel

TARGET_PERCENT = 5.0
TOPIC_OFF, TOPIC_ON = "MetricsBenchOff", "MetricsBenchOn"
BROKER_CONF: dict[str, Any] = {
    "flushDiskType": "ASYNC_FLUSH",
    "mappedFileSizeCommitLog": 1 << 28,
    "sendThreadPoolQueueCapacity": 100_000,
    "waitTimeMillsInSendQueue": 5000,
}


class Scraper:
    """Scrapes one exporter every second while running; counts scrapes and failures."""

    def __init__(self, addr: str) -> None:
        self.url = f"http://{addr}/metrics"
        self.scrapes = 0
        self.failures: list[str] = []
        self.messages_in = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Scraper:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    text = response.read().decode()
                total = 0.0
                for family in text_string_to_metric_families(text):
                    if family.name == "rocketmq_messages_in":
                        total += sum(s.value for s in family.samples if s.name.endswith("_total"))
                if total < self.messages_in:
                    self.failures.append(
                        f"rocketmq_messages_in_total went down: {self.messages_in} -> {total}"
                    )
                self.messages_in = total
                self.scrapes += 1
            except Exception as exc:  # reported at the end: the exporter must keep answering
                self.failures.append(repr(exc))
            self._stop.wait(1.0)


async def _both(ns_addr: str, batch: int, concurrency: int, seconds: float) -> dict[str, float]:
    """Sends of ``batch`` messages (1: single sends) to both brokers at once, ``concurrency`` in
    flight per broker from one producer: msg/s per side, measured under the same conditions."""
    body = os.urandom(100)
    topics = {"off": TOPIC_OFF, "on": TOPIC_ON}
    async with AsyncProducer(ns_addr, producer_group=f"mb-{batch}") as producer:

        async def send(topic: str) -> None:
            if batch == 1:
                await producer.send(Message(topic, body))
            else:
                await producer.send_batch([Message(topic, body) for _ in range(batch)])

        for topic in topics.values():
            await send(topic)  # routes and connections before the clock starts
        sent = dict.fromkeys(topics, 0)
        deadline = time.perf_counter() + seconds

        async def worker(side: str) -> None:
            while time.perf_counter() < deadline:
                await send(topics[side])
                sent[side] += batch

        start = time.perf_counter()
        await asyncio.gather(*(worker(side) for side in topics for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
        return {side: n / elapsed for side, n in sent.items()}


#: in-process sends per alternation block
BLOCK = 64


class _Peer:
    remote_address = "127.0.0.1:40000"


async def _inproc(work: Path, rounds: int, sends: int, scrape: bool) -> tuple[list[float], list[float]]:
    """Microseconds per send through the send processor: (off per round, on per round)."""
    props = {
        "brokerName": "bench-inproc",
        "listenPort": "0",
        "storePathRootDir": str(work / "inproc"),
        "metricsExporterType": "PROM",
        "metricsPromExporterPort": "0",
        "brokerIP1": "127.0.0.1",
    }
    controller = BrokerController(load_broker_config(None, overrides=props))
    await controller.start()
    try:
        ctx, metrics = controller.ctx, controller.metrics
        assert ctx is not None and metrics is not None and metrics.address is not None
        code = RequestCode.SEND_MESSAGE_V2
        on = metrics.instrument(code, SendMessageProcessor(ctx).process)
        off = SendMessageProcessor(dataclasses.replace(ctx, metrics=None)).process
        fields = SendMessageRequestHeaderV2(
            producer_group="pg", topic="InprocBench", default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0, properties="",
        ).to_ext_fields()  # fmt: skip
        channel = cast(Channel, _Peer())
        body = b"x" * 100
        scraper = Scraper(f"{metrics.address[0]}:{metrics.address[1]}")
        costs: dict[str, list[float]] = {"off": [], "on": []}
        for rnd in range(rounds + 1):  # round 0 warms up (topic creation, first segment)
            spent = {"off": 0.0, "on": 0.0}
            for block in range(sends // BLOCK):  # fine-grained alternation: load changes hit both sides
                for side in ("off", "on") if block % 2 == 0 else ("on", "off"):
                    process = on if side == "on" else off
                    start = time.thread_time()  # CPU time of this thread: other processes' load drops out
                    for _ in range(BLOCK):
                        response = await process(RemotingCommand.request(code, fields, body), channel)
                        assert response is not None and response.code == 0, response
                    spent[side] += time.thread_time() - start
                    await asyncio.sleep(0)  # let dispatch and the scrape snapshots run
            if rnd == 0:
                if scrape:
                    scraper.__enter__()
                continue
            for side, seconds in spent.items():
                costs[side].append(seconds / (sends // BLOCK * BLOCK) * 1e6)
        await asyncio.to_thread(scraper.__exit__)  # its scrape in progress needs this loop
        if scraper.failures:
            raise SystemExit(f"scrapes failed: {scraper.failures[0]}")
        return costs["off"], costs["on"]
    finally:
        await controller.shutdown(grace_s=1)


def report_inproc(work: Path, rounds: int, sends: int, scrape: bool) -> None:
    off, on = asyncio.run(_inproc(work, rounds, sends, scrape))
    for rnd, (a, b) in enumerate(zip(off, on, strict=True), start=1):
        print(f"in-process round {rnd}: {a:6.1f} us CPU/send off, {b:6.1f} us CPU/send on", flush=True)
    off_us, on_us = statistics.median(off), statistics.median(on)
    paired = 100.0 * (statistics.median(b / a for a, b in zip(off, on, strict=True)) - 1)
    verdict = "ok" if paired <= TARGET_PERCENT else "MISSED"
    print(
        f"in-process send path: off {off_us:.1f} us CPU/send, on {on_us:.1f} us CPU/send, "
        f"paired cost {paired:+.1f} %"
        f"  (target: at most {TARGET_PERCENT:.0f} %) {verdict}\n",
        flush=True,
    )


def create_topic(ns_addr: str, broker: ServerProcess, topic: str) -> None:
    with Admin(ns_addr) as admin:
        admin.create_topic(topic, broker_addr=broker.addr, read_queue_nums=4, write_queue_nums=4)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if admin.topic_route(topic).queue_datas:
                    return
            except Exception:
                pass
            time.sleep(0.05)
    raise SystemExit(f"the topic {topic} never reached the NameServer")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--inproc-sends", type=int, default=20_000)
    parser.add_argument("--inproc-only", action="store_true", help="only the in-process comparison")
    parser.add_argument("--no-scrape", action="store_true", help="in-process: no scrapes (hot path alone)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rocketq-metrics-bench-"))
    try:
        report_inproc(work, args.rounds, args.inproc_sends, not args.no_scrape)
        if args.inproc_only:
            return
        with spawn_namesrv(work / "ns") as ns:
            with (
                spawn_broker(work / "off", ns.addr, brokerName="bench-off", **BROKER_CONF) as off,
                spawn_broker(
                    work / "on",
                    ns.addr,
                    brokerName="bench-on",
                    metricsExporterType="PROM",
                    metricsPromExporterPort=0,
                    **BROKER_CONF,
                ) as on,
            ):
                assert on.metrics_addr, "the PROM broker logged no exporter address"
                run(ns.addr, off, on, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(ns_addr: str, off: ServerProcess, on: ServerProcess, args: argparse.Namespace) -> None:
    assert on.metrics_addr is not None
    create_topic(ns_addr, off, TOPIC_OFF)
    create_topic(ns_addr, on, TOPIC_ON)
    workloads: dict[str, Callable[[], dict[str, float]]] = {
        "single": lambda: asyncio.run(_both(ns_addr, 1, args.concurrency, args.seconds)),
        "batch": lambda: asyncio.run(_both(ns_addr, 100, 4, args.seconds)),
    }
    rates: dict[tuple[str, str], list[float]] = {(w, s): [] for w in workloads for s in ("off", "on")}
    with Scraper(on.metrics_addr) as scraper:
        for rnd in range(args.rounds):
            for name, workload in workloads.items():
                both = workload()
                for side, rate in both.items():
                    rates[(name, side)].append(rate)
                print(
                    f"round {rnd + 1} {name:6s}: metrics off {both['off']:10.0f} msg/s, "
                    f"on {both['on']:10.0f} msg/s",
                    flush=True,
                )
    print()
    print(f"{args.rounds} rounds of {args.seconds:.0f} s, both brokers at once; scrapes: {scraper.scrapes}")
    for name in workloads:
        off_rate = statistics.median(rates[(name, "off")])
        on_rate = statistics.median(rates[(name, "on")])
        pairs = zip(rates[(name, "on")], rates[(name, "off")], strict=True)
        paired = 100.0 * (statistics.median(a / b for a, b in pairs) - 1)
        verdict = "ok" if paired >= -TARGET_PERCENT else "MISSED"
        print(
            f"{name:6s}: off {off_rate:10.0f} msg/s   on {on_rate:10.0f} msg/s   median of per-round "
            f"differences {paired:+6.1f} %   (target: on within {TARGET_PERCENT:.0f} % of off) {verdict}"
        )
    if scraper.failures:
        print(f"scrape failures: {len(scraper.failures)}; first: {scraper.failures[0]}")
    else:
        print("every scrape answered and parsed; rocketmq_messages_in_total never went down")


if __name__ == "__main__":
    main()
