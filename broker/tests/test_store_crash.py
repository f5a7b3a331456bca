"""Real crash test: a child process appends with SYNC_FLUSH and is killed with SIGKILL at random moments.

The child prints one line per acknowledged append (after the group commit returned PUT_OK).  After
each kill the parent recovers the store in-process and checks that every acknowledged message is
readable by CommitLog offset, through its ConsumeQueue at its queue offset, and by key through the
IndexFile, byte-identical and with a valid CRC.  20 rounds, a few seconds in total.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rocketq.broker.store.config import FlushDiskType, StoreConfig
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.status import GetMessageStatus
from rocketq.client.remoting.message import decode_stored_message

ROUNDS = 20

CHILD = r"""
import sys, time
from rocketq.broker.store.config import FlushDiskType, StoreConfig
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
root, rnd = sys.argv[1], int(sys.argv[2])
cfg = StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log_bytes=128 * 1024,
                  mapped_file_size_consume_queue_units=200, max_hash_slot_num=256, max_index_num=4000,
                  max_message_size_bytes=16 * 1024, flush_disk_type=FlushDiskType.SYNC_FLUSH)
store = MessageStore(cfg)
store.start()
print("READY", flush=True)
host = ("127.0.0.1", 10911)
seq = 0
while True:
    n = 1 + seq % 4
    msgs = []
    for k in range(n):
        key = f"r{rnd}-{seq + k}"
        body = (key.encode() + b":") * (1 + (seq + k) % 40)
        msgs.append(MessageToStore(topic="Crash", queue_id=(seq // 4) % 3, body=body,
                                   properties={"KEYS": key, "UNIQ_KEY": "U" + key}, born_timestamp=seq,
                                   born_host=host, store_host=host))
    r = store.put_messages(msgs) if n > 1 else store.put_message(msgs[0])
    if r.status.name != "PUT_OK":
        print("FAIL", r.status.name, flush=True)
        break
    a = r.append_result
    print("ACK", rnd, seq, n, a.queue_offset, a.wrote_offset, msgs[0].queue_id, flush=True)
    seq += n
"""


def body_of(key: str, i: int) -> bytes:
    return (key.encode() + b":") * (1 + i % 40)


def run_child(root: Path, rnd: int, kill_after_s: float) -> list[tuple[int, int, int, int, int, int]]:
    env = dict(os.environ)
    src = [str(Path(__file__).resolve().parents[2] / p / "src") for p in ("client", "broker")]
    env["PYTHONPATH"] = os.pathsep.join([*src, env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), str(rnd)],
        stdout=subprocess.PIPE,
        stderr=open(root / f"child-{rnd}.log", "w"),
        env=env,
        text=True,
    )
    assert proc.stdout is not None
    acks: list[tuple[int, int, int, int, int, int]] = []
    ready = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.split()
            if parts[0] == "READY":
                ready.set()
            elif parts[0] == "ACK" and line.endswith("\n") and len(parts) == 7:
                acks.append(tuple(int(p) for p in parts[1:]))  # type: ignore[arg-type]
            elif parts[0] == "FAIL":
                raise AssertionError(line)  # a torn last line (the kill hit print) is not an ack

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        assert ready.wait(30), "child did not start"
        time.sleep(kill_after_s)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    t.join(10)
    return acks


def verify(root: Path, acked: list[tuple[int, int, int, int, int, int]]) -> None:
    cfg = StoreConfig(
        store_path_root_dir=str(root),
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        mapped_file_size_commit_log_bytes=128 * 1024,
        mapped_file_size_consume_queue_units=200,
        max_hash_slot_num=256,
        max_index_num=4000,
        max_message_size_bytes=16 * 1024,
    )
    with MessageStore(cfg) as store:
        assert not store.last_exit_ok
        for rnd, seq, n, queue_offset, wrote_offset, queue_id in acked:
            bufs: list[memoryview] = []
            while len(bufs) < n:  # a pull stops at the end of a ConsumeQueue segment
                g = store.get_message(
                    "g", "Crash", queue_id, queue_offset + len(bufs), n - len(bufs), 1 << 30
                )
                assert g.status is GetMessageStatus.FOUND
                bufs += g.buffers
            pos = wrote_offset
            for k, buf in enumerate(bufs):
                key = f"r{rnd}-{seq + k}"
                rec = decode_stored_message(buf, check_crc=True)
                assert rec.body == body_of(key, seq + k) and rec.properties["KEYS"] == key
                assert (rec.queue_id, rec.queue_offset, rec.physical_offset) == (
                    queue_id,
                    queue_offset + k,
                    pos,
                )
                assert store.look_message_by_offset(pos) == bytes(buf)
                hits = store.query_message("Crash", key, 32, 0, 1 << 62).buffers
                assert [bytes(h) for h in hits] == [bytes(buf)]
                pos += len(buf)


@pytest.mark.slow
def test_sigkill_during_sync_flush_appends(tmp_path: Path) -> None:
    rng = random.Random(20241122)
    acked: list[tuple[int, int, int, int, int, int]] = []
    for rnd in range(ROUNDS):
        acks = run_child(tmp_path, rnd, rng.uniform(0.02, 0.35))
        acked += acks
        verify(tmp_path, acked)
    assert len(acked) > ROUNDS  # the children did make progress
