"""Replication throughput and slave lag: batch produce of 100 B messages with and without a slave.

Not a test.  For each case it starts a fresh ``mqnamesrv`` and broker group (ASYNC_FLUSH, temp
dirs, free ports, all on this machine) through :mod:`rocketq.client.launcher`, creates an 8-queue
topic and measures, for a fixed time, ``AsyncProducer.send_batch`` of ``--batch`` messages of
100 B with ``--concurrency`` batches in flight, each acknowledged (the same load as
``produce_bench.py``'s batch case):

* single: one broker, no slave (the reference, measured in the same run);
* async: ASYNC_MASTER + 1 SLAVE; every batch must be SEND_OK;
* sync: SYNC_MASTER + 1 SLAVE; every batch must be SEND_OK (a slave acknowledged its bytes).

During the async and sync runs a thread samples the master's GET_BROKER_HA_STATUS every
``--sample-ms``: the lag in bytes is ``masterCommitLogMaxOffset - slaveAckOffset``; the lag in
seconds of a sample is how long ago the master's max offset was where the slave's ack is now (the
age of the slave's copy, from the earlier samples).  It prints msg/s, the ratio to the single
broker next to the targets (SYNC_MASTER >= 60 %, ASYNC_MASTER >= 80 %), the max and p50 lag
(target < 1 s under sustained ASYNC_MASTER load) and how long the slave took to catch up after
the load stopped.

CPU placement (``--pin``, the default): the master's event-loop thread (of every case, the single
broker included) runs on the first CPU this process may use and its other threads on any; the
slave runs on the second CPU, the producer on the rest (on the second too when there are only
two).  So the slave and the producer, which on production machines would not share the master's
cores, cannot take the CPU from the thread every send goes through.  The single broker is also
measured with nothing placed (case ``shared``), a second reference: the verdicts take the lower
of the two ratios.  ``--no-pin`` places nothing in any case: then on a 2-CPU machine the slave's
and the producer's work competes with the master's event loop, and every wakeup across CPUs (the
GIL passing between a broker's threads, a reply waking the producer) waits for a halted virtual
CPU.

    .venv/bin/python benchmarks/replication_bench.py [--seconds 4] [--repeat 5] [--no-pin]
        [--page-cache-window MB] [--profile DIR]

Page cache (``--page-cache-window MB``, default 256): every broker of every case runs with
``commitLogPageCacheWindow`` set to that (docs/storage.md), so it drops the CommitLog pages more
than that far behind its flushed end and writes into pages the kernel hands back warm.  Without it
(``--page-cache-window 0``) the brokers' page cache grows by every byte written (GBs over a run),
and on a virtual machine whose host backs guest memory lazily (such as the one the figures in
docs/performance.md come from) the first write to a page costs ~10 us against ~0.6 us for one
the guest touched before: once the machine's recently used memory is used up, every case slows
down, and the cases with a slave pay it twice (the slave writes the same bytes), so the ratios
depend on what ran on the machine before.  The window is the same for all cases.

``--profile DIR`` runs the brokers of the sync case under cProfile (``master.prof``,
``slave.prof``; their event-loop threads) and prints their top entries.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import os
import pstats
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketq.client.admin import Admin
from rocketq.client.errors import RocketQError
from rocketq.client.launcher import ServerProcess, spawn_broker, spawn_namesrv
from rocketq.client.model import Message, SendStatus
from rocketq.client.producer import AsyncProducer

TOPIC = "BenchRepl"
SIZE = 100
TARGET_SYNC = 0.60
TARGET_ASYNC = 0.80
TARGET_LAG_S = 1.0
BROKER_CONF: dict[str, Any] = {
    "brokerName": "broker-bench",
    "flushDiskType": "ASYNC_FLUSH",
    "mappedFileSizeCommitLog": 1 << 30,
    "mappedFileSizeConsumeQueue": 20 * 1_000_000,
    "sendThreadPoolQueueCapacity": 100_000,
    "waitTimeMillsInSendQueue": 5000,
    "diskSpaceWarningLevelRatio": 99,  # a shared machine's disk must not stop the run
}
CASES = ("single", "async", "sync")
#: with pinned CPUs, the single broker once more on shared CPUs: the second reference
SHARED = "shared"
ROLES = {"single": "ASYNC_MASTER", SHARED: "ASYNC_MASTER", "async": "ASYNC_MASTER", "sync": "SYNC_MASTER"}
SLAVELESS = ("single", SHARED)


@dataclass
class Lag:
    """Samples of (time, master max offset, slave ack offset) from GET_BROKER_HA_STATUS."""

    times: list[float] = field(default_factory=list)
    master: list[int] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)

    def add(self, t: float, master: int, acked: int) -> None:
        self.times.append(t)
        self.master.append(max(master, self.master[-1] if self.master else 0))
        self.acked.append(acked)

    def bytes_behind(self) -> list[int]:
        return [max(0, m - a) for m, a in zip(self.master, self.acked, strict=True)]

    def seconds_behind(self) -> list[float]:
        """Per sample: now minus the last sample time at which the master was no further than the
        slave's ack is now (the master's offsets are monotonic, so a bisection finds it)."""
        out = []
        for t, a in zip(self.times, self.acked, strict=True):
            i = bisect.bisect_right(self.master, a) - 1
            out.append(0.0 if i < 0 and a <= 0 else t - self.times[max(i, 0)])
        return out


@dataclass
class Outcome:
    case: str
    rate: float  # acknowledged msg/s
    lag: Lag | None = None
    catch_up_s: float = 0.0  # after the load: until the slave acked the master's max offset
    cpu_s: tuple[float, ...] = ()  # CPU seconds during the load: this process, master, slave
    seconds: float = 1.0

    @property
    def cpu_per_msg_us(self) -> float:
        """CPU time of producer, master and slave per message: the cost, whatever else the
        machine was running (the wall-clock rates of a shared machine vary with that)."""
        return sum(self.cpu_per_msg_each_us)

    @property
    def cpu_per_msg_each_us(self) -> list[float]:
        """The same per process: producer, master (and slave)."""
        return [c / max(self.rate * self.seconds, 1) * 1e6 for c in self.cpu_s]


def _cpu_s(pids: list[int]) -> list[float]:
    """User + system CPU seconds of this process and of ``pids`` (from /proc; 0 where unavailable)."""
    tick = os.sysconf("SC_CLK_TCK")
    own = os.times()
    out = [own.user + own.system]
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            out.append((int(fields[11]) + int(fields[12])) / tick)
        except (OSError, IndexError, ValueError):
            out.append(0.0)
    return out


@dataclass(frozen=True)
class CpuLayout:
    """The CPUs each process, or the master's event-loop thread, may run on (None: any)."""

    master_loop: frozenset[int] | None = None
    slave: frozenset[int] | None = None
    producer: frozenset[int] | None = None

    @staticmethod
    def choose(cpus: frozenset[int], pin: bool) -> CpuLayout:
        """The master's event loop on the first CPU (its other threads anywhere), the slave on the
        second, the producer on the rest (the second too if there is no other)."""
        if not pin or len(cpus) < 2:
            return CpuLayout()
        first, second, *rest = sorted(cpus)
        return CpuLayout(frozenset([first]), frozenset([second]), frozenset(rest or [second]))

    def describe(self) -> str:
        if self.master_loop is None:
            return "producer, master and slave share all CPUs (--no-pin)"

        def cpus(which: frozenset[int] | None) -> str:
            return ",".join(map(str, sorted(which or ())))

        return (
            f"CPU {cpus(self.master_loop)} for the master's event loop (its other threads on any), "
            f"{cpus(self.slave)} for the slave, {cpus(self.producer)} for the producer; "
            f"case {SHARED}: the single broker and the producer on all CPUs"
        )


def pin(pid: int, cpus: frozenset[int] | None) -> None:
    """Every thread of ``pid`` to ``cpus`` (threads it starts later inherit it)."""
    if cpus is None:
        return
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):
            os.sched_setaffinity(int(tid), cpus)


#: ``commitLogPageCacheWindow`` of every broker (``--page-cache-window``; 0: none)
PAGE_CACHE_WINDOW_MB = 256


def _broker(
    work: Path,
    ns: ServerProcess,
    case: str,
    broker_id: int,
    profile: Path | None,
    window_mb: int,
    **extra: Any,
) -> ServerProcess:
    role = "SLAVE" if broker_id else ROLES[case]
    args: tuple[str, ...] = ("-m", "cProfile", "-o", str(profile)) if profile is not None else ()
    return spawn_broker(
        work,
        ns.addr,
        timeout_s=60,
        python_args=args,
        brokerRole=role,
        brokerId=broker_id,
        commitLogPageCacheWindow=window_mb << 20,
        **BROKER_CONF,
        **extra,
    )


def _wait(predicate: Any, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except RocketQError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"{what}: not within {timeout_s:.0f} s")


def _create_topic(admin: Admin, master: ServerProcess) -> None:
    admin.create_topic(TOPIC, broker_addr=master.addr, read_queue_nums=8, write_queue_nums=8)
    _wait(lambda: bool(admin.topic_route(TOPIC).queue_datas), "the topic's route")


async def _produce(ns_addr: str, batch: int, concurrency: int, seconds: float) -> float:
    body = os.urandom(SIZE)
    async with AsyncProducer(ns_addr, producer_group="bench-repl") as producer:
        await producer.send_batch([Message(TOPIC, body) for _ in range(batch)])  # warm up
        sent = 0
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal sent
            while time.perf_counter() < deadline:
                results = await producer.send_batch([Message(TOPIC, body) for _ in range(batch)])
                bad = [r.send_status for r in results if r.send_status is not SendStatus.SEND_OK]
                if bad:
                    raise SystemExit(f"a batch was answered {bad[0].value}")
                sent += batch

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return sent / (time.perf_counter() - start)


def _sample(admin: Admin, master_addr: str, lag: Lag, stop: threading.Event, every_s: float) -> None:
    while not stop.wait(every_s):
        try:
            status = admin.ha_status(master_addr)
        except RocketQError:
            continue
        if status.connections:
            lag.add(
                time.monotonic(), status.master_commit_log_max_offset, status.connections[0].slave_ack_offset
            )


def _caught_up(admin: Admin, master_addr: str) -> bool:
    status = admin.ha_status(master_addr)
    conns = status.connections
    return bool(conns) and conns[0].slave_ack_offset >= status.master_commit_log_max_offset


@dataclass
class Stack:
    """One case's processes (a NameServer, a master, maybe a slave), started once for all rounds."""

    case: str
    work: Path
    ns: ServerProcess
    brokers: list[ServerProcess]
    admin: Admin

    @property
    def master(self) -> ServerProcess:
        return self.brokers[0]

    def close(self, profiled: bool) -> None:
        self.admin.close()
        for proc in [*reversed(self.brokers), self.ns]:
            if profiled:
                proc.popen.send_signal(signal.SIGTERM)  # a clean exit writes the profile
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(60)
            proc.terminate()
        shutil.rmtree(self.work, ignore_errors=True)


def start_stack(
    case: str, profile_dir: Path | None, layout: CpuLayout, window_mb: int = PAGE_CACHE_WINDOW_MB
) -> Stack:
    """``case``'s processes, placed by ``layout``, with ``commitLogPageCacheWindow`` ``window_mb``."""
    work = Path(tempfile.mkdtemp(prefix=f"rocketq-repl-bench-{case}-"))
    ns = spawn_namesrv(work / "ns")
    stack = Stack(case, work, ns, [], Admin(ns.addr))
    try:
        prof = profile_dir / "master.prof" if profile_dir is not None else None
        stack.brokers.append(_broker(work, ns, case, 0, prof, window_mb))
        if layout.master_loop is not None:  # the main thread: threads it starts later inherit it
            os.sched_setaffinity(stack.master.pid, layout.master_loop)
        if case not in SLAVELESS:
            ha_port = stack.admin.ha_status(stack.master.addr).ha_listen_port
            prof = profile_dir / "slave.prof" if profile_dir is not None else None
            stack.brokers.append(
                _broker(work, ns, case, 1, prof, window_mb, haMasterAddress=f"127.0.0.1:{ha_port}")
            )
            pin(stack.brokers[1].pid, layout.slave)
            _wait(
                lambda: stack.admin.ha_status(stack.master.addr).in_sync_slave_nums >= 1, "the slave in sync"
            )
        _create_topic(stack.admin, stack.master)
    except BaseException:
        stack.close(False)
        raise
    return stack


def measure(stack: Stack, args: argparse.Namespace, producer_cpus: frozenset[int]) -> Outcome:
    """One timed load on ``stack`` from this process, on ``producer_cpus``; the slave's lag sampled
    meanwhile, its catch-up timed after."""
    case, admin, master = stack.case, stack.admin, stack.master
    pin(os.getpid(), producer_cpus)
    pids = [b.pid for b in stack.brokers]
    lag = Lag()
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(admin, master.addr, lag, stop, args.sample_ms / 1000))
    if case not in SLAVELESS:
        sampler.start()
    cpu_before = _cpu_s(pids)
    try:
        rate = asyncio.run(_produce(stack.ns.addr, args.batch, args.concurrency, args.seconds))
    finally:
        stop.set()
        if sampler.is_alive():
            sampler.join(30)
    cpu = tuple(after - before for after, before in zip(_cpu_s(pids), cpu_before, strict=True))
    if case in SLAVELESS:
        return Outcome(case, rate, cpu_s=cpu, seconds=args.seconds)
    t0 = time.monotonic()
    _wait(lambda: _caught_up(admin, master.addr), "the slave to catch up after the load", 120)
    return Outcome(case, rate, lag, time.monotonic() - t0, cpu, args.seconds)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(runs: list[dict[str, Outcome]]) -> None:
    head = f"{'lag max / p50':>22}  {'lag s max / p50':>16}  catch-up   {'CPU s (producer/master/slave)':30}"
    print(f"\n{'run':4} {'case':8} {'msg/s':>10} {'vs single':>9}   {head}  CPU/msg (producer/master/slave)")
    for n, run in enumerate(runs, 1):
        ref = run["single"].rate
        for case, o in run.items():
            lag_b = lag_s = catch = "-"
            if o.lag is not None and o.lag.times:
                b, s = o.lag.bytes_behind(), o.lag.seconds_behind()
                lag_b = f"{max(b) / 1e6:8.2f} / {_pct([float(x) for x in b], 0.5) / 1e6:.2f} MB"
                lag_s = f"{max(s):5.2f} / {_pct(s, 0.5):.2f} s"
                catch = f"{o.catch_up_s:.2f} s"
            cpu = "/".join(f"{c:.1f}" for c in o.cpu_s)
            each = "/".join(f"{c:.1f}" for c in o.cpu_per_msg_each_us)
            ratio = o.rate / ref
            print(
                f"{n:<4} {case:8} {o.rate:10,.0f} {ratio:9.0%}   {lag_b:>22}  {lag_s:>16}  {catch:>8}   "
                f"{cpu:<30}  {o.cpu_per_msg_us:.1f} us ({each})"
            )
    print("\nmedian over runs, against the single broker of the same run:")
    for case, target in (("async", TARGET_ASYNC), ("sync", TARGET_SYNC)):
        ratios = [run[case].rate / run["single"].rate for run in runs if case in run]
        if ratios:
            vs_single = lowest = statistics.median(ratios)
            cost = statistics.median(run["single"].cpu_per_msg_us / run[case].cpu_per_msg_us for run in runs)
            shared = ""
            if all(SHARED in run for run in runs):
                # the verdict takes the lower of the two: the slave's CPU must not be what helps
                vs_shared = statistics.median(run[case].rate / run[SHARED].rate for run in runs)
                shared = f", {vs_shared:.0%} of the single broker on shared CPUs"
                lowest = min(vs_single, vs_shared)
            verdict = "met" if lowest >= target else "MISSED"
            print(
                f"  {ROLES[case]:12} {vs_single:5.0%} of single{shared} "
                f"(target >= {target:.0%}): {verdict}; CPU per message, single / {case}: {cost:.0%}"
            )
    samples = [r["async"].lag for r in runs if "async" in r]
    secs = [x for lag in samples if lag is not None for x in lag.seconds_behind()]
    nbytes = [float(x) for lag in samples if lag is not None for x in lag.bytes_behind()]
    if secs:
        verdict = "met" if max(secs) < TARGET_LAG_S else "MISSED"
        print(
            f"  ASYNC_MASTER slave lag over all {len(secs)} samples: max {max(secs):.2f} s, p50 "
            f"{_pct(secs, 0.5):.2f} s; max {max(nbytes) / 1e6:.2f} MB, p50 {_pct(nbytes, 0.5) / 1e6:.2f} MB "
            f"(target < {TARGET_LAG_S:.0f} s): {verdict}"
        )


def _print_profile(path: Path, title: str, limit: int = 20) -> None:
    if not path.exists():
        print(f"(no profile written at {path})")
        return
    print(f"\n--- {title}: top {limit} by total time ({path}) ---")
    pstats.Stats(str(path)).sort_stats("tottime").print_stats(limit)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="duration of each measurement")
    ap.add_argument("--batch", type=int, default=500, help="messages per send_batch")
    ap.add_argument("--concurrency", type=int, default=4, help="batches in flight")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of the three cases, interleaved")
    ap.add_argument("--sample-ms", type=float, default=50.0, help="HA status sampling period")
    ap.add_argument("--cases", default=",".join(CASES), help="subset of single,async,sync (needs single)")
    ap.add_argument("--profile", type=Path, default=None, help="profile the sync case's brokers into DIR")
    ap.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a CPU for the master, one for the slave, the rest for the producer (--no-pin: all shared)",
    )
    ap.add_argument(
        "--page-cache-window",
        type=int,
        default=PAGE_CACHE_WINDOW_MB,
        metavar="MB",
        help="every broker's commitLogPageCacheWindow (0: the page cache keeps everything written)",
    )
    args = ap.parse_args()
    if args.page_cache_window < 0:
        raise SystemExit("--page-cache-window must be >= 0 MB")
    every_cpu = frozenset(os.sched_getaffinity(0))
    layout = CpuLayout.choose(every_cpu, args.pin)
    cases = [c for c in CASES if c in args.cases.split(",")]
    if "single" not in cases:
        raise SystemExit("--cases must include single: it is the reference")
    if layout.master_loop is not None:
        cases.insert(1, SHARED)
    profile_dir: Path | None = args.profile
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"batch produce of {SIZE} B, batches of {args.batch} x {args.concurrency} in flight, "
        f"{args.seconds:.0f} s per case; {len(every_cpu)} CPUs: {layout.describe()}; "
        + (
            f"every broker keeps {args.page_cache_window} MB of its CommitLog in the page cache"
            if args.page_cache_window
            else "the page cache keeps every byte written"
        )
    )
    layouts = {case: CpuLayout() if case == SHARED else layout for case in cases}  # shared: not placed
    profiled = {case: profile_dir if case == "sync" else None for case in cases}
    stacks = {
        case: start_stack(case, profiled[case], layouts[case], args.page_cache_window) for case in cases
    }
    runs: list[dict[str, Outcome]] = []
    try:
        for n in range(args.repeat):
            run: dict[str, Outcome] = {}
            order = cases[n % len(cases) :] + cases[: n % len(cases)]  # no case always runs first
            for case in order:
                run[case] = measure(stacks[case], args, layouts[case].producer or every_cpu)
                print(f"run {n + 1}, {case}: {run[case].rate:,.0f} msg/s", flush=True)
            runs.append(run)
    finally:
        for case, stack in stacks.items():
            stack.close(profile_dir is not None and case == "sync")
    report(runs)
    if profile_dir is not None:
        _print_profile(profile_dir / "master.prof", "SYNC_MASTER master")
        _print_profile(profile_dir / "slave.prof", "slave")
    return 0


if __name__ == "__main__":
    sys.exit(main())
