"""Transactional messages end to end: the client's TransactionProducer against real processes.

``mqnamesrv`` and ``mqbroker`` run as subprocesses (port 0, temp dirs) with shortened
``transactionTimeOut`` / ``transactionCheckInterval`` so that check-backs happen within seconds.
Visibility is checked the way a consumer sees messages: PULL_MESSAGE on every queue of the real
topic.  Covered: commit (visible), rollback (never visible), UNKNOW then a check-back that commits
or rolls back, a producer that went away (its half message is parked in
``TRANS_CHECK_MAX_TIME_TOPIC`` after ``transactionCheckMax`` checks and never delivered), and a
broker restart (SIGTERM, and SIGKILL with SYNC_FLUSH) with half messages pending, which the
check-back still resolves afterwards.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.model import LocalTransactionState, Message, MessageExt, SendStatus
from rocketq.client.producer import AsyncTransactionProducer, TransactionProducer
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    free_port,
    pull_queue,
    spawn_broker,
    spawn_namesrv,
    wait_for,
)

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
PARKED_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
CHECK_MAX = 3
TX_CONF: dict[str, Any] = {
    "transactionTimeOut": 1000,
    "transactionCheckInterval": 1000,
    "transactionCheckMax": CHECK_MAX,
    "mappedFileSizeCommitLog": 8 << 20,
    "mappedFileSizeConsumeQueue": 20 * 2000,
    "maxHashSlotNum": 1000,
    "maxIndexNum": 4000,
}
FAST_CLIENT = ClientConfig(heartbeat_broker_interval_ms=1000)
WAIT_S = 60.0  # check passes run every second; a loaded machine runs them late

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp = tmp_path_factory.mktemp("tx-e2e")
    with spawn_namesrv(tmp) as ns, spawn_broker(tmp, ns.addr, **TX_CONF) as broker:
        yield ns, broker
        print(f"--- broker log tail ---\n{broker.log_tail(80)}")


def visible(ns_addr: str, addr: str, topic: str, queues: int = 2) -> dict[bytes, MessageExt]:
    with BlockingMQClientAPI(ns_addr) as api:
        return {m.body: m for q in range(queues) for m in pull_queue(api, addr, topic, q)}


class Checker:
    """A check listener answering from a table (UNKNOW for unknown ids), recording every check."""

    def __init__(self) -> None:
        self.answers: dict[str, LocalTransactionState] = {}
        self.checks: list[MessageExt] = []
        self.lock = threading.Lock()

    def __call__(self, msg: MessageExt) -> LocalTransactionState:
        with self.lock:
            self.checks.append(msg)
        return self.answers.get(msg.uniq_key or "", UNKNOW)

    def checked(self, tid: str | None) -> list[MessageExt]:
        with self.lock:
            return [m for m in self.checks if m.uniq_key == tid]


def test_commit_is_visible_and_rollback_never_is(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, broker = cluster
    create_topic(ns.addr, "TxCommit", 2)
    checker = Checker()
    with TransactionProducer(ns.addr, producer_group="pg-commit", check_listener=checker) as producer:
        ok = producer.send_message_in_transaction(
            Message("TxCommit", b"paid", keys="o-1"), lambda m, a: COMMIT
        )
        no = producer.send_message_in_transaction(Message("TxCommit", b"cancelled"), lambda m, a: ROLLBACK)
        assert ok.send_status is SendStatus.SEND_OK and ok.local_transaction_state is COMMIT
        assert no.local_transaction_state is ROLLBACK and ok.transaction_id != no.transaction_id
        wait_for(
            lambda: b"paid" in visible(ns.addr, broker.addr, "TxCommit"), "the committed message", WAIT_S
        )
        time.sleep(3)  # three check passes: neither transaction is asked about or delivered
        seen = visible(ns.addr, broker.addr, "TxCommit")
    assert set(seen) == {b"paid"}
    msg = seen[b"paid"]
    assert msg.uniq_key == ok.transaction_id == ok.msg_id and msg.keys == ["o-1"]
    assert msg.topic == "TxCommit" and msg.queue_id == ok.message_queue.queue_id
    assert not checker.checks


def test_unknow_then_check_back_commits_and_rolls_back(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, broker = cluster
    create_topic(ns.addr, "TxCheck", 2)
    checker = Checker()
    with TransactionProducer(
        ns.addr, producer_group="pg-check", check_listener=checker, client=FAST_CLIENT
    ) as producer:
        a = producer.send_message_in_transaction(Message("TxCheck", b"decide-commit"), lambda m, a: UNKNOW)
        b = producer.send_message_in_transaction(Message("TxCheck", b"decide-rollback"), lambda m, a: None)
        assert a.local_transaction_state is UNKNOW and b.local_transaction_state is UNKNOW
        assert a.transaction_id and b.transaction_id
        checker.answers = {a.transaction_id: COMMIT, b.transaction_id: ROLLBACK}
        wait_for(
            lambda: b"decide-commit" in visible(ns.addr, broker.addr, "TxCheck"), "the checked commit", WAIT_S
        )
        wait_for(lambda: bool(checker.checked(b.transaction_id)), "the check of the rollback", WAIT_S)
        time.sleep(3)
        seen = visible(ns.addr, broker.addr, "TxCheck")
    assert set(seen) == {b"decide-commit"}
    asked = checker.checked(a.transaction_id)[0]
    assert asked.topic == "TxCheck" and asked.body == b"decide-commit"  # the real topic, not the half topic
    assert asked.properties["PGROUP"] == "pg-check" and asked.properties["TRAN_MSG"] == "true"
    # answered at the first check: not asked again once decided
    assert len(checker.checked(b.transaction_id)) == 1


def test_asyncio_producer_with_coroutine_callbacks(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    import asyncio

    ns, broker = cluster
    create_topic(ns.addr, "TxAsync", 2)

    async def check(msg: MessageExt) -> LocalTransactionState:
        return COMMIT

    async def local(msg: Message, arg: Any) -> LocalTransactionState:
        await asyncio.sleep(0)
        return COMMIT if arg == "now" else UNKNOW

    async def main() -> list[Any]:
        async with AsyncTransactionProducer(
            ns.addr, producer_group="pg-async", check_listener=check, client=FAST_CLIENT
        ) as producer:
            results = [
                await producer.send_message_in_transaction(Message("TxAsync", b"now"), local, "now"),
                await producer.send_message_in_transaction(Message("TxAsync", b"later"), local, "later"),
            ]
            deadline = time.monotonic() + 60
            while set(await asyncio.to_thread(visible, ns.addr, broker.addr, "TxAsync")) != {
                b"now",
                b"later",
            }:
                assert time.monotonic() < deadline, "both transactions committed in time"
                await asyncio.sleep(0.2)
            return results

    results = asyncio.run(main())
    assert [r.local_transaction_state for r in results] == [COMMIT, UNKNOW]


def test_producer_gone_is_parked_after_max_checks(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, broker = cluster
    create_topic(ns.addr, "TxGone", 2)
    producer = TransactionProducer(ns.addr, producer_group="pg-gone", check_listener=lambda m: COMMIT)
    producer.start()
    try:
        result = producer.send_message_in_transaction(Message("TxGone", b"orphan"), lambda m, a: UNKNOW)
    finally:
        producer.shutdown()  # nobody of the group is left to answer the check-backs
    tid = result.transaction_id

    def parked() -> list[MessageExt]:
        with BlockingMQClientAPI(ns.addr) as api:
            return [m for m in pull_queue(api, broker.addr, PARKED_TOPIC, 0) if m.uniq_key == tid]

    wait_for(lambda: bool(parked()), "the half message parked in TRANS_CHECK_MAX_TIME_TOPIC", 90)
    (copy,) = parked()
    assert copy.body == b"orphan" and copy.properties["REAL_TOPIC"] == "TxGone"
    assert int(copy.properties.get("TRANSACTION_CHECK_TIMES", "0")) >= CHECK_MAX
    time.sleep(2)  # parked means never checked again and never delivered
    assert len(parked()) == 1
    assert visible(ns.addr, broker.addr, "TxGone") == {}


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_broker_restart_with_pending_half_messages(tmp_path: Path, how: str) -> None:
    port = free_port()
    conf = dict(TX_CONF, listenPort=port, flushDiskType="SYNC_FLUSH", transactionCheckMax=60)
    checker = Checker()
    with spawn_namesrv(tmp_path) as ns:
        broker = spawn_broker(tmp_path, ns.addr, **conf)
        try:
            create_topic(ns.addr, "TxRestart", 2)
            with TransactionProducer(
                ns.addr, producer_group="pg-restart", check_listener=checker, client=FAST_CLIENT
            ) as producer:
                a = producer.send_message_in_transaction(
                    Message("TxRestart", b"survivor"), lambda m, x: UNKNOW
                )
                b = producer.send_message_in_transaction(Message("TxRestart", b"undone"), lambda m, x: UNKNOW)
                assert a.send_status is SendStatus.SEND_OK and b.send_status is SendStatus.SEND_OK
                if how == "sigterm":
                    assert broker.terminate() == 0
                else:
                    broker.kill9()
                assert a.transaction_id and b.transaction_id
                checker.answers = {a.transaction_id: COMMIT, b.transaction_id: ROLLBACK}
                broker = spawn_broker(tmp_path, ns.addr, **conf)  # same store, same port
                assert broker.addr.endswith(f":{port}")
                wait_for(
                    lambda: b"survivor" in visible(ns.addr, broker.addr, "TxRestart"),
                    "the commit after restart",
                    WAIT_S,
                )
                wait_for(
                    lambda: bool(checker.checked(b.transaction_id)),
                    "the check of the rolled back one",
                    WAIT_S,
                )
                time.sleep(3)
                seen = visible(ns.addr, broker.addr, "TxRestart")
            assert set(seen) == {b"survivor"}
            assert seen[b"survivor"].uniq_key == a.transaction_id
        finally:
            print(f"--- broker log tail ---\n{broker.log_tail(80)}")
            broker.terminate()
