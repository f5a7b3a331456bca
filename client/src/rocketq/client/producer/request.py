"""What a producer puts on the wire for one send: topic checks, the SEND_MESSAGE_V2 header, the body.

This is the message-preparation half of RocketMQ's ``sendKernelImpl``: every message gets a
``UNIQ_KEY`` (the SendResult's ``msg_id``) unless it has one; bodies over
``compress_msg_body_over_howmuch`` bytes are compressed (zlib, or LZ4 with ``compression_type``)
and flagged in the sysFlag; a message carrying ``TRAN_MSG=true`` is flagged as a half message; a
send to a ``%RETRY%`` topic moves ``RECONSUME_TIME`` and ``MAX_RECONSUME_TIMES`` from the
properties into the header.  Batches are sent as their caller encoded them (never compressed).
The send itself (route, queue choice, retries, latency) stays in :mod:`.core`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Final

from rocketq.client.config import CompressionType, ProducerConfig
from rocketq.client.errors import MQClientError
from rocketq.client.model import Message
from rocketq.client.producer.batch import EncodedBatch
from rocketq.client.remoting.headers import SendMessageRequestHeaderV2
from rocketq.client.remoting.message import SysFlag, compress_body, with_compression
from rocketq.client.remoting.msgid import UniqKeyGenerator
from rocketq.client.remoting.properties import MessageConst, encode_properties
from rocketq.client.remoting.vocabulary import (
    MAX_TOPIC_LENGTH,
    NAME_PATTERN,
    RETRY_GROUP_TOPIC_PREFIX,
    MessageQueue,
    ResponseCode,
)

__all__ = ["WAIT_STORE_OK", "PreparedSend", "check_topic", "prepare_send", "send_header"]

_TOPIC_RE: Final = re.compile(NAME_PATTERN)  # the one definition: remoting.vocabulary
_TOPIC_MAX_LENGTH: Final = MAX_TOPIC_LENGTH
#: The properties of a batch request's carrier message.
WAIT_STORE_OK: Final = encode_properties({MessageConst.WAIT_STORE_MSG_OK: "true"})


def check_topic(topic: str) -> None:
    """RocketMQ's Validators.checkTopic."""
    if not topic or not topic.strip():
        raise MQClientError("The specified topic is blank", code=ResponseCode.MESSAGE_ILLEGAL)
    if len(topic) > _TOPIC_MAX_LENGTH:
        raise MQClientError(
            f"The specified topic is longer than {_TOPIC_MAX_LENGTH} characters",
            code=ResponseCode.MESSAGE_ILLEGAL,
        )
    if not _TOPIC_RE.match(topic):
        raise MQClientError(
            f"The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
            code=ResponseCode.MESSAGE_ILLEGAL,
        )


@dataclass(frozen=True, slots=True)
class PreparedSend:
    """One send request's header and body, plus the properties and id the SendResult reports."""

    header: SendMessageRequestHeaderV2
    body: bytes
    properties: dict[str, str]
    msg_id: str


def send_header(
    group: str,
    config: ProducerConfig,
    mq: MessageQueue,
    *,
    sys_flag: int,
    flag: int,
    properties: str,
    batch: bool,
    reconsume_times: int = 0,
    max_reconsume_times: int | None = None,
) -> SendMessageRequestHeaderV2:
    """The send header: ``default_topic`` names the producer's auto-creation template."""
    return SendMessageRequestHeaderV2(
        producer_group=group,
        topic=mq.topic,
        default_topic=config.create_topic_key,
        default_topic_queue_nums=config.default_topic_queue_nums,
        queue_id=mq.queue_id,
        sys_flag=sys_flag,
        born_timestamp=int(time.time() * 1000),
        flag=flag,
        properties=properties,
        reconsume_times=reconsume_times,
        unit_mode=False,
        max_reconsume_times=max_reconsume_times,
        batch=batch,
        broker_name=mq.broker_name,
    )


def _maybe_compress(config: ProducerConfig, body: bytes) -> tuple[bytes, int]:
    if len(body) <= config.compress_msg_body_over_howmuch:
        return body, 0
    data = compress_body(body, config.compression_type, config.compress_level)
    if config.compression_type is CompressionType.ZLIB:
        return data, int(SysFlag.COMPRESSED)  # 4.x flags zlib by bit 0 alone
    return data, with_compression(0, config.compression_type)


def prepare_send(
    group: str,
    config: ProducerConfig,
    uniq: UniqKeyGenerator,
    msg: Message,
    mq: MessageQueue,
    batch: EncodedBatch | None,
) -> PreparedSend:
    """The request for ``msg`` (or the encoded ``batch`` it carries) to ``mq``."""
    if batch is not None:
        props = dict(msg.properties)
        body, sys_flag, msg_id = batch.body, 0, batch.msg_id
    else:
        props = msg.wire_properties()
        if MessageConst.UNIQ_KEY not in props:
            props[MessageConst.UNIQ_KEY] = uniq.next_id()
        body, sys_flag = _maybe_compress(config, msg.body)
        if props.get(MessageConst.TRANSACTION_PREPARED, "").lower() == "true":
            sys_flag |= int(SysFlag.TRANSACTION_PREPARED)  # a half message (Boolean.parseBoolean)
        msg_id = props[MessageConst.UNIQ_KEY]
    reconsume_times = 0
    max_reconsume: int | None = None
    if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        reconsume = props.pop(MessageConst.RECONSUME_TIME, None)
        reconsume_times = int(reconsume) if reconsume else 0
        max_text = props.pop(MessageConst.MAX_RECONSUME_TIMES, None)
        max_reconsume = int(max_text) if max_text else None
    header = send_header(
        group,
        config,
        mq,
        sys_flag=sys_flag,
        flag=msg.flag,
        properties=encode_properties(props),
        batch=batch is not None,
        reconsume_times=reconsume_times,
        max_reconsume_times=max_reconsume,
    )
    return PreparedSend(header, body, props, msg_id)
