"""The sink's options (``deliveryGuarantee``, batching, ``transactionalId`` ...), parsed once into
:class:`SinkOptions`, a frozen dataclass of plain values that pickles cheaply into executor tasks.

:func:`parse_sink_options` validates everything on the driver when the query starts and raises
:class:`OptionError` naming the offending option.  docs/connector.md lists every option with its
default.
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketq.client.config import ClientConfig
from rocketq.connector.errors import OptionError
from rocketq.connector.option_text import (
    CLIENT_KEYS,
    TOPIC_RE,
    check_unknown,
    client_config,
    get_bool,
    get_name_server,
    get_req_int,
    get_text,
    lower_keys,
    trace_topic,
    value_format,
)
from rocketq.connector.value_types import ValueFormat

DEFAULT_PRODUCER_GROUP = "spark-rocketmq-sink"
DEFAULT_SEND_TIMEOUT_MS = 3000
DEFAULT_SEND_RETRIES = 2
DEFAULT_BATCH_MAX_MESSAGES = 1024
DEFAULT_BATCH_MAX_BYTES = 1024 * 1024
DEFAULT_MAX_INFLIGHT_QUEUES = 16
SINK_VALUE_KEYS = frozenset({"valueformat"})
SINK_KEYS = frozenset(
    {
        "nameserver", "namesrvaddr", "topic", "producergroup", "sendtimeoutms", "sendretries",
        "batchmaxmessages", "batchmaxbytes", "deliveryguarantee", "maxinflightqueues",
        "transactionalid", "committimeoutms", "tls", "tlstrustcertpath", "accesskey", "secretkey",
        "enablemsgtrace", "tracetopic",
    }
) | SINK_VALUE_KEYS | CLIENT_KEYS  # fmt: skip


class DeliveryGuarantee(enum.Enum):
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


_GUARANTEES = {"atleastonce": DeliveryGuarantee.AT_LEAST_ONCE, "exactlyonce": DeliveryGuarantee.EXACTLY_ONCE}
SINK_ID_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
DEFAULT_COMMIT_TIMEOUT_MS = 10_000


@dataclass(frozen=True, kw_only=True, slots=True)
class SinkOptions:
    name_server: str
    #: the topic of every row: wins over a ``topic`` column (as Kafka's sink)
    topic: str | None = None
    producer_group: str = DEFAULT_PRODUCER_GROUP
    send_timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS
    send_retries: int = DEFAULT_SEND_RETRIES
    batch_max_messages: int = DEFAULT_BATCH_MAX_MESSAGES
    batch_max_bytes: int = DEFAULT_BATCH_MAX_BYTES
    delivery_guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE
    max_inflight_queues: int = DEFAULT_MAX_INFLIGHT_QUEUES
    #: exactly-once: the stable identity of the sink (``transactionalId``, else a hash of the
    #: checkpoint location); None for batch writes without ``transactionalId`` and at-least-once.
    sink_id: str | None = None
    commit_timeout_ms: int = DEFAULT_COMMIT_TIMEOUT_MS
    #: client settings of every connection (TLS: options ``tls``, ``tlsTrustCertPath``)
    client: ClientConfig = field(default_factory=ClientConfig)
    #: ``valueFormat``: how a ``value`` column is encoded into the body
    value_format: ValueFormat = ValueFormat.BINARY
    #: ``enableMsgTrace``/``traceTopic``: Pub trace records of every message written
    enable_msg_trace: bool = False
    trace_topic: str | None = None

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE

    @property
    def trace(self) -> tuple[bool, str | None]:
        """(``enableMsgTrace``, ``traceTopic``) of the sink's producer."""
        return self.enable_msg_trace, self.trace_topic


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the sink options."""
    options = lower_keys(options)
    check_unknown(options, SINK_KEYS, "sink")
    topic = get_text(options, "topic")
    if topic is not None and not TOPIC_RE.match(topic):
        raise OptionError("topic", f"{topic!r} is not a valid RocketMQ topic name")
    text = get_text(options, "deliveryGuarantee") or "atLeastOnce"
    guarantee = _GUARANTEES.get(text.replace("_", "").replace("-", "").lower())
    if guarantee is None:
        raise OptionError("deliveryGuarantee", f"expected 'atLeastOnce' or 'exactlyOnce', got {text!r}")
    batch_bytes = get_req_int(options, "batchMaxBytes", DEFAULT_BATCH_MAX_BYTES, low=1024)
    if batch_bytes > 4 * 1024 * 1024:
        raise OptionError("batchMaxBytes", "must be <= 4194304 (the broker's maxMessageSize)")
    client = client_config(options)  # TLS and ACL credentials: every connection, both guarantees
    return SinkOptions(
        client=client,
        name_server=get_name_server(options),
        topic=topic,
        producer_group=get_text(options, "producerGroup") or DEFAULT_PRODUCER_GROUP,
        send_timeout_ms=get_req_int(options, "sendTimeoutMs", DEFAULT_SEND_TIMEOUT_MS, low=1),
        send_retries=get_req_int(options, "sendRetries", DEFAULT_SEND_RETRIES, low=0),
        batch_max_messages=get_req_int(options, "batchMaxMessages", DEFAULT_BATCH_MAX_MESSAGES, low=1),
        batch_max_bytes=batch_bytes,
        max_inflight_queues=get_req_int(options, "maxInflightQueues", DEFAULT_MAX_INFLIGHT_QUEUES, low=1),
        delivery_guarantee=guarantee,
        sink_id=_sink_id(options) if guarantee is DeliveryGuarantee.EXACTLY_ONCE else None,
        commit_timeout_ms=get_req_int(options, "commitTimeoutMs", DEFAULT_COMMIT_TIMEOUT_MS, low=100),
        value_format=value_format(options),
        enable_msg_trace=get_bool(options, "enableMsgTrace", False),
        trace_topic=trace_topic(options),
    )


def _sink_id(options: Mapping[str, str]) -> str | None:
    """``transactionalId``, else a hash of the absolute ``checkpointLocation`` (streaming)."""
    explicit = get_text(options, "transactionalId")
    if explicit is not None:
        if not SINK_ID_RE.match(explicit):
            raise OptionError(
                "transactionalId", f"expected 1-64 characters of [a-zA-Z0-9_-], got {explicit!r}"
            )
        return explicit
    location = get_text(options, "checkpointLocation")
    if location is None:
        return None
    if not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]+:", location):  # a plain path, not file:/ or hdfs://
        location = os.path.abspath(location)
    return "cp" + hashlib.sha256(location.rstrip("/").encode()).hexdigest()[:24]


def require_sink_id(opts: SinkOptions) -> str:
    """The sink id of an exactly-once streaming write; a clear error when it cannot be derived."""
    if opts.sink_id is None:
        raise OptionError(
            "transactionalId",
            "deliveryGuarantee=exactlyOnce needs a stable sink identity: set the query's "
            "'checkpointLocation' option (writeStream.option('checkpointLocation', ...)) "
            "or 'transactionalId'",
        )
    return opts.sink_id
