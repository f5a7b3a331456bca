"""Batched transactions end to end: real ``mqnamesrv`` and ``mqbroker`` processes (port 0, temp dirs).

A TransactionProducer sends three half batches to two queues; a consumer pulling both queues sees
nothing.  The commit comes from a *separate process* (the way a Spark driver commits what executors
sent) with only the pickled :class:`HalfBatchResult` handles and a BlockingMQClientAPI; afterwards
every message is visible once, and a watcher polling the queues' max offsets during the commit only
ever sees a queue empty or complete.  A repeated commit adds nothing; a rolled-back batch never
appears.  The broker advertises the extension in GET_BROKER_RUNTIME_INFO.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.model import LocalTransactionState, Message
from rocketq.client.producer import TransactionProducer
from rocketq.client.producer.transaction_batch import HalfBatchResult, end_transaction_batch_blocking
from rocketq.client.remoting.route import MessageQueue
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    pull_queue,
    spawn_broker,
    spawn_namesrv,
    wait_for,
)

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
CONF: dict[str, Any] = {
    "transactionTimeOut": 600_000,
    "mappedFileSizeCommitLog": 8 << 20,
    "mappedFileSizeConsumeQueue": 20 * 2000,
    "maxHashSlotNum": 1000,
    "maxIndexNum": 4000,
}
DRIVER = """
import pickle, sys
from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.model import LocalTransactionState
from rocketq.client.producer.transaction_batch import end_transaction_batch_blocking
ns, group, path = sys.argv[1:4]
with open(path, "rb") as f:
    handles = pickle.load(f)
with BlockingMQClientAPI(ns) as api:
    end_transaction_batch_blocking(api, group, handles, LocalTransactionState.COMMIT_MESSAGE)
print("committed", sum(h.count for h in handles))
"""

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp = tmp_path_factory.mktemp("txb-e2e")
    with spawn_namesrv(tmp) as ns, spawn_broker(tmp, ns.addr, **CONF) as broker:
        yield ns, broker
        print(f"--- broker log tail ---\n{broker.log_tail(80)}")


def rows(tag: str, n: int, topic: str) -> list[Message]:
    return [Message(topic, f"{tag}-{i}".encode(), keys=f"{tag}{i}", tags="T") for i in range(n)]


def send_halves(ns: str, broker_name: str, topic: str, group: str) -> list[HalfBatchResult]:
    with TransactionProducer(ns, producer_group=group, check_listener=lambda m: ROLLBACK) as producer:
        q0, q1 = MessageQueue(topic, broker_name, 0), MessageQueue(topic, broker_name, 1)
        return [
            producer.send_half_batch(q0, rows("a", 3, topic)),
            producer.send_half_batch(q1, rows("b", 5, topic)),
            producer.send_half_batch(q0, rows("c", 4, topic)),
        ]


def test_feature_detection(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, broker = cluster
    with BlockingMQClientAPI(ns.addr) as api:
        assert api.supports_transaction_batch(broker.addr) is True


def test_commit_from_another_process_is_atomic_and_idempotent(
    cluster: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    ns, broker = cluster
    topic = "TxBatchCommit"
    create_topic(ns.addr, topic, 2)
    assert broker.broker_name is not None
    handles = send_halves(ns.addr, broker.broker_name, topic, "pg-txb")
    assert all(h.ranged for h in handles) and [h.count for h in handles] == [3, 5, 4]
    with BlockingMQClientAPI(ns.addr) as api:
        time.sleep(0.5)
        assert pull_queue(api, broker.addr, topic, 0) == [] and pull_queue(api, broker.addr, topic, 1) == []
        seen: dict[int, set[int]] = {0: set(), 1: set()}
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                for q in (0, 1):
                    seen[q].add(api.get_max_offset(broker.addr, topic, q))

        watcher = threading.Thread(target=watch)
        watcher.start()
        path = tmp_path / "handles.pickle"
        path.write_bytes(pickle.dumps(handles))
        try:
            done = subprocess.run(
                [sys.executable, "-c", DRIVER, ns.addr, "pg-txb", str(path)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            assert "committed 12" in done.stdout
            wait_for(lambda: len(pull_queue(api, broker.addr, topic, 0)) == 7, "queue 0 committed")
            wait_for(lambda: len(pull_queue(api, broker.addr, topic, 1)) == 5, "queue 1 committed")
        finally:
            stop.set()
            watcher.join()
        assert seen[0] <= {0, 7} and seen[1] <= {0, 5}, seen  # never part of a queue's rows
        q0, q1 = pull_queue(api, broker.addr, topic, 0), pull_queue(api, broker.addr, topic, 1)
        assert [m.body for m in q0] == [f"a-{i}".encode() for i in range(3)] + [
            f"c-{i}".encode() for i in range(4)
        ]
        assert [m.body for m in q1] == [f"b-{i}".encode() for i in range(5)]
        assert [m.uniq_key for m in q0] == list(handles[0].transaction_ids + handles[2].transaction_ids)
        assert all(m.keys and m.tags == "T" for m in q0 + q1)
        end_transaction_batch_blocking(api, "pg-txb", handles, COMMIT)  # again: nothing new
        time.sleep(0.5)
        assert (
            len(pull_queue(api, broker.addr, topic, 0)) == 7
            and len(pull_queue(api, broker.addr, topic, 1)) == 5
        )


def test_rollback_is_never_visible(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, broker = cluster
    topic = "TxBatchRollback"
    create_topic(ns.addr, topic, 2)
    assert broker.broker_name is not None
    handles = send_halves(ns.addr, broker.broker_name, topic, "pg-txb-rb")
    with BlockingMQClientAPI(ns.addr) as api:
        end_transaction_batch_blocking(api, "pg-txb-rb", handles, ROLLBACK)
        end_transaction_batch_blocking(api, "pg-txb-rb", handles, COMMIT)  # too late: already ended
        time.sleep(1.0)
        assert pull_queue(api, broker.addr, topic, 0) == [] and pull_queue(api, broker.addr, topic, 1) == []
