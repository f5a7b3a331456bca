"""Sans-IO codec of Apache RocketMQ 4.x's HA protocol (``HAConnection`` / ``HAClient``), byte for byte.

The HA port speaks no remoting frames: two raw byte streams on one TCP connection.

Slave -> master, an offset report (the slave's CommitLog max offset, i.e. everything below it is
stored), sent at connect, after each append and at least every ``haSendHeartbeatInterval``::

    0        8
    +--------+
    | offset |   int64, big-endian
    +--------+

Master -> slave, a transfer: ``size`` bytes of CommitLog data that start at CommitLog offset
``phy_offset``; ``size == 0`` is the master's heartbeat (its ``phy_offset`` is the next offset it
will send)::

    0            8        12
    +------------+--------+----------------+
    | phy_offset |  size  |  size bytes .. |
    +------------+--------+----------------+
      int64        int32

Controller mode only (after the slave's handshake, :mod:`rocketq.broker.controller_mode.handshake`,
which no 4.x peer sends or accepts), the master also sends *confirm frames*: a transfer header whose
``phy_offset`` is -1 and whose size is 8, followed by the master's confirm offset (int64, the
lowest CommitLog offset every SyncStateSet member holds).  A slave serves reads only up to the last
confirm offset it was told, so that no consumer reads a tail an election may truncate::

    0            8        12          20
    +------------+--------+-----------+
    |     -1     |   8    |  confirm  |
    +------------+--------+-----------+

Theory of operation.  :class:`ReportDecoder` (master side) and :class:`TransferDecoder` (slave
side) are fed whatever the socket delivered and return complete messages.  They enforce what a
well-behaved peer never violates and raise :class:`HAProtocolError` (with the stream position
and the offending bytes) otherwise: negative offsets, a report below the previous one on the
same connection, negative sizes or sizes above the cap, and transfers that do not continue the
previous transfer.  Whether the *first* transfer fits the slave's log is the slave's decision
(:mod:`.slave`), because a transfer below the slave's end is the documented divergent-tail case,
not garbage.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from rocketq.broker.errors import BrokerError

__all__ = [
    "CONFIRM_MARK",
    "OFFSET_REPORT",
    "TRANSFER_HEADER",
    "HAProtocolError",
    "ReportDecoder",
    "Transfer",
    "TransferDecoder",
    "encode_confirm",
    "encode_report",
    "encode_transfer_header",
    "max_transfer_size",
]

OFFSET_REPORT: Final = struct.Struct(">q")
TRANSFER_HEADER: Final = struct.Struct(">qi")
assert OFFSET_REPORT.size == 8
assert TRANSFER_HEADER.size == 12

#: A transfer bigger than this is garbage whatever the configured batch size: a 4.x master sends at
#: most ``haTransferBatchSize`` (32 KiB) per transfer.
HARD_MAX_TRANSFER_SIZE: Final = 64 * 1024 * 1024
#: The ``phy_offset`` of a controller-mode confirm frame (no transfer has a negative offset).
CONFIRM_MARK: Final = -1
_CONFIRM_VALUE: Final = struct.Struct(">q")
#: Slack over the configured batch size a peer may use (another implementation's rounding).
_BATCH_SLACK: Final = 4


def max_transfer_size(batch_size: int) -> int:
    """The largest transfer a slave accepts from a master configured with ``batch_size``."""
    return min(max(batch_size, 1) * _BATCH_SLACK, HARD_MAX_TRANSFER_SIZE)


class HAProtocolError(BrokerError):
    """The peer broke the HA protocol; the connection must be closed (nothing is appended)."""

    def __init__(self, message: str, *, position: int, found: bytes = b"") -> None:
        detail = f" (bytes {found.hex()})" if found else ""
        super().__init__(f"{message} at stream position {position}{detail}")
        self.position = position
        self.found = found


def encode_report(offset: int) -> bytes:
    """The 8 bytes a slave sends to report its CommitLog max offset."""
    if offset < 0:
        raise ValueError(f"an HA offset report must be >= 0, got {offset}")
    return OFFSET_REPORT.pack(offset)


def encode_transfer_header(phy_offset: int, size: int) -> bytes:
    """The 12-byte header of a transfer of ``size`` bytes from ``phy_offset`` (size 0: heartbeat)."""
    if phy_offset < 0 or not 0 <= size <= HARD_MAX_TRANSFER_SIZE:
        raise ValueError(f"bad HA transfer header: offset {phy_offset}, size {size}")
    return TRANSFER_HEADER.pack(phy_offset, size)


def encode_confirm(confirm_offset: int) -> bytes:
    """A controller-mode confirm frame: the master's confirm offset, 20 bytes."""
    if confirm_offset < 0:
        raise ValueError(f"a confirm offset must be >= 0, got {confirm_offset}")
    return TRANSFER_HEADER.pack(CONFIRM_MARK, _CONFIRM_VALUE.size) + _CONFIRM_VALUE.pack(confirm_offset)


class ReportDecoder:
    """Master side: turns the slave's byte stream into its offset reports."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._position = 0  # stream position of _buf[0]
        self.last: int = -1

    def feed(self, data: bytes | bytearray | memoryview) -> list[int]:
        """Reports completed by ``data``, in order; raises :class:`HAProtocolError` on garbage."""
        self._buf += data
        out: list[int] = []
        usable = len(self._buf) - len(self._buf) % OFFSET_REPORT.size
        for pos in range(0, usable, OFFSET_REPORT.size):
            (offset,) = OFFSET_REPORT.unpack_from(self._buf, pos)
            where = self._position + pos
            if offset < 0:
                raise HAProtocolError(
                    f"negative offset report {offset}", position=where, found=bytes(self._buf[pos : pos + 8])
                )
            if offset < self.last:
                raise HAProtocolError(
                    f"offset report {offset} below the previous report {self.last}",
                    position=where,
                    found=bytes(self._buf[pos : pos + 8]),
                )
            self.last = offset
            out.append(offset)
        del self._buf[:usable]
        self._position += usable
        return out

    @property
    def pending(self) -> int:
        """Bytes of an incomplete report held back."""
        return len(self._buf)


@dataclass(frozen=True, slots=True)
class Transfer:
    """One master -> slave message: ``data`` belongs at CommitLog offset ``phy_offset``."""

    phy_offset: int
    data: bytes | memoryview  # a view of the read it came in, when nothing was held back

    @property
    def is_heartbeat(self) -> bool:
        return not self.data

    @property
    def end(self) -> int:
        return self.phy_offset + len(self.data)


class TransferDecoder:
    """Slave side: turns the master's byte stream into transfers, checking their continuity."""

    def __init__(self, *, max_size: int, confirm_frames: bool = False) -> None:
        if not 0 < max_size <= HARD_MAX_TRANSFER_SIZE:
            raise ValueError(f"max_size must be 1..{HARD_MAX_TRANSFER_SIZE}, got {max_size}")
        self.max_size = max_size
        self.confirm_frames = confirm_frames  # controller mode: accept confirm frames
        #: the highest confirm offset the master sent (-1: none yet)
        self.confirm_offset: int = -1
        self._buf = bytearray()
        self._position = 0
        self._header: tuple[int, int] | None = None
        self.next_offset: int = -1  # where the next transfer must start (-1: not known yet)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Transfer]:
        """Transfers completed by ``data``, in order; raises :class:`HAProtocolError` on garbage.

        With nothing held back from earlier reads (the usual case: the master writes whole
        transfers) the transfers are zero-copy views of ``data``; only an incomplete tail is
        kept (copied) for the next read.
        """
        buf: bytes | bytearray = self._buf
        direct = not buf and isinstance(data, bytes)
        view: memoryview | None = None
        if isinstance(data, bytes) and direct:
            buf, view = data, memoryview(data)
        else:
            self._buf += data
        out: list[Transfer] = []
        pos = 0
        while True:
            if self._header is None:
                if len(buf) - pos < TRANSFER_HEADER.size:
                    break
                self._header = self._check_header(buf, pos)
                pos += TRANSFER_HEADER.size
            phy_offset, size = self._header
            if len(buf) - pos < size:
                break
            if phy_offset == CONFIRM_MARK:
                (confirm,) = _CONFIRM_VALUE.unpack_from(buf, pos)
                if confirm < 0:
                    raise HAProtocolError(
                        f"negative confirm offset {confirm}",
                        position=self._position + pos,
                        found=bytes(buf[pos : pos + size]),
                    )
                self.confirm_offset = max(self.confirm_offset, confirm)
                pos += size
                self._header = None
                continue
            part = view[pos : pos + size] if view is not None else bytes(buf[pos : pos + size])
            out.append(Transfer(phy_offset, part))
            pos += size
            self._header = None
            self.next_offset = phy_offset + size
        if direct:
            self._buf += memoryview(buf)[pos:]
        else:
            del self._buf[:pos]
        self._position += pos
        return out

    def _check_header(self, buf: bytes | bytearray, pos: int) -> tuple[int, int]:
        phy_offset, size = TRANSFER_HEADER.unpack_from(buf, pos)
        where = self._position + pos
        raw = bytes(buf[pos : pos + TRANSFER_HEADER.size])
        if phy_offset == CONFIRM_MARK and self.confirm_frames:
            if size != _CONFIRM_VALUE.size:
                raise HAProtocolError(
                    f"confirm frame of {size} bytes (expected {_CONFIRM_VALUE.size})",
                    position=where,
                    found=raw,
                )
            return phy_offset, size
        if phy_offset < 0:
            raise HAProtocolError(f"negative transfer offset {phy_offset}", position=where, found=raw)
        if not 0 <= size <= self.max_size:
            raise HAProtocolError(
                f"transfer size {size} outside 0..{self.max_size}", position=where, found=raw
            )
        if self.next_offset >= 0 and phy_offset != self.next_offset:
            raise HAProtocolError(
                f"transfer at offset {phy_offset} does not continue the previous one, "
                f"which ended at {self.next_offset}",
                position=where,
                found=raw,
            )
        return phy_offset, size

    @property
    def pending(self) -> int:
        """Bytes received but not yet part of a complete transfer."""
        return len(self._buf) + (TRANSFER_HEADER.size if self._header is not None else 0)
