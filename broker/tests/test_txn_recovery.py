"""Transaction state survives a clean restart and a real crash (SIGKILL): it is rebuilt from the log.

Scenario, in both cases: half message A stays pending and is checked once (so a copy exists),
B is committed, C is rolled back.  After the restart the check pass must ask about A only (its
newest copy, second check), never re-commit B, never surface C; answering A's check commits it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import GetMessageStatus
from rocketq.broker.transaction import OP_TOPIC, TransactionalMessageService
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketq.client.remoting.message import decode_stored_message

HOST = ("127.0.0.1", 10911)
CONFIG = dict(
    mapped_file_size_commit_log_bytes=256 * 1024,
    mapped_file_size_consume_queue_units=200,
    max_message_size_bytes=64 * 1024,
    max_hash_slot_num=64,
    max_index_num=500,
    clean_resource_interval_ms=3_600_000,
)

SCENARIO = r"""
def run_scenario(store):
    import time
    from rocketq.broker.store.record_batch import MessageToStore
    from rocketq.broker.transaction import TransactionalMessageService
    from rocketq.client.remoting.headers import EndTransactionRequestHeader

    svc = TransactionalMessageService(store)
    host = ("127.0.0.1", 10911)
    results = {}
    for name in "ABC":
        props = {"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": "U" + name * 31, "TAGS": name}
        m = MessageToStore(topic="TopicT", queue_id=0, body=name.encode(), properties=props, sys_flag=4,
                           born_timestamp=0, born_host=host, store_host=host)
        results[name] = svc.prepare(m).append_result
    for name, kind in (("B", 8), ("C", 12)):
        ar = results[name]
        h = EndTransactionRequestHeader(producer_group="PG", tran_state_table_offset=ar.queue_offset,
                                        commit_log_offset=ar.wrote_offset, commit_or_rollback=kind,
                                        msg_id=ar.msg_id)
        assert svc.end_transaction(h)[0] == 0
    assert store.wait_dispatched()
    calls = []
    stats = svc.check(10_000, lambda g, b, h: calls.append(h) or True)
    assert stats.checked == 1 and len(calls) == 1, stats
    assert store.wait_dispatched()
"""

CHILD = (
    SCENARIO
    + r"""
import sys, time
from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.message_store import MessageStore
cfg = StoreConfig(store_path_root_dir=sys.argv[1], **CONFIG)
store = MessageStore(cfg)
store.start()
run_scenario(store)
print("DONE", flush=True)
time.sleep(60)
"""
)


def make_store(root: Path) -> MessageStore:
    return MessageStore(StoreConfig(store_path_root_dir=str(root), **CONFIG))  # type: ignore[arg-type]


def bodies(store: MessageStore, topic: str) -> list[bytes]:
    assert store.wait_dispatched()
    res = store.get_message("g", topic, 0, 0, 100, 1 << 20)
    if res.status is not GetMessageStatus.FOUND:
        return []
    return [decode_stored_message(b).body for b in res.buffers]


def assert_rebuilt(root: Path) -> None:
    store = make_store(root)
    store.start()
    try:
        svc = TransactionalMessageService(store)
        assert bodies(store, "TopicT") == [b"B"]
        assert len(bodies(store, OP_TOPIC)) == 2
        calls: list[CheckTransactionStateRequestHeader] = []
        bodies_seen: list[bytes] = []

        def send_check(group: str, body: bytes, header: CheckTransactionStateRequestHeader) -> bool:
            calls.append(header)
            bodies_seen.append(body)
            return True

        stats = svc.check(20_000, send_check)
        assert stats.checked == 1 and len(calls) == 1, stats
        checked = decode_stored_message(bodies_seen[0])
        assert checked.body == b"A" and checked.properties["TRANSACTION_CHECK_TIMES"] == "2"
        h = calls[0]
        end = EndTransactionRequestHeader(
            producer_group="PG",
            tran_state_table_offset=h.tran_state_table_offset,
            commit_log_offset=h.commit_log_offset,
            commit_or_rollback=8,
            from_transaction_check=True,
            msg_id=h.offset_msg_id or "",
        )
        assert svc.end_transaction(end) == (ResponseCode.SUCCESS, None)
        assert sorted(bodies(store, "TopicT")) == [b"A", b"B"]
        assert svc.check(30_000, send_check).checked == 0 and len(calls) == 1
    finally:
        store.shutdown()


def test_state_survives_a_clean_restart(tmp_path: Path) -> None:
    namespace: dict[str, object] = {"MessageToStore": MessageToStore}
    exec(SCENARIO, namespace)
    store = make_store(tmp_path)
    store.start()
    namespace["run_scenario"](store)  # type: ignore[operator]
    store.shutdown()
    assert_rebuilt(tmp_path)


def test_state_survives_a_crash(tmp_path: Path) -> None:
    env = dict(os.environ)
    src = [str(Path(__file__).resolve().parents[2] / p / "src") for p in ("client", "broker")]
    env["PYTHONPATH"] = os.pathsep.join([*src, env.get("PYTHONPATH", "")])
    child = f"CONFIG = {CONFIG!r}\n" + CHILD
    proc = subprocess.Popen(
        [sys.executable, "-c", child, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "DONE", proc.stderr.read() if proc.stderr else line
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert (tmp_path / "abort").exists()  # the child never shut down
    assert_rebuilt(tmp_path)


def test_lost_progress_file_rescans_without_double_checks(tmp_path: Path) -> None:
    """Without the progress file the pass starts at the half queue's start: the first copy of A is
    superseded by its check copy, B and C are finished, so A is still asked about only once."""
    namespace: dict[str, object] = {"MessageToStore": MessageToStore}
    exec(SCENARIO, namespace)
    store = make_store(tmp_path)
    store.start()
    namespace["run_scenario"](store)  # type: ignore[operator]
    store.shutdown()
    for name in os.listdir(tmp_path / "config"):
        os.unlink(tmp_path / "config" / name)
    assert_rebuilt(tmp_path)
