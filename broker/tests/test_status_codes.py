"""Every store status has its response code (B.4): parametrized over the enums, so a status added
to ``store/status.py`` without a mapping in ``processor/status_codes.py`` fails here."""

from __future__ import annotations

import pytest

from rocketq.broker.processor.status_codes import pull_response_code, put_response_code, put_status_remark
from rocketq.broker.store.status import GetMessageStatus, PutMessageStatus
from rocketq.client.remoting.codes import ResponseCode as R

P = PutMessageStatus
G = GetMessageStatus

PUT_CODES = {
    P.PUT_OK: R.SUCCESS,
    P.FLUSH_DISK_TIMEOUT: R.FLUSH_DISK_TIMEOUT,
    P.FLUSH_SLAVE_TIMEOUT: R.FLUSH_SLAVE_TIMEOUT,
    P.SLAVE_NOT_AVAILABLE: R.SLAVE_NOT_AVAILABLE,
    P.SERVICE_NOT_AVAILABLE: R.SERVICE_NOT_AVAILABLE,
    P.CREATE_MAPPED_FILE_FAILED: R.SYSTEM_ERROR,
    P.MESSAGE_ILLEGAL: R.MESSAGE_ILLEGAL,
    P.PROPERTIES_SIZE_EXCEEDED: R.MESSAGE_ILLEGAL,
    P.OS_PAGE_CACHE_BUSY: R.SYSTEM_BUSY,
    P.UNKNOWN_ERROR: R.SYSTEM_ERROR,
}
# (code when pulling from offset 0, code when pulling from a later offset)
PULL_CODES = {
    G.FOUND: (R.SUCCESS, R.SUCCESS),
    G.NO_MATCHED_MESSAGE: (R.PULL_RETRY_IMMEDIATELY, R.PULL_RETRY_IMMEDIATELY),
    G.MESSAGE_WAS_REMOVING: (R.PULL_RETRY_IMMEDIATELY, R.PULL_RETRY_IMMEDIATELY),
    G.OFFSET_FOUND_NULL: (R.PULL_NOT_FOUND, R.PULL_NOT_FOUND),
    G.OFFSET_OVERFLOW_ONE: (R.PULL_NOT_FOUND, R.PULL_NOT_FOUND),
    G.OFFSET_OVERFLOW_BADLY: (R.PULL_OFFSET_MOVED, R.PULL_OFFSET_MOVED),
    G.OFFSET_TOO_SMALL: (R.PULL_OFFSET_MOVED, R.PULL_OFFSET_MOVED),
    G.OFFSET_RESET: (R.PULL_OFFSET_MOVED, R.PULL_OFFSET_MOVED),
    G.NO_MESSAGE_IN_QUEUE: (R.PULL_NOT_FOUND, R.PULL_OFFSET_MOVED),
    G.NO_MATCHED_LOGIC_QUEUE: (R.PULL_NOT_FOUND, R.PULL_OFFSET_MOVED),
}


@pytest.mark.parametrize("status", list(PutMessageStatus), ids=lambda s: s.name)
def test_every_put_status_has_a_response_code_and_remark(status: PutMessageStatus) -> None:
    assert put_response_code(status) == PUT_CODES[status]
    remark = put_status_remark(status, "body=9 bytes")
    if status.is_ok:  # stored: answered with its code and the send result, no error remark
        assert remark is None
    else:
        assert remark, f"{status.name} is answered without a remark"


def test_put_remarks_say_why() -> None:
    assert put_status_remark(P.MESSAGE_ILLEGAL, "body=9 bytes") == (
        "the message is illegal, maybe msg body or properties length not matched. body=9 bytes"
    )
    busy = put_status_remark(P.OS_PAGE_CACHE_BUSY, "")
    assert busy == "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
    assert put_status_remark(P.UNKNOWN_ERROR, "") == "UNKNOWN_ERROR: UNKNOWN_ERROR"


@pytest.mark.parametrize("status", list(GetMessageStatus), ids=lambda s: s.name)
def test_every_get_status_has_a_pull_response_code(status: GetMessageStatus) -> None:
    from_start, from_later = PULL_CODES[status]
    assert pull_response_code(status, 0) == from_start
    assert pull_response_code(status, 7) == from_later
