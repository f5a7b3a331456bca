"""The chaos tests' bookkeeping: a ledger of what senders were told, and a load of sender threads.

A chaos test sends under load while it kills, stops and restarts servers, then checks that every
message a broker acknowledged is stored where its answer said.  :class:`Ledger` records every
answered send (its UNIQ_KEY, status, queue, queue offset, body, the answering broker's port and
when it was sent and answered) and counts the sends that raised; it is shared by the sender
threads.  :class:`Load` runs sender loops on threads over one producer until it is stopped, and
fails if a sender does not stop.  What a sender sends (single messages, batches, ordered keys) is
the test's own: it passes the loops in.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rocketq.client.errors import RocketQError
from rocketq.client.model import Message, SendResult, SendStatus
from rocketq.client.producer import Producer

__all__ = ["SEND_ERRORS", "Acked", "Ledger", "Load", "SendLoop", "Stored", "broker_port"]

#: what a send under chaos may raise: the broker died, refused or did not answer in time
SEND_ERRORS: tuple[type[BaseException], ...] = (RocketQError, TimeoutError, OSError)

#: a sender thread's body: send until the event is set
SendLoop = Callable[[threading.Event], None]


def broker_port(offset_msg_id: str) -> int:
    """The port in an offset message id (4-byte IPv4, 4-byte port, 8-byte offset, in hex)."""
    return int(offset_msg_id[8:16], 16)


@dataclass(frozen=True)
class Stored:
    """Where a send's answer says a message is, and what it holds."""

    queue_id: int
    queue_offset: int
    body: bytes


@dataclass(frozen=True)
class Acked:
    """What one answer said about one message: its UNIQ_KEY, status, queue, queue offset and
    body, the answering broker's port, and (for ordered senders) the message's key and sequence
    number."""

    msg_id: str
    status: SendStatus
    queue_id: int
    queue_offset: int
    body: bytes
    port: int
    sent_at: float  # monotonic, when the send started
    acked_at: float
    key: str = ""
    seq: int = 0

    @property
    def stored(self) -> Stored:
        return Stored(self.queue_id, self.queue_offset, self.body)


class Ledger:
    """Every answered send and the number of failed ones, shared by the sender threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._acked: list[Acked] = []
        self._failed = 0
        #: the first few failures' reasons (the exception or status), for a failing check's message
        self.reasons: list[str] = []

    def add(self, entry: Acked) -> None:
        with self._lock:
            self._acked.append(entry)

    def add_failed(self, n: int = 1, reason: object = None) -> None:
        """``n`` messages whose send raised or was not acknowledged (``reason``: the exception or
        the status): nothing is promised."""
        with self._lock:
            self._failed += n
            if reason is not None and len(self.reasons) < 10:
                error = isinstance(reason, BaseException)
                text = f"{type(reason).__name__}: {reason}" if error else str(reason)
                notes = getattr(reason, "__notes__", None)
                self.reasons.append(text + ("".join(f" ({note})" for note in notes) if notes else ""))

    def record(
        self, msgs: Sequence[Message], results: Sequence[SendResult], sent_at: float, acked_at: float
    ) -> None:
        """A batch's results come one per request, each naming its messages' UNIQ_KEYs in order."""
        it = iter(msgs)
        entries = []
        for result in results:
            port = broker_port(result.offset_msg_id)
            for i, uniq in enumerate(result.msg_id.split(",")):
                msg = next(it)
                queue_id, offset = result.message_queue.queue_id, result.queue_offset + i
                entries.append(
                    Acked(uniq, result.send_status, queue_id, offset, msg.body, port, sent_at, acked_at)
                )
        with self._lock:
            self._acked.extend(entries)

    @property
    def failed(self) -> int:
        with self._lock:
            return self._failed

    def acked(self, status: SendStatus = SendStatus.SEND_OK) -> list[Acked]:
        """The answers with ``status``, in the order they were recorded."""
        with self._lock:
            return [a for a in self._acked if a.status is status]

    def count(self, status: SendStatus = SendStatus.SEND_OK) -> int:
        with self._lock:
            return sum(1 for a in self._acked if a.status is status)

    def more_than(self, status: SendStatus, n: int) -> Callable[[], bool]:
        """A predicate for a wait: more than ``n`` answers with ``status``."""
        return lambda: self.count(status) > n

    def status_counts(self) -> Counter[str]:
        """How many messages got each status so far, by the status's name."""
        with self._lock:
            return Counter(a.status.value for a in self._acked)

    def stored(self, statuses: frozenset[SendStatus]) -> dict[str, Stored]:
        """Where the messages answered with one of ``statuses`` are, by UNIQ_KEY."""
        with self._lock:
            return {a.msg_id: a.stored for a in self._acked if a.status in statuses}

    def first_ack_after(self, t: float, not_port: int) -> Acked | None:
        """The first SEND_OK (by answer time) of a send started after ``t`` through a broker
        other than the one listening on ``not_port``."""
        later = [a for a in self.acked() if a.sent_at > t and a.port != not_port]
        return min(later, key=lambda a: a.acked_at) if later else None


class Load:
    """Sender loops on threads over one started producer, until :meth:`stop_sending`."""

    def __init__(self, producer: Producer, loops: Sequence[SendLoop]) -> None:
        self.producer = producer
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=loop, args=(self._stop,), daemon=True) for loop in loops]
        for t in self._threads:
            t.start()

    def stop_sending(self, join_s: float = 60.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(join_s)
        assert not any(t.is_alive() for t in self._threads), "a sender hangs"

    def close(self) -> None:
        """Stop the senders and shut the producer down."""
        self.stop_sending()
        self.producer.shutdown()
