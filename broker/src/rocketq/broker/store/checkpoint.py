"""StoreCheckpoint: the 4 KiB ``checkpoint`` file (RocketMQ's ``StoreCheckpoint``).

Layout (big-endian int64 fields)::

       0  physic_msg_timestamp    store time of the last flushed CommitLog record
       8  logics_msg_timestamp    store time of the last flushed ConsumeQueue unit
      16  index_msg_timestamp     store time of the last flushed index entry
      24  master_flushed_offset   (5.x)
      32  confirm_phy_offset      (5.x)
    2048  dispatched_phy_offset   rocketq: CommitLog offset below which ConsumeQueues and index
                                  files are flushed; recovery re-dispatches from here
    2056  rocketq_marker          0x52515344 ("RQSD") when the field above is valid

RocketMQ reads only the first 40 bytes, so the rocketq fields do not disturb a Java broker.
"""

from __future__ import annotations

import os
import struct

from rocketq.broker.store.mapped_file import MappedFile

CHECKPOINT_SIZE = 4096
_FIELDS = struct.Struct(">qqqqq")
_DISPATCH = struct.Struct(">qq")
DISPATCH_POS = 2048
RQ_MARKER = 0x52515344
assert _FIELDS.size == 40 and _DISPATCH.size == 16


class StoreCheckpoint:
    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        existed = os.path.exists(path)
        self._path = path
        self._mf = _open(path)
        fields: tuple[int, ...] = (0, 0, 0, 0, 0)
        dispatched = -1
        if existed:
            fields = tuple(int(v) for v in _FIELDS.unpack_from(self._mf.buffer, 0))
            offset, marker = _DISPATCH.unpack_from(self._mf.buffer, DISPATCH_POS)
            dispatched = int(offset) if marker == RQ_MARKER else -1
        self.physic_msg_timestamp: int = fields[0]
        self.logics_msg_timestamp: int = fields[1]
        self.index_msg_timestamp: int = fields[2]
        self.master_flushed_offset: int = fields[3]
        self.confirm_phy_offset: int = fields[4]
        self.dispatched_phy_offset: int = dispatched

    @property
    def min_timestamp(self) -> int:
        """As RocketMQ: min of the physic and logics timestamps, minus 3 s of safety."""
        return max(min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000, 0)

    def flush(self) -> None:
        # pwrite, not a store into the mapping: see index_file on write faults that hold the GIL
        self._mf.pwrite(
            0,
            _FIELDS.pack(
                self.physic_msg_timestamp,
                self.logics_msg_timestamp,
                self.index_msg_timestamp,
                self.master_flushed_offset,
                self.confirm_phy_offset,
            ),
        )
        self._mf.pwrite(
            DISPATCH_POS,
            _DISPATCH.pack(self.dispatched_phy_offset, RQ_MARKER if self.dispatched_phy_offset >= 0 else 0),
        )
        self._mf.wrote_position = CHECKPOINT_SIZE
        self._mf.flushed_position = 0
        self._mf.flush()

    def shutdown(self) -> None:
        self.flush()
        self._mf.close()


def _open(path: str) -> MappedFile:
    return MappedFile(path, CHECKPOINT_SIZE, preallocate=False, file_from_offset=0)
