"""The store's status enums mapped onto wire response codes (B.4), in one place.

The send and pull processors answer with what the store reports: a ``PutMessageStatus`` becomes
the response code (and remark) of a send, a ``GetMessageStatus`` the response code of a pull.
The mappings are exhaustive ``match`` statements ending in ``assert_never``, so a status added to
``rocketq.broker.store.status`` without a response code here is a mypy error (and a unit test
failure), never a silent default.

=====================================  ===================================================
PutMessageStatus                       response code
=====================================  ===================================================
PUT_OK                                 SUCCESS
FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE   10 / 12 / 11 (message stored)
MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED   MESSAGE_ILLEGAL (13), remark with limit and size
SERVICE_NOT_AVAILABLE                  SERVICE_NOT_AVAILABLE (14)
OS_PAGE_CACHE_BUSY                     SYSTEM_BUSY ``[PC_SYNCHRONIZED]…``
CREATE_MAPPED_FILE_FAILED, UNKNOWN     SYSTEM_ERROR
=====================================  ===================================================
"""

from __future__ import annotations

from typing import assert_never

from rocketq.broker.store.status import GetMessageStatus, PutMessageStatus
from rocketq.client.remoting.codes import ResponseCode

__all__ = ["pull_response_code", "put_response_code", "put_status_remark"]

_SERVICE_NOT_AVAILABLE_REMARK = (
    "service not available now. It may be caused by one of the following reasons: the broker's disk is "
    "full, messages are put to the slave, message store has been shut down, etc."
)


def put_response_code(status: PutMessageStatus) -> ResponseCode:
    """The response code of a send whose put ended with ``status``."""
    match status:
        case PutMessageStatus.PUT_OK:
            return ResponseCode.SUCCESS
        case PutMessageStatus.FLUSH_DISK_TIMEOUT:
            return ResponseCode.FLUSH_DISK_TIMEOUT
        case PutMessageStatus.FLUSH_SLAVE_TIMEOUT:
            return ResponseCode.FLUSH_SLAVE_TIMEOUT
        case PutMessageStatus.SLAVE_NOT_AVAILABLE:
            return ResponseCode.SLAVE_NOT_AVAILABLE
        case PutMessageStatus.MESSAGE_ILLEGAL | PutMessageStatus.PROPERTIES_SIZE_EXCEEDED:
            return ResponseCode.MESSAGE_ILLEGAL
        case PutMessageStatus.SERVICE_NOT_AVAILABLE:
            return ResponseCode.SERVICE_NOT_AVAILABLE
        case PutMessageStatus.OS_PAGE_CACHE_BUSY:
            return ResponseCode.SYSTEM_BUSY
        case PutMessageStatus.CREATE_MAPPED_FILE_FAILED | PutMessageStatus.UNKNOWN_ERROR:
            return ResponseCode.SYSTEM_ERROR
        case _:
            assert_never(status)


def put_status_remark(status: PutMessageStatus, detail: str) -> str | None:
    """The remark of a send answered for ``status`` (None when the message is stored).

    ``detail`` completes the remark of an illegal message (its sizes and the limits).
    """
    match status:
        case (
            PutMessageStatus.PUT_OK
            | PutMessageStatus.FLUSH_DISK_TIMEOUT
            | PutMessageStatus.FLUSH_SLAVE_TIMEOUT
            | PutMessageStatus.SLAVE_NOT_AVAILABLE
        ):
            return None
        case PutMessageStatus.MESSAGE_ILLEGAL | PutMessageStatus.PROPERTIES_SIZE_EXCEEDED:
            return (
                f"the message is illegal, maybe msg body or properties length not matched. {detail}"
            ).rstrip()
        case PutMessageStatus.SERVICE_NOT_AVAILABLE:
            return _SERVICE_NOT_AVAILABLE_REMARK
        case PutMessageStatus.OS_PAGE_CACHE_BUSY:
            return "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
        case PutMessageStatus.CREATE_MAPPED_FILE_FAILED:
            return "create mapped file failed, server is busy or broken."
        case PutMessageStatus.UNKNOWN_ERROR:
            return f"UNKNOWN_ERROR: {status.name}"
        case _:
            assert_never(status)


def pull_response_code(status: GetMessageStatus, requested_offset: int) -> ResponseCode:
    """The response code of a pull from ``requested_offset`` whose read ended with ``status``.

    An empty or unknown queue is PULL_NOT_FOUND for a consumer starting at 0 and
    PULL_OFFSET_MOVED for any other offset (the queue was deleted or rebuilt under it).
    """
    match status:
        case GetMessageStatus.FOUND:
            return ResponseCode.SUCCESS
        case GetMessageStatus.NO_MATCHED_MESSAGE | GetMessageStatus.MESSAGE_WAS_REMOVING:
            return ResponseCode.PULL_RETRY_IMMEDIATELY
        case GetMessageStatus.OFFSET_FOUND_NULL | GetMessageStatus.OFFSET_OVERFLOW_ONE:
            return ResponseCode.PULL_NOT_FOUND
        case (
            GetMessageStatus.OFFSET_OVERFLOW_BADLY
            | GetMessageStatus.OFFSET_TOO_SMALL
            | GetMessageStatus.OFFSET_RESET
        ):
            return ResponseCode.PULL_OFFSET_MOVED
        case GetMessageStatus.NO_MESSAGE_IN_QUEUE | GetMessageStatus.NO_MATCHED_LOGIC_QUEUE:
            return ResponseCode.PULL_NOT_FOUND if requested_offset == 0 else ResponseCode.PULL_OFFSET_MOVED
        case _:
            assert_never(status)
