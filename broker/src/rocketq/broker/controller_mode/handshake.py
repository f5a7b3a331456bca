"""The HA connection's opening in controller mode: who the slave is and which epoch it follows.

RocketMQ 4.x's HA protocol carries no identity, so a master cannot tell which SyncStateSet member
acknowledged an offset.  In controller mode the slave therefore sends, before its first offset
report, one fixed-size frame::

    +------------+----------------+-------------------+
    | magic 4 B  | brokerId int64 | masterEpoch int32 |     16 bytes, big-endian
    | "RQHA"     | the slave's id | the epoch it      |
    |            |                | follows           |
    +------------+----------------+-------------------+

The master refuses (closes) a connection whose magic is wrong or whose epoch is not its own: a
stale master never counts an ack from a slave that already follows a newer master, and a slave
never copies from a master of another epoch.  Sans-IO: bytes in, values out.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rocketq.broker.ha.protocol import HAProtocolError

__all__ = ["HANDSHAKE_SIZE", "Handshake", "decode_handshake", "encode_handshake"]

MAGIC = b"RQHA"
_HANDSHAKE = struct.Struct(">4sqi")
HANDSHAKE_SIZE = _HANDSHAKE.size
assert HANDSHAKE_SIZE == 16


@dataclass(frozen=True, slots=True)
class Handshake:
    broker_id: int
    master_epoch: int


def encode_handshake(broker_id: int, master_epoch: int) -> bytes:
    return _HANDSHAKE.pack(MAGIC, broker_id, master_epoch)


def decode_handshake(data: bytes) -> Handshake:
    """The handshake in ``data`` (exactly :data:`HANDSHAKE_SIZE` bytes)."""
    if len(data) != HANDSHAKE_SIZE:
        raise HAProtocolError(
            f"HA handshake: expected {HANDSHAKE_SIZE} bytes, got {len(data)}", position=0, found=data
        )
    magic, broker_id, epoch = _HANDSHAKE.unpack(data)
    if magic != MAGIC:
        raise HAProtocolError(
            "HA handshake: bad magic (a 4.x slave on a controller-mode master?)", position=0, found=data
        )
    if broker_id < 1 or epoch < 0:
        raise HAProtocolError(
            f"HA handshake: bad brokerId {broker_id} or masterEpoch {epoch}", position=0, found=data
        )
    return Handshake(broker_id=broker_id, master_epoch=epoch)
