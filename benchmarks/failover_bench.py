"""Failover time in controller mode as clients feel it: from the kill of a group's master to the
first acknowledged send through its successor, next to the election time measured in the same run.

Not a test.  It starts three controllers (``scanNotActiveBrokerInterval``), a NameServer and one
group of three brokers in controller mode (``brokerHeartbeatInterval``,
``controllerHeartBeatTimeoutMills``, ``allAckInSyncStateSet=true``, ASYNC_FLUSH) on this machine
(:class:`rocketq.client.testing.ControllerGroup`), and two producers with the default client
settings, as an application runs them and never restarted: one sends per-key ordered messages
(``send`` with ``SelectMessageQueueByHash``, a thread per key), one plain messages.  Each round
waits until all three brokers are in the master's SyncStateSet, lets the load run for a random
moment, then kills the master: SIGKILL (a crash: its connections close at once), or SIGSTOP in
every ``--stop-every``-th round (a hang: only the heartbeat timeout reveals it; SIGCONT follows
and the old master rejoins as a slave).  Per round it prints the *election* time (the kill to the
NameServer listing another master: the server's half) and the *failover* time of each kind of
send (the kill to the first SEND_OK from another broker, told apart by the broker address in the
offset message id, for a send begun after the kill: what users feel).  At the end: p50 and max per
kind and signal, next to the promise (docs/failover.md: within 3 s of a SIGKILL, within the
heartbeat timeout + 2 s of a SIGSTOP).

    .venv/bin/python benchmarks/failover_bench.py [--rounds 20] [--stop-every 3] [--seed N]
        [--heartbeat-timeout-ms 3000] [--scan-interval-ms 1000] [--heartbeat-interval-ms 1000]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rocketq.client.admin import Admin
from rocketq.client.config import ClientConfig
from rocketq.client.errors import RocketQError
from rocketq.client.model import Message, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.producer.selector import SelectMessageQueueByHash
from rocketq.client.testing import FAST_FAILOVER_BROKER_CONF, ControllerGroup

TOPIC = "BenchFailover"
BROKER = "broker-fo"
ORDERED_KEYS = tuple(f"key-{i}" for i in range(4))
PLAIN_SENDERS = 2
WAIT_S = 120.0
#: the cluster's own requests (status, routes); the producers use the default ClientConfig
ADMIN_CLIENT = ClientConfig(mq_client_api_timeout_ms=2000)
KINDS = ("ordered", "plain")


@dataclass(frozen=True)
class Ack:
    kind: str  # "ordered" (selector send) or "plain"
    port: int  # of the broker that answered SEND_OK (from the offset message id)
    sent_at: float
    acked_at: float


class Acks:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[Ack] = []

    def add(self, ack: Ack) -> None:
        with self.lock:
            self.items.append(ack)

    def first_after(self, kind: str, t: float, not_port: int) -> Ack | None:
        with self.lock:
            later = [a for a in self.items if a.kind == kind and a.sent_at > t and a.port != not_port]
        return min(later, key=lambda a: a.acked_at) if later else None


def send_loop(producer: Producer, stop: threading.Event, acks: Acks, key: str | None) -> None:
    """Plain sends when ``key`` is None, else ``key``'s ordered sends (one at a time)."""
    selector = SelectMessageQueueByHash()
    kind = "plain" if key is None else "ordered"
    deadline = time.monotonic() + 24 * 3600
    while not stop.is_set() and time.monotonic() < deadline:
        sent_at = time.monotonic()
        msg = Message(TOPIC, b"x" * 100)
        try:
            if key is None:
                result = producer.send(msg)
            else:
                result = producer.send(msg, selector=selector, arg=key)
        except (RocketQError, TimeoutError, OSError):
            time.sleep(0.02)
            continue
        if result.send_status is SendStatus.SEND_OK:
            acks.add(Ack(kind, int(result.offset_msg_id[8:16], 16), sent_at, time.monotonic()))
        time.sleep(0.005)


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"failover_bench: timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.02)


@dataclass(frozen=True)
class Round:
    kind: str
    routed_s: float  # kill -> the NameServer lists another master
    failover_s: dict[str, float]  # send kind -> kill -> first SEND_OK from another broker


def one_round(g: ControllerGroup, acks: Acks, kind: str, rng: random.Random) -> Round:
    old_addr, _ = g.wait_master("all three brokers in the master's SyncStateSet", g.full_set)
    slot = g.slot_of(old_addr)
    time.sleep(rng.uniform(0.5, 2.0))
    proc = g.broker(slot)
    killed_at = time.monotonic()
    if kind == "SIGKILL":
        proc.kill9()
    else:
        os.killpg(proc.pid, signal.SIGSTOP)
    routed_at: float | None = None
    first: dict[str, Ack] = {}
    deadline = killed_at + WAIT_S
    while (routed_at is None or len(first) < len(KINDS)) and time.monotonic() < deadline:
        if routed_at is None and g.routed_master() not in (None, old_addr):
            routed_at = time.monotonic()
        for k in KINDS:
            ack = first.get(k) or acks.first_after(k, killed_at, g.ports[slot])
            if ack is not None:
                first[k] = ack
        time.sleep(0.02)
    if routed_at is None or len(first) < len(KINDS):
        raise SystemExit(f"failover_bench: no failover within {WAIT_S:.0f} s of the {kind}")
    if kind == "SIGKILL":
        g.start_broker(slot)
    else:
        os.killpg(proc.pid, signal.SIGCONT)
    return Round(kind, routed_at - killed_at, {k: first[k].acked_at - killed_at for k in KINDS})


def summary(label: str, times: list[float]) -> str:
    if not times:
        return f"{label}: no rounds"
    return f"{label} ({len(times)} rounds): p50 {statistics.median(times):.2f} s, max {max(times):.2f} s"


def report(rounds: list[Round], args: argparse.Namespace, settings: str) -> None:
    print(f"failover time (kill of the master -> first SEND_OK through the new master); {settings}")
    bounds = {"SIGKILL": 3.0, "SIGSTOP": args.heartbeat_timeout_ms / 1000 + 2.0}
    for signame, bound in bounds.items():
        mine = [r for r in rounds if r.kind == signame]
        if not mine:
            continue
        print(f"  {signame}:")
        print("    " + summary("election (NameServer lists the new master)", [r.routed_s for r in mine]))
        for k in KINDS:
            times = [r.failover_s[k] for r in mine]
            met = "met" if max(times) <= bound else "NOT met"
            print("    " + summary(f"{k} send", times) + f"   promise <= {bound:.1f} s -> {met}")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--stop-every", type=int, default=3, help="every n-th round SIGSTOPs (0: never)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--heartbeat-interval-ms", type=int, default=1000)
    ap.add_argument("--heartbeat-timeout-ms", type=int, default=3000)
    ap.add_argument("--scan-interval-ms", type=int, default=1000)
    args = ap.parse_args()
    logging.getLogger("rocketq").setLevel(logging.ERROR)  # the clients' retries during a failover
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    settings = (
        f"brokerHeartbeatInterval={args.heartbeat_interval_ms} ms, controllerHeartBeatTimeoutMills="
        f"{args.heartbeat_timeout_ms} ms, scanNotActiveBrokerInterval={args.scan_interval_ms} ms"
    )
    print(f"failover_bench: {args.rounds} rounds, seed {seed}; {settings}", flush=True)
    broker_conf = {
        **FAST_FAILOVER_BROKER_CONF,
        "brokerHeartbeatInterval": args.heartbeat_interval_ms,
        "controllerHeartBeatTimeoutMills": args.heartbeat_timeout_ms,
        "mappedFileSizeCommitLog": 64 << 20,
    }
    controller_conf = {
        "scanNotActiveBrokerInterval": args.scan_interval_ms,
        "controllerHeartBeatTimeoutMills": args.heartbeat_timeout_ms,  # also its start-up window
    }
    rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="rocketq-failover-bench-") as tmp:
        g = ControllerGroup(
            Path(tmp), BROKER, broker_conf=broker_conf, controller_conf=controller_conf,
            client=ADMIN_CLIENT, wait_s=WAIT_S,
        )  # fmt: skip
        stop = threading.Event()
        producers = [Producer(g.namesrv_addr, producer_group=f"pg-failover-bench-{k}") for k in KINDS]
        threads: list[threading.Thread] = []
        try:
            master, _ = g.wait_master("the first master", g.full_set)
            with Admin(g.namesrv_addr) as admin:
                admin.create_topic(TOPIC, broker_addr=master, read_queue_nums=4, write_queue_nums=4)
            time.sleep(2.0)  # the slaves copy the topic config (slave metadata sync)
            for p in producers:
                p.start()
            acks = Acks()
            loops = [(producers[0], key) for key in ORDERED_KEYS] + [(producers[1], None)] * PLAIN_SENDERS
            threads = [
                threading.Thread(target=send_loop, args=(p, stop, acks, key), daemon=True) for p, key in loops
            ]
            for t in threads:
                t.start()
            for n in range(1, args.rounds + 1):
                kind = "SIGSTOP" if args.stop_every and n % args.stop_every == 0 else "SIGKILL"
                r = one_round(g, acks, kind, rng)
                rounds.append(r)
                ordered, plain = r.failover_s["ordered"], r.failover_s["plain"]
                print(
                    f"round {n:2}: {r.kind:7}  election {r.routed_s:5.2f} s, first SEND_OK through the "
                    f"new master: ordered {ordered:5.2f} s, plain {plain:5.2f} s",
                    flush=True,
                )
        finally:
            stop.set()
            for t in threads:
                t.join(30)
            for p in producers:
                with contextlib.suppress(RocketQError):
                    p.shutdown()
            g.close()
    report(rounds, args, settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
