"""Storage engine benchmark: append (with dispatch), flush modes and reads through the ConsumeQueue.

Not a test.  Prints msgs/s and MB/s for 100-byte and 1 KiB messages with ASYNC_FLUSH and SYNC_FLUSH,
next to the disk's sequential write bandwidth measured in the same run (1 MiB writes + fsync) so the
figures can be compared on any machine.

    .venv/bin/python benchmarks/store_bench.py [--dir /path/on/the/disk] [--quick] [--batch 100]

Two append APIs are measured:

* ``msgs``: the per-message API, ``put_messages(list[MessageToStore])``, with the objects built
  before the clock starts (as before: the broker would build them from the request);
* ``cols``: the column API (``put_batch(MessageBatchToStore)``) with the columns decoded from wire
  batch bodies before the clock starts: the store's own cost;
* ``wire``: the broker's whole SEND_BATCH_MESSAGE job inside the clock: decoding each wire batch
  body (``decode_batch_columns``), building the ``MessageBatchToStore`` and ``put_batch``.

Tags codes and index keys are never handed over: the store extracts them from the properties.

Every message carries ``TAGS``, one ``KEYS`` value and a ``UNIQ_KEY`` (two index entries).  Appends
are timed from the first append until every message is dispatched (ConsumeQueue and IndexFile
built).  Reads pull every queue from offset 0 to the end with ``get_message`` and touch each
returned record's TOTALSIZE, the way a pull response is assembled.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

from rocketq.broker.store.config import FlushDiskType, StoreConfig
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageBatchToStore, MessageToStore
from rocketq.broker.store.status import GetMessageStatus, PutMessageResult
from rocketq.client.remoting.batch import decode_batch_columns, encode_batch

HOST = ("127.0.0.1", 10911)
BORN = ("10.0.0.7", 50123)
QUEUES = 4
TOPIC = "BenchTopic"


def disk_bandwidth_mb_s(directory: str, total_mb: int) -> float:
    path = os.path.join(directory, "disk-probe")
    chunk = os.urandom(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(total_mb):
            os.write(fd, chunk)
        os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return total_mb / elapsed


def props_of(i: int) -> dict[str, str]:
    return {"TAGS": "TagA", "KEYS": f"k{i}", "UNIQ_KEY": f"7F000001{i:024X}"}


def message_batches(count: int, size: int, batch: int) -> list[Callable[[MessageStore], PutMessageResult]]:
    """Per-message API: MessageToStore objects built up front."""
    body = os.urandom(size)
    out: list[Callable[[MessageStore], PutMessageResult]] = []
    for b in range(count // batch):
        msgs = [
            MessageToStore(
                topic=TOPIC,
                queue_id=b % QUEUES,
                body=body,
                properties=props_of(b * batch + i),
                born_timestamp=1,
                born_host=BORN,
                store_host=HOST,
            )
            for i in range(batch)
        ]
        out.append(lambda s, m=msgs: s.put_messages(m))  # type: ignore[misc]
    return out


def wire_batches(count: int, size: int, batch: int) -> list[Callable[[MessageStore], PutMessageResult]]:
    """Bulk API: SEND_BATCH_MESSAGE bodies, decoded into columns inside the timed region."""
    body = os.urandom(size)
    out: list[Callable[[MessageStore], PutMessageResult]] = []
    for b in range(count // batch):
        wire = encode_batch([(0, body, props_of(b * batch + i)) for i in range(batch)])

        def put(s: MessageStore, wire: bytes = wire, queue_id: int = b % QUEUES) -> PutMessageResult:
            cols = decode_batch_columns(wire)
            return s.put_batch(
                MessageBatchToStore(
                    topic=TOPIC,
                    queue_id=queue_id,
                    born_host=BORN,
                    store_host=HOST,
                    bodies=cols.bodies,
                    properties=cols.properties,
                    flags=cols.flags,
                    born_timestamps=1,
                )
            )

        out.append(put)
    return out


def column_batches(count: int, size: int, batch: int) -> list[Callable[[MessageStore], PutMessageResult]]:
    """Bulk API with the columns decoded before the clock starts (the store's share alone)."""
    body = os.urandom(size)
    out: list[Callable[[MessageStore], PutMessageResult]] = []
    for b in range(count // batch):
        cols = decode_batch_columns(encode_batch([(0, body, props_of(b * batch + i)) for i in range(batch)]))
        columns = MessageBatchToStore(
            topic=TOPIC,
            queue_id=b % QUEUES,
            born_host=BORN,
            store_host=HOST,
            bodies=cols.bodies,
            properties=cols.properties,
            flags=cols.flags,
            born_timestamps=1,
        )
        out.append(lambda s, c=columns: s.put_batch(c))  # type: ignore[misc]
    return out


def run_appends(
    store: MessageStore, batches: Sequence[Callable[[MessageStore], PutMessageResult]], threads: int
) -> float:
    parts = [batches[i::threads] for i in range(threads)]

    def worker(part: Sequence[Callable[[MessageStore], PutMessageResult]]) -> None:
        for put in part:
            r = put(store)
            if not r.is_ok:
                raise RuntimeError(f"append failed: {r.status}")

    start = time.perf_counter()
    ts = [threading.Thread(target=worker, args=(p,)) for p in parts]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if not store.wait_dispatched(300):
        raise RuntimeError("dispatch did not catch up")
    return time.perf_counter() - start


def run_reads(store: MessageStore, max_msgs: int, max_bytes: int) -> tuple[int, float]:
    n = 0
    start = time.perf_counter()
    for q in range(QUEUES):
        offset = 0
        while True:
            g = store.get_message("bench", TOPIC, q, offset, max_msgs, max_bytes)
            if g.status is not GetMessageStatus.FOUND:
                break
            for buf in g.buffers:
                _ = buf[0]
            n += g.msg_count
            offset = g.next_begin_offset
    return n, time.perf_counter() - start


def bench(
    root: str, api: str, size: int, count: int, flush: FlushDiskType, batch: int, threads: int, read: bool
) -> dict[str, float]:
    shutil.rmtree(root, ignore_errors=True)
    cfg = StoreConfig(
        store_path_root_dir=root, mapped_file_size_commit_log_bytes=1 << 30, flush_disk_type=flush
    )
    make = {"wire": wire_batches, "cols": column_batches, "msgs": message_batches}[api]
    batches = make(count, size, batch)
    store = MessageStore(cfg)
    store.start()
    try:
        total = len(batches) * batch
        elapsed = run_appends(store, batches, threads)
        stored_bytes = store.max_phy_offset
        res = {"msgs": total, "append_msgs_s": total / elapsed, "append_mb_s": stored_bytes / elapsed / 1e6}
        if read:
            n, t = run_reads(store, 32, 256 * 1024)
            res["read32_msgs_s"] = n / t
            n, t = run_reads(store, 1024, 4 << 20)
            res["read1024_msgs_s"] = n / t
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="directory on the disk to measure (default: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="smaller counts")
    ap.add_argument("--batch", type=int, default=100, help="messages per batch (default 100)")
    ap.add_argument("--only", default="", help="comma-separated case name prefixes to run")
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="rocketq-bench-", dir=args.dir)
    scale = 0.2 if args.quick else 1.0
    try:
        disk = disk_bandwidth_mb_s(base, int(512 * scale) or 64)
        print(f"disk sequential write (1 MiB writes + fsync), same run: {disk:8.1f} MB/s")
        print(f"batch size: {args.batch} messages")
        print(
            f"{'case':30} {'msgs':>9} {'append msgs/s':>14} {'MB/s':>8} {'% disk':>7} "
            f"{'read@32 msgs/s':>15} {'read@1024 msgs/s':>17}"
        )
        a, s = FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH
        cases = [
            ("msgs", 100, 200_000, a, 1, False),
            ("cols", 100, 1_000_000, a, 1, True),
            ("wire", 100, 1_000_000, a, 1, False),
            ("msgs", 1024, 100_000, a, 1, False),
            ("cols", 1024, 600_000, a, 1, True),
            ("wire", 1024, 600_000, a, 1, False),
            ("wire", 100, 400_000, s, 4, False),
            ("wire", 1024, 300_000, s, 4, False),
        ]
        only = [o for o in args.only.split(",") if o]
        for api, size, count, flush, threads, read in cases:
            name = f"{api} {size}B {flush.value} x{threads}thr"
            if only and not any(name.startswith(o) for o in only):
                continue
            r = bench(
                os.path.join(base, "store"), api, size, int(count * scale), flush, args.batch, threads, read
            )
            reads = (
                f"{r['read32_msgs_s']:15,.0f} {r['read1024_msgs_s']:17,.0f}"
                if read
                else f"{'-':>15} {'-':>17}"
            )
            print(
                f"{name:30} {r['msgs']:9,.0f} {r['append_msgs_s']:14,.0f} {r['append_mb_s']:8.1f} "
                f"{100 * r['append_mb_s'] / disk:6.1f}% {reads}",
                flush=True,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
