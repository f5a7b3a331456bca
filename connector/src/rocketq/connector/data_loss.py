"""Data loss: the cases the source detects, and what ``failOnDataLoss`` does about each.

A :class:`Loss` says which queue lost what: the offset the query expected to read next, what the
broker reports instead, and where the query carries on.  :func:`report` raises it as a
:class:`DataLossError` (``failOnDataLoss=true``, the default) or logs the same facts as a warning
and lets the caller carry on from :attr:`Loss.resume_at` (``failOnDataLoss=false``).

Theory of operation.  The cases are Kafka's, in RocketMQ's terms:

=====================  ===========================================================  ==========
kind                   seen as                                                      where
=====================  ===========================================================  ==========
``OFFSETS_BACKWARDS``  a queue's max offset is below the checkpointed position:     driver
                       the topic was deleted and recreated (queue offsets restart
                       at 0) or the broker's store was reset; the query carries on
                       from the queue's new min offset
``NEW_QUEUE_TRIMMED``  a queue that appeared after the query started has a min      driver
                       offset above 0: its first messages were deleted before the
                       query saw it; the query starts at that min offset
``VANISHED``           a queue the query reads left the route (topic deleted, queue  driver
                       count lowered); it is dropped from the offsets
``RETENTION``          the range to read starts below the queue's min offset        executor
                       (retention deleted the messages first); the read skips to it
``QUEUE_SHRANK``       the queue ends before the planned range (deleted and          executor
                       recreated while the batch ran); the read stops there
=====================  ===========================================================  ==========

A queue recreated and refilled past the checkpointed position before the query looks again is
indistinguishable from one that kept its messages, from offsets alone (Kafka has the same limit).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.connector.errors import DataLossError

log = logging.getLogger("rocketq.connector")


class LossKind(enum.Enum):
    OFFSETS_BACKWARDS = "offsets went backwards"
    NEW_QUEUE_TRIMMED = "new queue does not start at 0"
    VANISHED = "queue vanished"
    RETENTION = "messages deleted before they were read"
    QUEUE_SHRANK = "queue ends before the planned range"


_CAUSES = {
    LossKind.OFFSETS_BACKWARDS: (
        "the queue's offsets went backwards: the topic was deleted and recreated, or the broker's "
        "store was reset, and messages may have been missed"
    ),
    LossKind.NEW_QUEUE_TRIMMED: (
        "the queue appeared after the query started and its first messages were deleted before "
        "the query saw it"
    ),
    LossKind.VANISHED: "the queue left the topic's route (topic deleted, or its queue count lowered)",
    LossKind.RETENTION: "the messages were deleted (retention) before they were read",
    LossKind.QUEUE_SHRANK: "the queue now ends before the planned range (topic deleted or recreated)",
}


@dataclass(frozen=True, slots=True)
class Loss:
    """One data-loss finding: ``expected`` is the offset the query was to read next, ``found``
    the broker's answer (``found_what``: "max offset", "min offset"; None: the queue is gone),
    ``lost`` the offsets known lost (None: unknown), ``resume_at`` where the query carries on
    with ``failOnDataLoss=false`` (None: the queue is no longer read)."""

    kind: LossKind
    queue: MessageQueue
    expected: int | None
    found: int | None
    found_what: str = ""
    lost: tuple[int, int] | None = None
    resume_at: int | None = None

    def describe(self) -> str:
        q = self.queue
        found = "no such queue" if self.found is None else f"{self.found_what} {self.found}"
        lost = "" if self.lost is None else f"; offsets [{self.lost[0]}, {self.lost[1]}) are lost"
        expected = "" if self.expected is None else f"expected offset {self.expected}, "
        where = f"broker {q.broker_name}, queue id {q.queue_id}"
        return f"{where}: {expected}found {found}{lost}: {_CAUSES[self.kind]}"

    def error(self) -> DataLossError:
        return DataLossError(self.queue.topic, self.queue.key, self.describe())


def report(fail_on_data_loss: bool, loss: Loss) -> None:
    """Raise ``loss`` as a :class:`DataLossError`, or (``failOnDataLoss=false``) log it and return."""
    if fail_on_data_loss:
        raise loss.error()
    then = (
        "the queue is no longer read" if loss.resume_at is None else f"carrying on at offset {loss.resume_at}"
    )
    log.warning(
        "rocketmq source: data loss in topic '%s' queue %s: %s; failOnDataLoss=false: %s",
        loss.queue.topic,
        loss.queue.key,
        loss.describe(),
        then,
    )
