"""Persisted check progress: the next half-queue offset the check pass will examine.

RocketMQ keeps this as the consumer offset of the system group ``CID_SYS_RMQ_TRANS`` on
``RMQ_SYS_TRANS_HALF_TOPIC`` (and on the op topic).  rocketq writes it to a small JSON file in the
store's ``config`` directory (``transactionCheckProgress.json``, atomically with a ``.bak``) at the
end of every pass that moved it, and mirrors it into the broker's consumer offset table when one
is given, so admin tools show it like RocketMQ's.  On load the larger of the two wins.

The progress is only an optimisation: everything below it is resolved (finished, superseded by a
newer copy, or parked) and everything above it is rebuilt from the log, so a stale value after a
crash only makes the next pass re-read records it will skip again.
"""

from __future__ import annotations

import logging
import os
from typing import Final, Protocol

from rocketq.broker.metadata import load_json_file, persist_json_file
from rocketq.broker.store.errors import StoreError
from rocketq.broker.transaction.half_message import HALF_QUEUE_ID, HALF_TOPIC, OP_TOPIC, SYS_TRANS_GROUP

__all__ = ["PROGRESS_FILE", "CheckProgress", "OffsetTable"]

log = logging.getLogger(__name__)

PROGRESS_FILE: Final = "transactionCheckProgress.json"


class OffsetTable(Protocol):
    """The part of the broker's ``ConsumerOffsetManager`` the progress mirror uses."""

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None: ...

    def query_offset(self, group: str, topic: str, queue_id: int) -> int: ...


class CheckProgress:
    """Load and save (half offset, op offset) for the check pass."""

    def __init__(self, config_dir: str, offsets: OffsetTable | None = None) -> None:
        self.path = os.path.join(config_dir, PROGRESS_FILE)
        self.offsets = offsets
        self.half_offset = -1
        self.op_offset = -1

    def load(self) -> int:
        """The saved half offset, or -1 if there is none."""
        half = op = -1
        try:
            doc = load_json_file(self.path)
        except StoreError as exc:
            log.error("transaction check progress unreadable, rescanning the half queue: %s", exc)
            doc = None
        if isinstance(doc, dict):
            half = _as_int(doc.get("halfOffset"))
            op = _as_int(doc.get("opOffset"))
        if self.offsets is not None:
            half = max(half, self.offsets.query_offset(SYS_TRANS_GROUP, HALF_TOPIC, HALF_QUEUE_ID))
            op = max(op, self.offsets.query_offset(SYS_TRANS_GROUP, OP_TOPIC, HALF_QUEUE_ID))
        self.half_offset, self.op_offset = half, op
        return half

    def save(self, half_offset: int, op_offset: int) -> None:
        if (half_offset, op_offset) == (self.half_offset, self.op_offset):
            return
        try:
            persist_json_file(self.path, {"halfOffset": half_offset, "opOffset": op_offset})
        except StoreError as exc:
            log.error("cannot persist the transaction check progress: %s", exc)
            return
        self.half_offset, self.op_offset = half_offset, op_offset
        if self.offsets is not None:
            self.offsets.commit_offset(SYS_TRANS_GROUP, HALF_TOPIC, HALF_QUEUE_ID, half_offset)
            self.offsets.commit_offset(SYS_TRANS_GROUP, OP_TOPIC, HALF_QUEUE_ID, op_offset)


def _as_int(value: object) -> int:
    if isinstance(value, bool):
        return -1
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return -1
