"""Storage engine benchmark: append (with dispatch), flush modes and reads through the ConsumeQueue.

Not a test.  Prints msgs/s and MB/s for 100-byte and 1 KiB messages with ASYNC_FLUSH and SYNC_FLUSH,
next to the disk's sequential write bandwidth measured in the same run (1 MiB writes + fsync) so the
figures can be compared on any machine.

    .venv/bin/python benchmarks/store_bench.py [--dir /path/on/the/disk] [--quick]

Appends are timed from the first ``put_messages`` until every message is dispatched (ConsumeQueue
and IndexFile built), with messages built before the clock starts (the broker builds them from
the request).  Reads pull every queue from offset 0 to the end with ``get_message`` and touch each
returned record's TOTALSIZE, the way a pull response is assembled.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence

from rocketq.broker.store.config import FlushDiskType, StoreConfig
from rocketq.broker.store.message_store import MessageStore, MessageToStore
from rocketq.broker.store.status import GetMessageStatus

HOST = ("127.0.0.1", 10911)
QUEUES = 4


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


def codec_ceiling_msgs_s(size: int, count: int = 50_000) -> float:
    """Records/s of the client's record encoder alone: the floor of the append cost per message."""
    from rocketq.client.remoting.message import encode_stored_message

    body = os.urandom(size)
    props = b"TAGS\x01TagA\x02KEYS\x01k1\x02UNIQ_KEY\x017F000001000000000000000000000001\x02"
    start = time.perf_counter()
    for _ in range(count):
        encode_stored_message(topic="BenchTopic", queue_id=0, body=body, properties=props, born_timestamp=1,
                              born_host=HOST, store_host=HOST)
    return count / (time.perf_counter() - start)


def build_batches(count: int, size: int, batch: int) -> list[list[MessageToStore]]:
    body = os.urandom(size)
    out = []
    for b in range(count // batch):
        q = b % QUEUES
        out.append([MessageToStore(topic="BenchTopic", queue_id=q, body=body,
                                   properties={"TAGS": "TagA", "KEYS": f"k{b * batch + i}",
                                               "UNIQ_KEY": f"7F000001{b * batch + i:024X}"},
                                   born_timestamp=1, born_host=HOST, store_host=HOST) for i in range(batch)])
    return out


def run_appends(store: MessageStore, batches: Sequence[Sequence[MessageToStore]], threads: int) -> float:
    parts = [batches[i::threads] for i in range(threads)]

    def worker(part: Sequence[Sequence[MessageToStore]]) -> None:
        for b in part:
            r = store.put_messages(b)
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
            g = store.get_message("bench", "BenchTopic", q, offset, max_msgs, max_bytes)
            if g.status is not GetMessageStatus.FOUND:
                break
            for buf in g.buffers:
                _ = buf[0]
            n += g.msg_count
            offset = g.next_begin_offset
    return n, time.perf_counter() - start


def bench(root: str, size: int, count: int, flush: FlushDiskType, batch: int, threads: int,
          read: bool) -> dict[str, float]:
    shutil.rmtree(root, ignore_errors=True)
    cfg = StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log_bytes=512 << 20,
                      flush_disk_type=flush)
    batches = build_batches(count, size, batch)
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
            res["read_mb_s"] = stored_bytes / t / 1e6
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="directory on the disk to measure (default: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="smaller counts")
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="rocketq-bench-", dir=args.dir)
    scale = 0.2 if args.quick else 1.0
    try:
        disk = disk_bandwidth_mb_s(base, int(512 * scale) or 64)
        print(f"disk sequential write (1 MiB writes + fsync): {disk:8.1f} MB/s")
        print(f"record codec alone (encode_stored_message, 100 B): {codec_ceiling_msgs_s(100):10,.0f} records/s")
        print(f"{'case':28} {'msgs':>8} {'append msgs/s':>14} {'MB/s':>8} {'% disk':>7} "
              f"{'read@32 msgs/s':>15} {'read@1024 msgs/s':>17}")
        cases = [(100, int(300_000 * scale), FlushDiskType.ASYNC_FLUSH, 1, True),
                 (1024, int(200_000 * scale), FlushDiskType.ASYNC_FLUSH, 1, True),
                 (100, int(100_000 * scale), FlushDiskType.SYNC_FLUSH, 4, False),
                 (1024, int(100_000 * scale), FlushDiskType.SYNC_FLUSH, 4, False)]
        for size, count, flush, threads, read in cases:
            r = bench(os.path.join(base, "store"), size, count, flush, args.batch, threads, read)
            name = f"{size}B {flush.value} x{threads}thr"
            reads = (f"{r['read32_msgs_s']:15,.0f} {r['read1024_msgs_s']:17,.0f}" if read else f"{'-':>15} {'-':>17}")
            print(f"{name:28} {r['msgs']:8,.0f} {r['append_msgs_s']:14,.0f} {r['append_mb_s']:8.1f} "
                  f"{100 * r['append_mb_s'] / disk:6.1f}% {reads}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
