"""The message-trace text format: golden lines derived by hand from RocketMQ's TraceDataEncoder,
the older line lengths its decoder accepts, and hypothesis round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.errors import MessageFormatError
from rocketq.client.model import LocalTransactionState
from rocketq.client.trace.codec import decode_trace_data, encode_record, encode_records, trace_keys
from rocketq.client.trace.model import ConsumeReturnType, MessageType, TraceRecord, TraceType

C, F = "\x01", "\x02"
MSG_ID = "7F0000010BB818B4AAC27C8A9C6D0000"
OFFSET_ID = "7F00000100002A9F0000000000000A1B"
TS = 1_700_000_000_123

PUB = TraceRecord(
    trace_type=TraceType.Pub,
    timestamp_ms=TS,
    group_name="pg",
    topic="TopicA",
    msg_id=MSG_ID,
    tags="TagA",
    keys="k1 k2",
    store_host="127.0.0.1:10911",
    body_length=11,
    cost_time_ms=3,
    msg_type=MessageType.Normal_Msg,
    offset_msg_id=OFFSET_ID,
    success=True,
)
# Java: type ts region group topic msgId tags keys storeHost bodyLength costTime msgType.ordinal
# offsetMsgId success, each followed by CONTENT_SPLITOR, the last by FIELD_SPLITOR
PUB_LINE = (
    f"Pub{C}{TS}{C}DefaultRegion{C}pg{C}TopicA{C}{MSG_ID}{C}TagA{C}k1 k2{C}127.0.0.1:10911{C}11{C}3{C}0{C}"
    f"{OFFSET_ID}{C}true{F}"
)
SUB_BEFORE = TraceRecord(
    trace_type=TraceType.SubBefore,
    timestamp_ms=TS,
    group_name="cg",
    request_id="REQ1",
    msg_id=MSG_ID,
    retry_times=2,
    keys=None,
)
# Java appends a null keys as "null"
SUB_BEFORE_LINE = f"SubBefore{C}{TS}{C}DefaultRegion{C}cg{C}REQ1{C}{MSG_ID}{C}2{C}null{F}"
SUB_AFTER = TraceRecord(
    trace_type=TraceType.SubAfter,
    timestamp_ms=TS + 7,
    group_name="cg",
    request_id="REQ1",
    msg_id=MSG_ID,
    cost_time_ms=7,
    success=False,
    keys="k1",
    context_code=ConsumeReturnType.FAILED,
)
# type requestId msgId costTime success keys contextCode timestamp groupName
SUB_AFTER_LINE = f"SubAfter{C}REQ1{C}{MSG_ID}{C}7{C}false{C}k1{C}4{C}{TS + 7}{C}cg{F}"
END_TX = TraceRecord(
    trace_type=TraceType.EndTransaction,
    timestamp_ms=TS,
    group_name="pg",
    topic="TopicA",
    msg_id=MSG_ID,
    store_host="127.0.0.1:10911",
    msg_type=MessageType.Trans_msg_Commit,
    transaction_id=MSG_ID,
    transaction_state=LocalTransactionState.ROLLBACK_MESSAGE,
    from_transaction_check=True,
)
END_TX_LINE = (
    f"EndTransaction{C}{TS}{C}DefaultRegion{C}pg{C}TopicA{C}{MSG_ID}{C}null{C}null{C}127.0.0.1:10911{C}2{C}"
    f"{MSG_ID}{C}ROLLBACK_MESSAGE{C}true{F}"
)


@pytest.mark.parametrize(
    ("record", "line"),
    [(PUB, PUB_LINE), (SUB_BEFORE, SUB_BEFORE_LINE), (SUB_AFTER, SUB_AFTER_LINE), (END_TX, END_TX_LINE)],
    ids=["Pub", "SubBefore", "SubAfter", "EndTransaction"],
)
def test_golden_lines(record: TraceRecord, line: str) -> None:
    assert encode_record(record) == line
    assert decode_trace_data(line) == [record]


def test_a_body_of_several_lines_and_its_keys() -> None:
    body = encode_records([PUB, SUB_BEFORE, SUB_AFTER])
    assert body == PUB_LINE + SUB_BEFORE_LINE + SUB_AFTER_LINE
    assert decode_trace_data(body) == [PUB, SUB_BEFORE, SUB_AFTER]
    # Java's TraceTransferBean: each bean's msgId, and its keys when there are any
    assert trace_keys([PUB, SUB_BEFORE, SUB_AFTER]) == [MSG_ID, "k1 k2", "k1"]


def test_older_line_lengths() -> None:
    # Pub without offsetMsgId (13 fields), Pub with a client host (15)
    pub13 = f"Pub{C}{TS}{C}R{C}pg{C}T{C}{MSG_ID}{C}null{C}null{C}h:1{C}5{C}1{C}3{C}false{F}"
    (old,) = decode_trace_data(pub13)
    assert (old.offset_msg_id, old.success, old.msg_type, old.tags) == (
        "",
        False,
        MessageType.Delay_Msg,
        None,
    )
    pub15 = PUB_LINE[:-1] + f"{C}10.0.0.9:5555{F}"
    assert decode_trace_data(pub15)[0].client_host == "10.0.0.9:5555"
    # SubAfter of 6 fields (no context code, time, group), of 8 (time, no group)
    (a6,) = decode_trace_data(f"SubAfter{C}R{C}{MSG_ID}{C}2{C}true{C}null{F}")
    assert (a6.context_code, a6.timestamp_ms, a6.group_name) == (ConsumeReturnType.SUCCESS, 0, "")
    (a8,) = decode_trace_data(f"SubAfter{C}R{C}{MSG_ID}{C}2{C}true{C}null{C}2{C}{TS}{F}")
    assert (a8.context_code, a8.timestamp_ms, a8.group_name) == (ConsumeReturnType.EXCEPTION, TS, "")


def test_unknown_types_are_skipped_and_bad_lines_raise() -> None:
    assert decode_trace_data(f"Future{C}1{C}2{F}" + PUB_LINE) == [PUB]
    assert decode_trace_data("") == []
    with pytest.raises(MessageFormatError, match="Pub trace line needs 13 fields"):
        decode_trace_data(f"Pub{C}{TS}{F}")
    with pytest.raises(MessageFormatError, match="bad SubBefore trace line"):
        decode_trace_data(SUB_BEFORE_LINE.replace(f"{C}2{C}", f"{C}two{C}"))


def test_separators_inside_values_become_spaces() -> None:
    rec = TraceRecord(trace_type=TraceType.SubBefore, msg_id="m", keys=f"a{C}b{F}c", request_id="r")
    (back,) = decode_trace_data(encode_record(rec))
    assert back.keys == "a b c"


# ---------------------------------------------------------------------------- round trips

_text = st.text(st.characters(exclude_characters=(C, F), exclude_categories=["Cs"]), max_size=12)
_word = _text.filter(lambda s: s != "" and s.strip().lower() not in ("null", "true", "false"))
_opt = st.none() | _word.filter(lambda s: s != "null")
_ms = st.integers(0, 2**62)
_int = st.integers(0, 2**31 - 1)


def _records() -> st.SearchStrategy[TraceRecord]:
    common = {"timestamp_ms": _ms, "group_name": _word, "msg_id": _word}
    pub = st.builds(
        TraceRecord,
        trace_type=st.just(TraceType.Pub),
        region_id=_word,
        topic=_word,
        tags=_opt,
        keys=_opt,
        store_host=_word,
        body_length=_int,
        cost_time_ms=_int,
        msg_type=st.sampled_from(MessageType),
        offset_msg_id=_word,
        success=st.booleans(),
        **common,
    )
    before = st.builds(
        TraceRecord,
        trace_type=st.just(TraceType.SubBefore),
        region_id=_word,
        request_id=_word,
        retry_times=_int,
        keys=_opt,
        **common,
    )
    after = st.builds(
        TraceRecord,
        trace_type=st.just(TraceType.SubAfter),
        request_id=_word,
        cost_time_ms=_int,
        success=st.booleans(),
        keys=_opt,
        context_code=st.sampled_from(ConsumeReturnType),
        **common,
    )
    end = st.builds(
        TraceRecord,
        trace_type=st.just(TraceType.EndTransaction),
        region_id=_word,
        topic=_word,
        tags=_opt,
        keys=_opt,
        store_host=_word,
        msg_type=st.sampled_from(MessageType),
        transaction_id=_opt,
        transaction_state=st.sampled_from(LocalTransactionState),
        from_transaction_check=st.booleans(),
        **common,
    )
    return pub | before | after | end


@given(st.lists(_records(), max_size=6))
def test_round_trip(records: list[TraceRecord]) -> None:
    body = encode_records(records).encode("utf-8")
    assert decode_trace_data(body.decode("utf-8")) == records
