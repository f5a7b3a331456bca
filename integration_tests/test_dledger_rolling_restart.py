"""Rolling restart of a DLedger group under a producer with retries (docs/dledger.md).

The three members of ``examples/conf/dledger/`` (ports rewritten, rocketq.client.testing.dledger's
:class:`DLedgerGroup`) are stopped with SIGTERM one at a time and started again, the slaves first
and the master last, while four per-key ordered senders (a selector, so each key keeps its queue)
send continuously.  The master, on SIGTERM, hands the mastership over to a member holding its
whole log and waits until that one is master before it stops (``hand_over_before_stop``).  The
application must see no failed send (the producer's retries of SERVICE_NOT_AVAILABLE hide the
switch), every acknowledged message is read back from the final master in per-key order, and each
stopped member exits 0.  Run twice: without ``preferredLeaderId``, and with n2 preferred (n2 is
master, hands over on SIGTERM, and takes the mastership back after its restart, a second
handover under the load, once the restarted n2 holds the log: never to the stopping n2 process,
whose exit would cost an election).  Printed for the docs: sends, failed attempts the retries hid, the longest
send, the SIGTERM-to-exit and restart time of each member.
"""

from __future__ import annotations

import functools
import itertools
import signal
import threading
import time
from pathlib import Path

import pytest

from rocketq.client.model import Message, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.testing import wait_for
from rocketq.client.testing.chaos import SEND_ERRORS, Acked, Ledger, Load, broker_port
from rocketq.client.testing.dledger import KEYS, TOPIC, WAIT_S, DLedgerGroup, check_stored, rejoined
from rocketq.client.testing.ordered import send_key

CONF = Path(__file__).resolve().parents[1] / "examples" / "conf" / "dledger"

pytestmark = [pytest.mark.slow, pytest.mark.serial]

#: long enough for the retries of one send to ride through a handover or a re-election
SEND_TIMEOUT_MS = 15_000


class AttemptCounter:
    """Counts the failed attempts the producer retried (each one isolates the broker name)."""

    def __init__(self, producer: Producer) -> None:
        self.failed = 0
        self._lock = threading.Lock()
        strategy = producer._producer.fault_strategy
        record = strategy.update_fault_item

        def counting(broker_name: str, latency_ms: int, isolation: bool) -> None:
            if isolation:
                with self._lock:
                    self.failed += 1
            record(broker_name, latency_ms, isolation)

        strategy.update_fault_item = counting  # type: ignore[method-assign,assignment]


def send_plain(producer: Producer, ledger: Ledger, stop: threading.Event) -> None:
    """Plain sends (no selector, the producer picks the queue; retryTimesWhenSendFailed applies)
    every 10 ms until ``stop``."""
    deadline = time.monotonic() + 600
    n = 0
    while not stop.is_set() and time.monotonic() < deadline:
        body = f"plain:{n}:".encode().ljust(100, b".")
        n += 1
        sent_at = time.monotonic()
        try:
            result = producer.send(Message(TOPIC, body))
        except SEND_ERRORS as exc:
            ledger.add_failed(reason=exc)
            continue
        if result.send_status is not SendStatus.SEND_OK:
            ledger.add_failed(reason=result.send_status)
            continue
        ledger.add(
            Acked(result.msg_id, result.send_status, result.message_queue.queue_id, result.queue_offset,
                  body, broker_port(result.offset_msg_id), sent_at, time.monotonic())
        )  # fmt: skip
        time.sleep(0.01)


def slowest_send(ledger: Ledger, since: float = 0.0, until: float = float("inf")) -> float:
    """The longest send (start to SEND_OK, retries included) among those started in the window."""
    return max((a.acked_at - a.sent_at for a in ledger.acked() if since <= a.sent_at <= until), default=0.0)


def longest_gap(ledger: Ledger) -> float:
    """The longest time without any SEND_OK while the senders ran (the pause producers saw)."""
    times = sorted(a.acked_at for a in ledger.acked())
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def restart(g: DLedgerGroup, ledger: Ledger, slot: int) -> tuple[float, float, float, str]:
    """SIGTERM member ``slot``, wait for its exit (status 0), start it again and wait until it
    follows the master; returns (SIGTERM to exit, exit to following again, the longest send
    started meanwhile) in seconds and the stopped process's log."""
    began = time.monotonic()
    g.signal(slot, signal.SIGTERM)
    status = g.member(slot).popen.wait(timeout=60)
    assert status == 0, g.member(slot).log_tail()
    stopped = time.monotonic()
    stopped_log = g.member(slot).log_text()
    g.start(slot)
    _, st = g.wait_master("a master while a member restarts")
    wait_for(rejoined(g, slot, st["masterEpoch"]), f"n{slot} to follow the master again", WAIT_S)
    back = time.monotonic()
    count = ledger.count()
    wait_for(ledger.more_than(SendStatus.SEND_OK, count + 20), "sends after the restart", WAIT_S)
    return stopped - began, back - stopped, slowest_send(ledger, began - 0.5, back), stopped_log


@pytest.mark.parametrize("preferred", ["", "n2"])
def test_rolling_restart_of_a_dledger_group_fails_and_loses_nothing(tmp_path: Path, preferred: str) -> None:
    """``preferred="n2"``: n2 (``preferredLeaderId``) is master, hands over on SIGTERM and takes the
    mastership back once it holds the log again (a second handover under the same load)."""
    g = DLedgerGroup(tmp_path, CONF, **({"preferredLeaderId": preferred} if preferred else {}))
    try:
        g.start()
        g.wait_master("the first master", lambda slot, _: not preferred or f"n{slot}" == preferred)
        master, st = g.wait_whole_group()
        g.create_topic(master)
        ledger = Ledger()
        producer = Producer(
            g.namesrv.addr, producer_group="pg-dledger-rolling", send_msg_timeout_ms=SEND_TIMEOUT_MS
        )
        producer.start()
        counter = AttemptCounter(producer)
        load = Load(producer, [functools.partial(send_key, producer, TOPIC, k, ledger) for k in KEYS])
        plain = Ledger()  # a producer with the default settings (retryTimesWhenSendFailed=2, 3 s)
        plain_producer = Producer(g.namesrv.addr, producer_group="pg-dledger-plain")
        plain_producer.start()
        plain_counter = AttemptCounter(plain_producer)
        plain_load = Load(plain_producer, [functools.partial(send_plain, plain_producer, plain)])
        figures = []
        logs: dict[int, str] = {}
        try:
            wait_for(ledger.more_than(SendStatus.SEND_OK, 40), "sends before the restarts", WAIT_S)
            for slot in [s for s in range(3) if s != master] + [master]:
                was_master = slot == g.wait_master("the master before a restart")[0]
                stop_s, back_s, slow_s, text = restart(g, ledger, slot)
                logs[slot] = text
                figures.append(f"n{slot}{' (master)' if was_master else ''}: SIGTERM to exit {stop_s:.2f} s, "
                               f"restart to following {back_s:.2f} s, "
                               f"longest send {slow_s * 1000:.0f} ms")  # fmt: skip
            if preferred:  # the preferred member takes the mastership back under the load
                g.wait_master(
                    f"{preferred} master again",
                    lambda slot, now: slot == master and now["masterEpoch"] > st["masterEpoch"] + 1,
                )
                count = ledger.count()
                wait_for(ledger.more_than(SendStatus.SEND_OK, count + 20), "sends after the handback", WAIT_S)
        finally:
            load.close()
            plain_load.close()
        new, new_st = g.wait_whole_group()
        assert new_st["masterEpoch"] > st["masterEpoch"] and (new == master if preferred else new != master)
        assert "stopping: handing the mastership over to" in logs[master]
        if preferred:  # handed back once, after its restart: never to the stopping process
            texts = [g.member(s).log_text() for s in range(3)]
            handbacks = sum(t.count("handing the mastership over to the preferred") for t in texts)
            gone = [line for t in texts for line in t.splitlines() if "is gone" in line]
            assert (handbacks, gone) == (1, []), "the mastership went back to the stopping preferred member"
        print()
        print("\n".join(figures))
        print(
            f"{ledger.count()} sends acknowledged, {ledger.failed} failed sends surfaced, "
            f"{counter.failed} failed attempts retried by the producer, "
            f"longest send {slowest_send(ledger) * 1000:.0f} ms, longest time without a SEND_OK "
            f"{longest_gap(ledger) * 1000:.0f} ms"
        )
        print(
            f"plain sends (default producer): {plain.count()} acknowledged, {plain.failed} failed sends "
            f"surfaced, {plain_counter.failed} failed attempts retried, longest send "
            f"{slowest_send(plain) * 1000:.0f} ms"
        )
        print(check_stored(g, ledger, new))
        print(check_stored(g, plain, new))
        assert (ledger.failed, plain.failed) == (0, 0), f"sends failed: {ledger.reasons + plain.reasons}"
    finally:
        print(g.close())
