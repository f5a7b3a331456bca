"""DLedger mode (``enableDLegerCommitLog=true``) with real processes and real signals.

A NameServer and the three brokers of ``examples/conf/dledger/`` (broker-n0..n2.conf) are started
as ``mqnamesrv`` / ``mqbroker`` processes from copies of the shipped files in which only the fixed
ports (``listenPort``, the ``dLegerPeers`` Raft ports) and the store paths are rewritten, plus the
small store files and short HA timeouts every failover test here uses.  Each member keeps its
ports across restarts.  The members' view is read from GET_BROKER_HA_STATUS (``master``,
``masterEpoch``, ``dLegerMaster``, ``fenced``...), the route from the NameServer.

The scenarios: a store of Java's DLedger (``dledger-n0/data``) stops the start with an error that
names it; the group forms (sends refused with "no leader yet" while one member alone is up,
then a master registered as brokerId 0 and the slaves as index + 1, and no acknowledgement
without a majority); a SIGKILL of the master under a per-key ordered producer with retries and a
push consumer (0 acknowledged messages lost, per-key order kept, the killed member rejoins as a
slave); a SIGSTOPped master, which answers no send with SEND_OK after it wakes, is replaced, and
truncates its unacknowledged tail to follow the new master; ``preferredLeaderId=n2``, which
becomes master once it holds the log and again after its restart; and the chaos test,
``ROCKETQ_DLEDGER_CHAOS_ROUNDS`` rounds (3 by default, docs/dledger.md gives the full run) of
SIGKILL or SIGSTOP of the current master, printing the failover times (p50, max).
"""

from __future__ import annotations

import functools
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.model import Message, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.testing import wait_for
from rocketq.client.testing.chaos import Ledger, Load, broker_port
from rocketq.client.testing.dledger import (
    FAST,
    KEYS,
    TOPIC,
    WAIT_S,
    DLedgerGroup,
    check_stored,
    rejoined,
)
from rocketq.client.testing.ordered import Reader, send_key

pytestmark = [pytest.mark.slow, pytest.mark.serial]

CONF = Path(__file__).resolve().parents[1] / "examples" / "conf" / "dledger"
ROUNDS = int(os.environ.get("ROCKETQ_DLEDGER_CHAOS_ROUNDS", "3"))
SEED = int(os.environ.get("ROCKETQ_DLEDGER_CHAOS_SEED", str(random.randrange(1 << 30))))
#: never a timing promise: a bound far above the targets (p50 <= 5 s, max <= 15 s, docs/dledger.md)
FAILOVER_BOUND_S = 30.0


@pytest.fixture()
def group(tmp_path: Path) -> Iterator[DLedgerGroup]:
    g = DLedgerGroup(tmp_path, CONF)
    try:
        yield g
    finally:
        print(g.close())


# -- load and checks -----------------------------------------------------------------------------


def start_load(g: DLedgerGroup, ledger: Ledger) -> Load:
    producer = Producer(g.namesrv.addr, producer_group="pg-dledger", send_msg_timeout_ms=3000)
    producer.start()
    return Load(producer, [functools.partial(send_key, producer, TOPIC, k, ledger) for k in KEYS])


def start_reader(g: DLedgerGroup) -> Reader:
    return Reader(g.namesrv.addr, TOPIC, "cg-dledger", FAST)


# -- tests ---------------------------------------------------------------------------------------


def test_the_group_forms_and_acknowledges_only_with_a_majority(group: DLedgerGroup) -> None:
    g = group
    g.start(0)
    answer = g.raw_send(0, b"alone")
    assert answer is not None and answer.code == ResponseCode.SERVICE_NOT_AVAILABLE, answer
    assert "no leader yet" in (answer.remark or ""), answer.remark
    g.start(1, 2)
    master, st = g.wait_whole_group()
    route = g.route()
    slaves = {slot + 1: g.addr(slot) for slot in range(3) if slot != master}  # n<i> is brokerId i + 1
    assert route == {0: g.addr(master), **slaves}, route
    assert st["dLegerMaster"] == f"n{master}" and st["masterEpoch"] >= 1
    g.create_topic(master)
    with Producer(
        g.namesrv.addr, producer_group="pg-form", send_msg_timeout_ms=5000, client=FAST
    ) as producer:
        assert producer.send(Message(TOPIC, b"first")).send_status is SendStatus.SEND_OK
    others = [s for s in range(3) if s != master]
    for slot in others:  # one slave stopped: 2 of 3 still acknowledge
        g.signal(slot, signal.SIGSTOP)
        answer = g.raw_send(master, b"two of three")
        assert answer is not None and answer.code == ResponseCode.SUCCESS, answer
        g.signal(slot, signal.SIGCONT)
        wait_for(lambda: len(g.following(master, st["masterEpoch"])) == 2, "both slaves back", WAIT_S)
    for slot in others:
        g.signal(slot, signal.SIGSTOP)
    try:
        answer = g.raw_send(master, b"one of three")
        assert answer is None or answer.code != ResponseCode.SUCCESS, "acknowledged without a majority"
    finally:
        for slot in others:
            g.signal(slot, signal.SIGCONT)
    g.wait_whole_group()


def test_a_store_of_javas_dledger_stops_the_start(group: DLedgerGroup, tmp_path: Path) -> None:
    g = group
    root = Path(g.props[0]["storePathRootDir"])
    (root / "dledger-n0" / "data").mkdir(parents=True)
    conf = tmp_path / "java-store.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in g.props[0].items()), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "rocketq.broker", "-c", str(conf), "-n", g.namesrv.addr],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done
    assert "written by Java's DLedger" in done.stderr and str(root / "dledger-n0") in done.stderr, done.stderr


def test_master_sigkill_under_ordered_load_loses_nothing(group: DLedgerGroup) -> None:
    g = group
    g.start()
    old, old_st = g.wait_whole_group()
    g.create_topic(old)
    ledger = Ledger()
    reader = start_reader(g)
    load = start_load(g, ledger)
    try:
        wait_for(ledger.more_than(SendStatus.SEND_OK, 40), "acknowledged sends before the kill", WAIT_S)
        killed_at = time.monotonic()
        g.member(old).kill9()
        wait_for(
            lambda: ledger.first_ack_after(killed_at, g.port(old)) is not None, "a SEND_OK after", WAIT_S
        )
        first = ledger.first_ack_after(killed_at, g.port(old))
        assert first is not None
        new, new_st = g.wait_master("the new master", lambda s, st: s != old)
        assert new_st["masterEpoch"] > old_st["masterEpoch"]
        print(f"SIGKILL of n{old}: new master n{new}, first SEND_OK after {first.acked_at - killed_at:.2f} s")
        g.start(old)
        wait_for(rejoined(g, old, new_st["masterEpoch"]), f"n{old} to rejoin as a slave", WAIT_S)
        count = ledger.count()
        wait_for(ledger.more_than(SendStatus.SEND_OK, count + 20), "sends after the rejoin", WAIT_S)
    finally:
        load.close()
    print(check_stored(g, ledger, new))
    missing = reader.missing({a.msg_id for a in ledger.acked()})
    reader.close()
    assert not missing, f"the consumer did not read {len(missing)} acknowledged messages"


def test_a_stopped_master_acknowledges_nothing_and_truncates_on_return(group: DLedgerGroup) -> None:
    g = group
    g.start()
    old, old_st = g.wait_whole_group()
    g.create_topic(old)
    others = [s for s in range(3) if s != old]
    with Producer(
        g.namesrv.addr, producer_group="pg-stop", send_msg_timeout_ms=5000, client=FAST
    ) as producer:
        assert producer.send(Message(TOPIC, b"before")).send_status is SendStatus.SEND_OK
        # a tail only the master holds: stored, never acknowledged (the slaves are gone; a
        # stopped slave would still find it in its socket when it wakes)
        for slot in others:
            g.member(slot).kill9()
        unacked = g.raw_send(old, b"unacked")
        assert unacked is not None and unacked.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, unacked
        g.signal(old, signal.SIGSTOP)
        stopped_at = time.monotonic()
        g.start(*others)
        # a send that reaches the stopped master waits in its socket and is read when it wakes
        late: list[RemotingCommand | None] = []
        sender = threading.Thread(target=lambda: late.append(g.raw_send(old, b"stale", 60_000)), daemon=True)
        sender.start()
        new, new_st = g.wait_master("a master other than the stopped one", lambda s, st: s != old)
        print(f"SIGSTOP of n{old}: n{new} master after {time.monotonic() - stopped_at:.2f} s")
        assert new_st["masterEpoch"] > old_st["masterEpoch"]
        after = producer.send(Message(TOPIC, b"after"))
        assert after.send_status is SendStatus.SEND_OK and broker_port(after.offset_msg_id) == g.port(new)
        g.signal(old, signal.SIGCONT)
        sender.join(90)
        assert late and (late[0] is None or late[0].code != ResponseCode.SUCCESS), late
        again = g.raw_send(old, b"stale again")
        assert again is None or again.code != ResponseCode.SUCCESS, again
        wait_for(rejoined(g, old, new_st["masterEpoch"]), f"n{old} to rejoin as a slave", WAIT_S)
        last = producer.send(Message(TOPIC, b"last"))
        assert last.send_status is SendStatus.SEND_OK

    def holds_the_new_log() -> bool:
        bodies = {m.body for m in g.read_queues(old).values()}
        return {b"before", b"after", b"last"} <= bodies

    wait_for(holds_the_new_log, f"n{old} to hold the new master's messages", WAIT_S)
    bodies = [m.body for m in g.read_queues(old).values()]
    assert not {b"unacked", b"stale", b"stale again"} & set(bodies), "the unacknowledged tail survived"
    assert sorted(bodies) == sorted(m.body for m in g.read_queues(new).values())
    assert "truncating the CommitLog" in g.member(old).log_text(), "the old master truncated nothing"


def test_the_preferred_leader_takes_over_once_it_holds_the_log(tmp_path: Path) -> None:
    g = DLedgerGroup(tmp_path, CONF, preferredLeaderId="n2")
    try:
        g.start()
        g.wait_master("n2, the preferred leader, as master", lambda slot, st: slot == 2)
        g.create_topic(2)
        with Producer(
            g.namesrv.addr, producer_group="pg-preferred", send_msg_timeout_ms=5000, client=FAST
        ) as producer:
            assert producer.send(Message(TOPIC, b"one")).send_status is SendStatus.SEND_OK
            g.member(2).kill9()
            other, st = g.wait_master("another master", lambda slot, st: slot != 2)
            for body in (b"two", b"three"):
                assert producer.send(Message(TOPIC, body)).send_status is SendStatus.SEND_OK
            g.start(2)  # it catches up as a slave, then the master hands over
            g.wait_master(
                "n2 as master again", lambda slot, s: slot == 2 and s["masterEpoch"] > st["masterEpoch"]
            )
            assert producer.send(Message(TOPIC, b"four")).send_status is SendStatus.SEND_OK
        bodies = sorted(m.body for m in g.read_queues(2).values())
        assert bodies == sorted([b"one", b"two", b"three", b"four"]), bodies
        assert "handing the mastership over to the preferred n2" in g.member(other).log_text()
    finally:
        print(g.close())


def chaos_round(g: DLedgerGroup, ledger: Ledger, rng: random.Random, round_no: int) -> float:
    """Kill the current master (round 1 SIGKILL, round 2 SIGSTOP, then either), bring it back and
    wait until it follows the new master; returns the failover time (kill -> first SEND_OK of a
    send begun after it, through another member)."""
    old, old_st = g.wait_whole_group()
    count = ledger.count()
    wait_for(ledger.more_than(SendStatus.SEND_OK, count + 10), "sends before the kill", WAIT_S)
    sig = "SIGKILL" if round_no == 1 else "SIGSTOP" if round_no == 2 else rng.choice(["SIGKILL", "SIGSTOP"])
    time.sleep(rng.uniform(0.2, 2.0))
    killed_at = time.monotonic()
    if sig == "SIGKILL":
        g.member(old).kill9()
    else:
        g.signal(old, signal.SIGSTOP)
    wait_for(
        lambda: ledger.first_ack_after(killed_at, g.port(old)) is not None,
        f"round {round_no}: a SEND_OK through a new master",
        WAIT_S,
    )
    first = ledger.first_ack_after(killed_at, g.port(old))
    assert first is not None
    took = first.acked_at - killed_at
    new, new_st = g.wait_master("the new master", lambda s, st: s != old)
    print(f"round {round_no}: {sig} of n{old} (epoch {old_st['masterEpoch']}), new master n{new} "
          f"(epoch {new_st['masterEpoch']}), first SEND_OK after {took:.2f} s")  # fmt: skip
    if sig == "SIGKILL":
        g.start(old)
    else:
        g.signal(old, signal.SIGCONT)
    wait_for(rejoined(g, old, new_st["masterEpoch"]), f"n{old} to rejoin as a slave", WAIT_S)
    return took


def test_dledger_chaos(group: DLedgerGroup) -> None:
    g = group
    rng = random.Random(SEED)
    print(f"seed {SEED}, {ROUNDS} rounds")
    g.start()
    master, _ = g.wait_whole_group()
    g.create_topic(master)
    ledger = Ledger()
    reader = start_reader(g)
    load = start_load(g, ledger)
    try:
        times = [chaos_round(g, ledger, rng, n) for n in range(1, ROUNDS + 1)]
    finally:
        load.close()
    master, _ = g.wait_master("a master for the final read")
    print(check_stored(g, ledger, master))
    print(f"failover p50 {statistics.median(times):.2f} s, max {max(times):.2f} s over {len(times)} rounds")
    missing = reader.missing({a.msg_id for a in ledger.acked()})
    reader.close()
    assert not missing, f"the consumer did not read {len(missing)} acknowledged messages"
    assert max(times) <= FAILOVER_BOUND_S, times
