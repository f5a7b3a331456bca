"""Message queue selectors for ordered sends: ``(mqs, message, arg) -> MessageQueue``.

A :data:`MessageQueueSelector` is any callable taking the topic's writable queues (in the
producer's route order: brokers sorted by name, queue ids ascending), the message and the user's
argument.  Built-ins:

* :class:`SelectMessageQueueByHash` — the *sharding-key* selector.  The queue index is
  ``abs(hash(arg) % len(mqs))`` where ``hash`` is Java's ``hashCode()`` of the argument:
  ``String.hashCode`` (``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, int32 wrap-around)
  for a ``str``, ``Integer.hashCode`` (the value) for an ``int`` in int32 range and
  ``Long.hashCode`` (``(int)(v ^ (v >>> 32))``) for larger ints.  This is exactly RocketMQ's
  ``SelectMessageQueueByHash``, so Java and Python producers send a given key to the same queue,
  and unlike Python's ``hash()`` it is stable across processes and machines.  With no argument
  the message's ``sharding_key`` (else its keys) is used.
* :class:`SelectMessageQueueByRoundRobin` — cycles through the queues.
* :class:`SelectMessageQueueByRandom` — a uniformly random queue.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

from rocketq.client.errors import ClientError
from rocketq.client.model import Message
from rocketq.client.remoting.javahash import java_string_hash
from rocketq.client.remoting.route import MessageQueue

__all__ = [
    "MessageQueueSelector",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SelectMessageQueueByRoundRobin",
    "java_hash_code",
]

MessageQueueSelector = Callable[[Sequence[MessageQueue], "Message", Any], MessageQueue]

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def java_hash_code(arg: object) -> int:
    """Java ``hashCode()`` of a ``str`` (String), ``int`` (Integer or Long) or ``bool`` (Boolean)."""
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if _INT32_MIN <= arg <= _INT32_MAX:
            return arg
        v = arg & 0xFFFFFFFFFFFFFFFF
        return _to_int32(v ^ (v >> 32))
    if isinstance(arg, str):
        return java_string_hash(arg)
    raise ClientError(f"SelectMessageQueueByHash needs a str or int sharding key, got {type(arg).__name__}")


class SelectMessageQueueByHash:
    """``mqs[abs(hashCode(arg) % len(mqs))]`` with Java's hashCode and Java's ``%`` (truncating)."""

    def __call__(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        if not mqs:
            raise ClientError("no message queue to select from")
        key = arg
        if key is None:
            key = msg.sharding_key or msg.keys_str or None
        if key is None:
            raise ClientError("SelectMessageQueueByHash needs a sharding key (arg, or Message.sharding_key)")
        h = java_hash_code(key)
        remainder = abs(h) % len(mqs)  # == abs(h % n) for Java's truncating %, overflow-free
        return mqs[remainder]


class SelectMessageQueueByRoundRobin:
    """Cycle through the queues (one counter per selector instance)."""

    def __init__(self) -> None:
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def __call__(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        if not mqs:
            raise ClientError("no message queue to select from")
        with self._lock:
            index = next(self._counter)
        return mqs[index % len(mqs)]


class SelectMessageQueueByRandom:
    """A uniformly random queue."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def __call__(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        if not mqs:
            raise ClientError("no message queue to select from")
        return mqs[self._rng.randrange(len(mqs))]
