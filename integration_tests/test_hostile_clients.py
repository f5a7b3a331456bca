"""Hostile clients against a real broker process: memory stays bounded, every request is settled.

The broker's resident memory is read from ``/proc/<pid>/status`` (VmRSS).  The bounds are the ones
documented in docs/security.md ("Hostile clients and memory limits"):

* 8 connections pipelining 10 000 pulls each and never reading: RSS under 512 MB, and a normal
  client's send and pull still succeed meanwhile;
* a flood of unknown request codes without reading reaches a plateau: it runs
  ``ROCKETQ_HOSTILE_FLOOD_S`` seconds (default 20 here; the issue's 60 s run is
  ``ROCKETQ_HOSTILE_FLOOD_S=60``); RSS grows by at most 4 connections x the 4 MiB high-water mark
  plus slack (under 80 MB in all) and by under 32 MB over the flood's second half (the unbounded
  transport grew 4-7 MB/s, 80-140 MB in 20 s);
* 200 connections each stalled halfway through a 16 MiB frame: the bytes held stay under the
  total cap (``serverMaxPendingFrameBytesTotal``, 256 MiB by default) plus a margin;
* after every hostile connection is closed, RSS is back within 100 MB of the start;
* every malformed header gets an answer or a close.  The issue asks for "within 1 s"; the test
  allows 5 s per case (a loaded CI machine), no timing is asserted beyond that bound.

Hostile sockets write from daemon threads with blocking ``sendall``: once the broker stops reading
(back-pressure), the kernel buffers fill and the writer blocks, exactly as it would on a network.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.remoting.codes import RequestCode as RC
from rocketq.client.remoting.codes import ResponseCode as R
from rocketq.client.remoting.command import RemotingCommand, decode_command, encode_command
from rocketq.client.remoting.frame import FrameDecoder
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.testing import ServerProcess, pull_header, send_header, spawn_broker, spawn_namesrv
from rocketq.client.transport.blocking import BlockingRemotingClient

MB = 1024 * 1024
TOPIC = "HostileT"
FLOOD_S = float(os.environ.get("ROCKETQ_HOSTILE_FLOOD_S", "20"))
CASE_BOUND_S = 5.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("hostile")
    namesrv = spawn_namesrv(tmp / "namesrv")
    try:
        proc = spawn_broker(
            tmp,
            namesrv.addr,
            mappedFileSizeCommitLog=64 * MB,
            mappedFileSizeConsumeQueue=20 * 10_000,
            maxHashSlotNum=1000,
            maxIndexNum=4000,
        )
        try:
            yield proc
        finally:
            proc.terminate()
            print(f"--- broker log tail ---\n{proc.log_tail(60)}")
    finally:
        namesrv.terminate()


@pytest.fixture(scope="module")
def client() -> Iterator[BlockingRemotingClient]:
    c = BlockingRemotingClient()
    yield c
    c.close()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def send(client: BlockingRemotingClient, addr: str, body: bytes) -> RemotingCommand:
    h = send_header(TOPIC, default_topic_queue_nums=1)
    return client.invoke(addr, RemotingCommand.request(RC.SEND_MESSAGE_V2, h.to_ext_fields(), body), 10_000)


def pull_request(offset: int = 0) -> RemotingCommand:
    # the subscription travels with the request (PullSysFlag.SUBSCRIPTION)
    h = pull_header(TOPIC, 0, offset, group="cg", max_msg_nums=32, expression_type=None)
    return RemotingCommand.request(RC.PULL_MESSAGE, h.to_ext_fields())


def normal_client_works(client: BlockingRemotingClient, addr: str) -> None:
    r = send(client, addr, b"normal")
    assert r.code == R.SUCCESS, r
    r = client.invoke(addr, pull_request(), 10_000)
    assert r.code == R.SUCCESS and len(list(iter_stored_messages(r.body))) > 0, r


class Hostile:
    """Sockets that write a payload from daemon threads and never read."""

    def __init__(self, addr: str) -> None:
        self.host, port = addr.rsplit(":", 1)
        self.port = int(port)
        self.socks: list[socket.socket] = []
        self.sent = 0
        self._lock = threading.Lock()

    def connect(self, n: int) -> None:
        for _ in range(n):
            s = socket.create_connection((self.host, self.port), timeout=10)
            s.settimeout(None)
            self.socks.append(s)

    def write_forever(self, payload: bytes, repeat: int | None = None) -> None:
        def writer(s: socket.socket) -> None:
            count = 0
            try:
                view = memoryview(payload)
                while repeat is None or count < repeat:
                    for i in range(0, len(payload), 256 * 1024):  # progress visible per 256 KiB
                        s.sendall(view[i : i + 256 * 1024])
                        with self._lock:
                            self.sent += len(view[i : i + 256 * 1024])
                    count += 1
            except OSError:
                pass  # closed by us or by the broker

        for s in self.socks:
            threading.Thread(target=writer, args=(s,), daemon=True).start()

    def close(self) -> None:
        for s in self.socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.socks.clear()


def settle_rss(pid: int, baseline: float, limit_s: float = 20.0) -> float:
    """RSS after the broker had time to free what it held (bounded wait)."""
    now = rss_mb(pid)
    for _ in range(int(limit_s / 0.5)):
        now = rss_mb(pid)
        if now <= baseline + 100:
            break
        time.sleep(0.5)
    return now


def test_pipelined_pulls_without_reading(broker: ServerProcess, client: BlockingRemotingClient) -> None:
    for i in range(64):
        assert send(client, broker.addr, b"m%04d" % i + b"x" * 1000).code == R.SUCCESS
    normal_client_works(client, broker.addr)
    start = rss_mb(broker.pid)
    hostile = Hostile(broker.addr)
    hostile.connect(8)
    one_conn = encode_command(pull_request()) * 10_000  # 10 000 pulls of 32 x 1 KB messages each
    hostile.write_forever(one_conn, repeat=1)
    peak = start
    try:
        for _ in range(20):  # 10 s under load
            time.sleep(0.5)
            peak = max(peak, rss_mb(broker.pid))
        normal_client_works(client, broker.addr)
        peak = max(peak, rss_mb(broker.pid))
    finally:
        hostile.close()
    assert peak < 512, f"broker RSS {peak:.0f} MB (start {start:.0f} MB) under 8 x 10 000 unread pulls"
    after = settle_rss(broker.pid, start)
    print(f"pipelined pulls: RSS start {start:.0f} MB, peak {peak:.0f} MB, after close {after:.0f} MB")
    assert after <= start + 100, f"RSS {after:.0f} MB after close, start {start:.0f} MB"
    normal_client_works(client, broker.addr)


def test_unknown_code_flood_reaches_a_plateau(broker: ServerProcess, client: BlockingRemotingClient) -> None:
    start = rss_mb(broker.pid)
    hostile = Hostile(broker.addr)
    hostile.connect(4)
    flood = b"".join(encode_command(RemotingCommand(code=29_999, opaque=i)) for i in range(1, 2001))
    hostile.write_forever(flood)
    samples: list[float] = []
    try:
        deadline = time.monotonic() + FLOOD_S
        while time.monotonic() < deadline:
            time.sleep(0.5)
            samples.append(rss_mb(broker.pid))
        normal_client_works(client, broker.addr)
    finally:
        hostile.close()
    half = samples[len(samples) // 2 :]
    growth = max(half) - half[0]
    assert growth < 32, f"RSS still growing in the second half of the flood: {half}"
    assert max(samples) < start + 80, f"flood RSS {max(samples):.0f} MB, start {start:.0f} MB"
    after = settle_rss(broker.pid, start)
    print(f"unknown-code flood: RSS start {start:.0f} MB, samples {samples}, after close {after:.0f} MB")
    assert after <= start + 100, f"RSS {after:.0f} MB after close, start {start:.0f} MB"


def test_stalled_half_frames_stay_under_the_total_cap(
    broker: ServerProcess, client: BlockingRemotingClient
) -> None:
    start = rss_mb(broker.pid)
    hostile = Hostile(broker.addr)
    hostile.connect(200)
    header = b"{}"
    half = struct.pack(">ii", 16 * MB - 8, len(header)) + header + b"z" * (8 * MB)  # half a 16 MiB frame
    hostile.write_forever(half, repeat=1)
    peak = start
    try:
        last, still = (-1, 0.0), 0
        for _ in range(120):  # until writers and broker are both quiet for 1.5 s (bounded: 60 s)
            time.sleep(0.5)
            rss = rss_mb(broker.pid)
            peak = max(peak, rss)
            with hostile._lock:
                sent = hostile.sent
            still = still + 1 if sent == last[0] and abs(rss - last[1]) < 2 else 0
            if still >= 3:
                break
            last = (sent, rss)
        normal_client_works(client, broker.addr)
        peak = max(peak, rss_mb(broker.pid))
    finally:
        hostile.close()
    # 200 x 8 MiB = 1.6 GB would be held without the cap; 256 MiB cap + allocator slack + margin
    assert peak < start + 256 * 1.25 + 100, f"RSS {peak:.0f} MB, start {start:.0f} MB"
    after = settle_rss(broker.pid, start)
    print(f"stalled half frames: RSS start {start:.0f} MB, peak {peak:.0f} MB, after close {after:.0f} MB")
    assert after <= start + 100, f"RSS {after:.0f} MB after close, start {start:.0f} MB"


def _frame(raw: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(raw), len(raw)) + raw


MALFORMED = {
    "opaque 2^70": (_frame(b'{"code":10,"opaque":1180591620717411303424}'), None),
    "opaque not a number": (_frame(b'{"code":10,"opaque":"x"}'), None),
    "code 2^70": (_frame(b'{"code":1180591620717411303424,"opaque":5}'), 5),
    "code a float": (_frame(b'{"code":1e300,"opaque":6}'), 6),
    "version a string": (_frame(b'{"code":10,"opaque":7,"version":"four"}'), 7),
    "flag 2^40": (_frame(b'{"code":10,"opaque":8,"flag":1099511627776}'), 8),
    "extFields a list": (_frame(b'{"code":10,"opaque":9,"extFields":[1,2]}'), 9),
    "100 000 nested [": (_frame(b"[" * 100_000), None),
    "nested code": (_frame(b'{"opaque":3,"code":' + b"[" * 100_000 + b"}"), None),
    "not UTF-8": (_frame(b'{"code":10,"opaque":\xff}'), None),
    "header not an object": (_frame(b"[1,2,3]"), None),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_header_is_answered_or_closed(
    broker: ServerProcess, client: BlockingRemotingClient, case: str
) -> None:
    frame, opaque = MALFORMED[case]
    host, port = broker.addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=CASE_BOUND_S) as s:
        s.sendall(frame)
        decoder = FrameDecoder()
        answers: list[RemotingCommand] = []
        closed = False
        try:
            while not answers:
                data = s.recv(65536)
                if not data:
                    closed = True
                    break
                answers += [decode_command(p) for p in decoder.feed(data)]
        except TimeoutError:
            pytest.fail(f"{case}: neither answered nor closed within {CASE_BOUND_S} s")
        except ConnectionResetError:
            closed = True
    if opaque is None:
        assert closed or answers, case
        if answers:
            assert answers[0].code == R.SYSTEM_ERROR
    else:
        assert answers, f"{case}: closed instead of answering"
        assert answers[0].opaque == opaque and answers[0].code == R.SYSTEM_ERROR and answers[0].remark
    normal_client_works(client, broker.addr)


def test_response_to_a_malformed_header_names_the_field(broker: ServerProcess) -> None:
    host, port = broker.addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=CASE_BOUND_S) as s:
        s.sendall(_frame(json.dumps({"code": 1 << 70, "opaque": 42}).encode()))
        decoder = FrameDecoder()
        frames: list[memoryview] = []
        while not frames:
            frames = decoder.feed(s.recv(65536))
        answer = decode_command(frames[0])
    assert answer.opaque == 42 and "code" in (answer.remark or "") and "int32" in (answer.remark or "")
