"""RocketMQ's two message ids: the offset msgId (server side) and the UNIQ_KEY (client side).

Offset msgId ("offsetMsgId")::

    store IP (4 | 16 bytes) | store port: int32 | commit log offset: int64     -> upper-case hex

32 hex characters for IPv4, 56 for IPv6; decoding it yields the broker address and the CommitLog
offset that ``VIEW_MESSAGE_BY_ID`` needs.  Golden: 10.0.0.1:10911 at offset 0 is
``0A00000100002A9F0000000000000000``.

UNIQ_KEY (``MessageClientIDSetter``, what ``SendResult.msgId`` returns)::

    client IP (4 | 16) | pid: int16 | classloader hash: int32 | ms since month start: int32 | counter: int16

Theory of operation.  The first three fields are fixed per process and hex-encoded once; each id
appends the millisecond offset from the start of the current (local-time) month and a wrapping
16-bit counter.  The counter is an :func:`itertools.count`, whose ``next`` is atomic under the GIL,
so generators are safe to share between threads without importing ``threading``.  Java uses the
classloader's identity hash; a random int per process serves the same purpose.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import itertools
import os
import random
import struct
import time
from functools import lru_cache
from typing import Final

from rocketq.client.errors import MessageFormatError

_PORT_OFFSET: Final = struct.Struct(">iq")
_TIME_COUNTER: Final = struct.Struct(">IH")
_FIXED: Final = struct.Struct(">Hi")
assert _PORT_OFFSET.size == 12 and _TIME_COUNTER.size == 6 and _FIXED.size == 6


@lru_cache(maxsize=1024)
def ip_to_bytes(ip: str) -> bytes:
    """Pack a textual IPv4 (4 bytes) or IPv6 (16 bytes) address; raise MessageFormatError otherwise."""
    try:
        return ipaddress.ip_address(ip).packed
    except ValueError as exc:
        raise MessageFormatError(f"not an IP address: {ip!r}") from exc


@lru_cache(maxsize=1024)
def bytes_to_ip(data: bytes) -> str:
    """Unpack 4 or 16 address bytes to text (IPv6 in compressed form, e.g. ``::1``)."""
    if len(data) == 4:
        return f"{data[0]}.{data[1]}.{data[2]}.{data[3]}"
    if len(data) == 16:
        return str(ipaddress.IPv6Address(data))
    raise MessageFormatError(f"an IP address is 4 or 16 bytes, got {len(data)}: {data.hex()}")


def encode_offset_msg_id(host: str, port: int, offset: int) -> str:
    """Return the offset msgId of a record stored at ``offset`` by the broker at ``host:port``."""
    return (ip_to_bytes(host) + _PORT_OFFSET.pack(port, offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """Return ``(host, port, commit_log_offset)`` from an offset msgId."""
    if len(msg_id) not in (32, 56):
        raise MessageFormatError(
            f"an offset msgId has 32 or 56 hex characters, got {len(msg_id)}: {msg_id!r}"
        )
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise MessageFormatError(f"offset msgId is not hex: {msg_id!r}") from exc
    ip_len = len(raw) - _PORT_OFFSET.size
    port, offset = _PORT_OFFSET.unpack_from(raw, ip_len)
    return bytes_to_ip(raw[:ip_len]), port, offset


def _month_window(now_ms: int) -> tuple[int, int]:
    """Start of the current local-time month and of the next one, in ms since the epoch."""
    now = dt.datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


class UniqKeyGenerator:
    """Generates UNIQ_KEY client message ids; safe to share between threads."""

    def __init__(self, ip: str | None = None, *, pid: int | None = None, seed: int | None = None) -> None:
        rnd = random.Random(seed)
        ip_bytes = ip_to_bytes(ip) if ip is not None else bytes([10, *rnd.randbytes(3)])
        pid_value = (os.getpid() if pid is None else pid) & 0xFFFF
        self._prefix = (ip_bytes + _FIXED.pack(pid_value, rnd.getrandbits(31))).hex().upper()
        self._counter = itertools.count()
        self._start_ms, self._next_start_ms = _month_window(int(time.time() * 1000))

    @property
    def prefix(self) -> str:
        """The per-process fixed part (IP, pid, classloader hash) in hex."""
        return self._prefix

    def _diff(self, now_ms: int | None) -> int:
        current = int(time.time() * 1000) if now_ms is None else now_ms
        if current >= self._next_start_ms or current < self._start_ms - 1000:
            # A benign race: two threads crossing the month boundary compute the same window.
            self._start_ms, self._next_start_ms = _month_window(current)
        # Java stores (int) diff: after 24.8 days it wraps negative; the unsigned read-back is right.
        return max(current - self._start_ms, 0) & 0xFFFFFFFF

    def next_id(self, now_ms: int | None = None) -> str:
        """Return a new UNIQ_KEY (32 hex characters for an IPv4 client)."""
        diff = self._diff(now_ms)
        count = next(self._counter) & 0xFFFF
        return self._prefix + _TIME_COUNTER.pack(diff, count).hex().upper()

    def next_id_block(self, n: int, now_ms: int | None = None) -> tuple[str, list[int]]:
        """``n`` new UNIQ_KEYs as a head and counters: id ``i`` is ``head`` followed by
        ``counters[i] & 0xFFFF`` as 4 upper-case hex digits, the ids that :meth:`next_ids` would
        return.  The counters are taken from the shared counter in one C-level call, for a caller
        that formats them in bulk (the producer's fixed-size batches)."""
        head = f"{self._prefix}{self._diff(now_ms):08X}"
        return head, list(itertools.islice(self._counter, n))

    def next_ids(self, n: int, now_ms: int | None = None) -> list[str]:
        """``n`` new UNIQ_KEYs at once: the same ids as ``n`` calls of :meth:`next_id` in the same
        millisecond (the hex of the time part computed once, the counter formatted per id)."""
        head = f"{self._prefix}{self._diff(now_ms):08X}"
        counter = self._counter
        return [f"{head}{next(counter) & 0xFFFF:04X}" for _ in range(n)]


_DEFAULT: UniqKeyGenerator | None = None


def new_uniq_key() -> str:
    """A UNIQ_KEY from a lazily created process-wide generator (random private IP)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = UniqKeyGenerator()
    return _DEFAULT.next_id()


def uniq_key_prefix(uniq_key: str) -> str:
    """The per-process part of a UNIQ_KEY (client IP, pid, classloader hash): what every id of
    one process shares (:attr:`UniqKeyGenerator.prefix`)."""
    return uniq_key[: -2 * _TIME_COUNTER.size]


def prefix_pid(prefix: str) -> int:
    """The pid field of a UNIQ_KEY's per-process part (:func:`uniq_key_prefix`): the low 16 bits
    of the sending process's pid."""
    return int(_FIXED.unpack(bytes.fromhex(prefix[-2 * _FIXED.size :]))[0])


def uniq_key_timestamp_ms(uniq_key: str, now_ms: int | None = None) -> int:
    """Approximate creation time (ms since the epoch) of a UNIQ_KEY, as ``getNearlyTimeFromID``.

    The id only holds the offset from the start of *a* month: this assumes the current month, or
    the previous one if that would put the id in the future.
    """
    if len(uniq_key) not in (32, 56):
        raise MessageFormatError(f"a UNIQ_KEY has 32 or 56 hex characters, got {len(uniq_key)}: {uniq_key!r}")
    try:
        raw = bytes.fromhex(uniq_key)
    except ValueError as exc:
        raise MessageFormatError(f"UNIQ_KEY is not hex: {uniq_key!r}") from exc
    ip_len = 16 if len(raw) == 28 else 4
    span_ms = int.from_bytes(raw[ip_len + 6 : ip_len + 10], "big")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    start, _ = _month_window(now)
    if start + span_ms >= now:
        start, _ = _month_window(start - 1)
    return start + span_ms
