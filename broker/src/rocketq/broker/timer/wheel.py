"""TimerWheel: the ``timerwheel`` file, one 32-byte slot per precision step (layout in :mod:`.layout`).

A slot names the first and last timer-log record of its time and how many messages it holds;
the records chain backwards from ``last_pos`` through their ``prev_pos``.  The file is mapped
shared and written in place, so a killed process loses nothing that was written; ``flush()``
makes it durable.  A slot whose stored time is not the time asked for (the wheel wrapped
around, or nothing was ever written there) reads as empty, as RocketMQ's ``getSlot``.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass

from rocketq.broker.store.errors import StoreConfigError
from rocketq.broker.timer.layout import SLOT, SLOT_SIZE

__all__ = ["IGNORE", "Slot", "TimerWheel"]

#: ``TimerWheel.IGNORE``: leave this position of the slot as it is
IGNORE = -2


@dataclass(frozen=True, slots=True)
class Slot:
    """One slot; ``time_ms == -1`` (and positions ``-1``) when the slot holds nothing for that time."""

    time_ms: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0


EMPTY_SLOT = Slot(-1, -1, -1)


class TimerWheel:
    """The mapped wheel file of ``slots_total * 2`` slots."""

    def __init__(self, path: str, slots_total: int, precision_ms: int) -> None:
        self.path = path
        self.slots_total = slots_total
        self.precision_ms = precision_ms
        self.wheel_length = slots_total * 2 * SLOT_SIZE
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size not in (0, self.wheel_length):
                raise StoreConfigError(
                    f"timer wheel {path} is {size} bytes, expected {self.wheel_length} "
                    f"({slots_total} slots * 2 * {SLOT_SIZE}); it was written with another slot count"
                )
            if size == 0:
                os.ftruncate(fd, self.wheel_length)
            self._mm = mmap.mmap(fd, self.wheel_length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)

    def slot_index(self, time_ms: int) -> int:
        return time_ms // self.precision_ms % (self.slots_total * 2)

    def raw_slot(self, time_ms: int) -> Slot:
        """The slot where ``time_ms`` falls, whatever time it holds (its stored time in ms)."""
        t, first, last, num, magic = SLOT.unpack_from(self._mm, self.slot_index(time_ms) * SLOT_SIZE)
        return Slot(t * self.precision_ms, first, last, num, magic)

    def get_slot(self, time_ms: int) -> Slot:
        """The slot of ``time_ms``, or :data:`EMPTY_SLOT` if it holds another time or nothing."""
        slot = self.raw_slot(time_ms)
        if slot.time_ms != time_ms // self.precision_ms * self.precision_ms:
            return EMPTY_SLOT
        return slot

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int = 0, magic: int = 0) -> None:
        # The stored time is time/precision (RocketMQ's versions with 1000 ms precision wrote seconds).
        SLOT.pack_into(
            self._mm,
            self.slot_index(time_ms) * SLOT_SIZE,
            time_ms // self.precision_ms,
            first_pos,
            last_pos,
            num,
            magic,
        )

    def revise_slot(self, time_ms: int, first_pos: int, last_pos: int, *, force: bool) -> None:
        """Recovery: set a slot's positions (:data:`IGNORE` keeps one); a slot holding another time
        is overwritten only with ``force``."""
        slot = self.raw_slot(time_ms)
        if slot.time_ms // self.precision_ms != time_ms // self.precision_ms:
            if force:
                self.put_slot(time_ms, first_pos if first_pos != IGNORE else last_pos, last_pos)
            return
        self.put_slot(
            time_ms,
            slot.first_pos if first_pos == IGNORE else first_pos,
            slot.last_pos if last_pos == IGNORE else last_pos,
            slot.num,
            slot.magic,
        )

    def flush(self) -> None:
        self._mm.flush()

    def close(self) -> None:
        self._mm.close()
