"""Status enums and frozen result dataclasses returned by the message store.

Expected outcomes are values, not exceptions (RocketMQ's ``PutMessageStatus``,
``AppendMessageStatus`` and ``GetMessageStatus``): the broker's processors map them onto response
codes.  Result buffers are ``memoryview`` slices of the mapped segments, valid for as long as the
caller keeps them (a deleted segment stays mapped until its last view is dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class PutMessageStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def is_ok(self) -> bool:
        """True when the message is stored (even if the flush wait timed out)."""
        return self in (
            PutMessageStatus.PUT_OK,
            PutMessageStatus.FLUSH_DISK_TIMEOUT,
            PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
            PutMessageStatus.SLAVE_NOT_AVAILABLE,
        )


class AppendMessageStatus(Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class GetMessageStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    OFFSET_RESET = "OFFSET_RESET"


@dataclass(frozen=True, kw_only=True, slots=True)
class AppendMessageResult:
    """Where a record (or a batch) landed in the CommitLog."""

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    msg_id: str = ""
    queue_offset: int = 0
    store_timestamp: int = 0
    msg_num: int = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append_result: AppendMessageResult | None = None

    @property
    def is_ok(self) -> bool:
        return self.status.is_ok


@dataclass(frozen=True, kw_only=True, slots=True)
class GetMessageResult:
    """Outcome of a pull: record views, the next offset to pull from and the queue's bounds."""

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[memoryview] = field(default_factory=list)
    msg_count: int = 0
    total_bytes: int = 0
    queue_offsets: list[int] = field(default_factory=list)
    suggest_pulling_from_slave: bool = False

    def release(self) -> None:
        """Drop the record views (they pin the mapped segment until released or collected)."""
        for buf in self.buffers:
            buf.release()
        self.buffers.clear()


@dataclass(frozen=True, kw_only=True, slots=True)
class QueryMessageResult:
    """Outcome of a query by key: record views plus the index's last update point."""

    buffers: list[memoryview] = field(default_factory=list)
    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phy_offset: int = 0

    @property
    def total_bytes(self) -> int:
        return sum(len(b) for b in self.buffers)

    def release(self) -> None:
        for buf in self.buffers:
            buf.release()
        self.buffers.clear()
