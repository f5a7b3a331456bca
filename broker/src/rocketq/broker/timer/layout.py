"""The binary layouts of the timer files: ``timerwheel`` slots, ``timerlog/`` records, ``config/timercheck``.

All three are big-endian, as RocketMQ's ``TimerWheel``, ``Slot``, ``TimerLog`` and
``TimerCheckpoint`` write them, so a RocketMQ 5 store directory and a rocketq one read the same.

``timerwheel``: one file of ``slots_total * 2`` slots of 32 bytes; the slot of a time is
``time_ms // precision_ms % (slots_total * 2)``::

    0        8         16        24    28      32
    | time / precision | first_pos | last_pos | num | magic |
      long               long        long      int   int (unused)

``timerlog/``: segments of ``mappedFileSizeTimerLog`` bytes (20-digit names) holding 52-byte records;
``prev_pos`` chains a slot's records backwards (``-1`` ends the chain), the delayed time is
``curr_write_time_ms + delay_delta``::

    0      4          12      16            24      28          36        40      44         52
    | size | prev_pos | magic | write_time_ms | delta | offset_py | size_py | t_hash | reserved |
      int    long       int     long            int     long        int       int      long

(``write_time_ms``: the write time when the record was made; ``t_hash``: the Java hash of the real topic)

A segment whose tail cannot hold a record and a blank ends with a 16-byte blank record::

    0           4     12
    | remaining | 0   | BLANK_MAGIC_CODE |
      int         long  int

``config/timercheck``: one 4096-byte page; longs at 0 last_read_time_ms, 8 last_timer_log_flush_pos,
16 last_timer_queue_offset, 24 master_timer_queue_offset, 32/40/48 the data version (state
version, timestamp, counter).
"""

from __future__ import annotations

import enum
import struct
from typing import Final

from rocketq.client.remoting.record_layout import BLANK_MAGIC

__all__ = [
    "BLANK",
    "BLANK_MAGIC_CODE",
    "CHECKPOINT",
    "CHECKPOINT_FILE_SIZE",
    "MAGIC_DEFAULT",
    "MAGIC_DELETE",
    "MAGIC_ROLL",
    "MIN_BLANK_LEN",
    "RECORD",
    "RECORD_SIZE",
    "SLOT",
    "SLOT_SIZE",
    "TIMER_WHEEL_TTL_DAY",
    "WHEEL_SLOTS_TOTAL",
    "TimerMagic",
    "is_magic_ok",
]

#: ``TimerMessageStore.TIMER_WHEEL_TTL_DAY``: the wheel has ``7 * 86400`` slots (times two).
TIMER_WHEEL_TTL_DAY: Final = 7
WHEEL_SLOTS_TOTAL: Final = TIMER_WHEEL_TTL_DAY * 86_400

SLOT: Final = struct.Struct(">qqqii")
SLOT_SIZE: Final = 32
assert SLOT.size == SLOT_SIZE

RECORD: Final = struct.Struct(">iqiqiqiiq")
RECORD_SIZE: Final = 52
assert RECORD.size == RECORD_SIZE

BLANK: Final = struct.Struct(">iqi")
MIN_BLANK_LEN: Final = 16
assert BLANK.size == MIN_BLANK_LEN
#: ``TimerLog.BLANK_MAGIC_CODE = 0xBBCCDDEE ^ 1880681586 + 8`` (Java: ``+`` binds first): the same
#: code as the CommitLog's blank, read here as the signed int the record's magic field holds
BLANK_MAGIC_CODE: Final = BLANK_MAGIC - (1 << 32)

CHECKPOINT: Final = struct.Struct(">7q")
CHECKPOINT_FILE_SIZE: Final = 4096
assert CHECKPOINT.size == 56


class TimerMagic(enum.IntFlag):
    """The magic bits of a timer-log record (``TimerMessageStore.MAGIC_*``)."""

    DEFAULT = 1
    ROLL = 1 << 1  # parked at the window edge, to be enqueued again
    DELETE = 1 << 2  # a recall tombstone


MAGIC_DEFAULT: Final = int(TimerMagic.DEFAULT)
MAGIC_ROLL: Final = int(TimerMagic.ROLL)
MAGIC_DELETE: Final = int(TimerMagic.DELETE)


def is_magic_ok(magic: int) -> bool:
    """``TimerMessageStore.isMagicOK``: only the low four bits may be set."""
    return (magic | 0xF) == 0xF
