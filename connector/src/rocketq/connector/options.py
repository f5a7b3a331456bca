"""Parsing of the ``rocketmq`` data source options, once, into frozen dataclasses.

Spark hands options over as a case-insensitive mapping of strings (keys arrive lower-cased).
:func:`parse_source_options` and :func:`parse_sink_options` validate everything up front, on the
driver when the query starts, and raise :class:`OptionError` naming the offending option.  The
result is a frozen dataclass of plain values, so it pickles cheaply into executor tasks.

Starting position precedence is Kafka's: ``startingTimestamp`` > ``startingOffsetsByTimestamp``
> ``startingOffsets``; they only matter when a query starts without a checkpoint.
docs/connector.md lists every option with its default.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketq.client.config import ClientConfig
from rocketq.client.remoting.vocabulary import NAME_PATTERN, ExpressionType
from rocketq.connector.errors import OptionError
from rocketq.connector.offsets import OffsetMap
from rocketq.connector.poison import (
    SINK_VALUE_KEYS,
    SOURCE_VALUE_KEYS,
    ValueOptions,
    parse_sink_value_format,
    parse_value_options,
)
from rocketq.connector.values import ValueFormat

SPARK_INJECTED = frozenset({"path", "checkpointlocation", "queryname"})
TOPIC_RE = re.compile(NAME_PATTERN)
_DURATION_RE = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000
MAX_PULL_BYTES = 15 * 1024 * 1024  # a pull response must fit in one 16 MiB remoting frame
DEFAULT_PULL_BATCH_SIZE = 8192
DEFAULT_PULL_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_PULL_TIMEOUT_MS = 10_000
DEFAULT_PRODUCER_GROUP = "spark-rocketmq-sink"
DEFAULT_SEND_TIMEOUT_MS = 3000
DEFAULT_SEND_RETRIES = 2
DEFAULT_BATCH_MAX_MESSAGES = 1024
DEFAULT_BATCH_MAX_BYTES = 1024 * 1024
DEFAULT_MAX_INFLIGHT_QUEUES = 16

SOURCE_KEYS = frozenset(
    {
        "nameserver", "namesrvaddr", "topic", "topicpattern", "group", "startingoffsets",
        "startingtimestamp", "startingoffsetsbytimestamp", "endingoffsets", "maxmessagespertrigger",
        "minmessagespertrigger", "maxtriggerdelay", "subexpression", "failondataloss",
        "minpartitions", "maxpartitions", "pullbatchsize", "pullmaxbytes", "pulltimeoutms",
        "commitoffsets", "tls", "tlstrustcertpath", "accesskey", "secretkey",
        "sqlfilter", "pushfilters", "enablemsgtrace", "tracetopic",
    }
) | SOURCE_VALUE_KEYS  # fmt: skip
SINK_KEYS = frozenset(
    {
        "nameserver", "namesrvaddr", "topic", "producergroup", "sendtimeoutms", "sendretries",
        "batchmaxmessages", "batchmaxbytes", "deliveryguarantee", "maxinflightqueues",
        "transactionalid", "committimeoutms", "tls", "tlstrustcertpath", "accesskey", "secretkey",
        "enablemsgtrace", "tracetopic",
    }
) | SINK_VALUE_KEYS  # fmt: skip


class StartMode(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    COMMITTED = "committed"
    OFFSETS = "offsets"  # explicit JSON
    TIMESTAMP = "timestamp"  # one timestamp for every queue
    TIMESTAMP_PER_QUEUE = "timestamp_per_queue"


class DeliveryGuarantee(enum.Enum):
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


_GUARANTEES = {"atleastonce": DeliveryGuarantee.AT_LEAST_ONCE, "exactlyonce": DeliveryGuarantee.EXACTLY_ONCE}
SINK_ID_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
DEFAULT_COMMIT_TIMEOUT_MS = 10_000


@dataclass(frozen=True, slots=True)
class StartSpec:
    """Where a query without a checkpoint (or a batch read) begins."""

    mode: StartMode
    offsets: OffsetMap | None = None  # OFFSETS (may hold -2/-1) and TIMESTAMP_PER_QUEUE (ms)
    timestamp_ms: int | None = None  # TIMESTAMP


@dataclass(frozen=True, slots=True)
class EndSpec:
    """Where a batch read stops: ``latest`` or explicit offsets (``-1`` = latest)."""

    latest: bool = True
    offsets: OffsetMap | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceOptions:
    name_server: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    group: str
    group_is_default: bool = True
    starting: StartSpec = StartSpec(StartMode.LATEST)
    ending: EndSpec = EndSpec()
    max_messages_per_trigger: int | None = None
    min_messages_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    sub_expression: str = "*"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    #: None: one Spark task per queue range (Kafka's default); see docs/connector.md "Partitions"
    max_partitions: int | None = None
    pull_batch_size: int = DEFAULT_PULL_BATCH_SIZE
    pull_max_bytes: int = DEFAULT_PULL_MAX_BYTES
    pull_timeout_ms: int = DEFAULT_PULL_TIMEOUT_MS
    commit_offsets: bool = True
    #: client settings of every connection (TLS: options ``tls``, ``tlsTrustCertPath``)
    client: ClientConfig = field(default_factory=ClientConfig)
    #: ``sqlFilter``: a SQL92 expression the broker applies instead of the tag filter
    sql_filter: str | None = None
    #: ``pushFilters``: batch reads take Spark's filters (rocketq.connector.pushdown)
    push_filters: bool = False
    #: ``valueFormat``, ``valueSchema``, ``onDecodeError`` ... (rocketq.connector.values)
    values: ValueOptions = field(default_factory=ValueOptions)
    #: ``enableMsgTrace``/``traceTopic``: SubBefore/SubAfter of the rows read (rocketq.connector.tracing)
    enable_msg_trace: bool = False
    trace_topic: str | None = None

    def __post_init__(self) -> None:
        if bool(self.topics) == bool(self.topic_pattern):
            raise OptionError("topic", "give exactly one of 'topic' and 'topicPattern'")
        cap = self.max_partitions
        if self.min_partitions is not None and cap is not None and self.min_partitions > cap:
            raise OptionError(
                "minPartitions", f"{self.min_partitions} exceeds maxPartitions={self.max_partitions}"
            )

    @property
    def tags(self) -> frozenset[str] | None:
        """The tag set of ``subExpression``, or None for ``*`` (everything)."""
        return parse_tag_expression(self.sub_expression)

    @property
    def pull_expression(self) -> str:
        """The subscription expression of every pull: ``sqlFilter``, else ``subExpression``."""
        return self.sql_filter if self.sql_filter is not None else self.sub_expression

    @property
    def pull_expression_type(self) -> ExpressionType:
        return ExpressionType.TAG if self.sql_filter is None else ExpressionType.SQL92

    def matches_topic(self, topic: str) -> bool:
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None
        return topic in self.topics


@dataclass(frozen=True, kw_only=True, slots=True)
class SinkOptions:
    name_server: str
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


# -- small typed getters ---------------------------------------------------------------------


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    """Spark passes a case-insensitive dict; normalise any mapping to lower-case keys."""
    return {str(k).lower(): v for k, v in options.items()}


def _get(options: Mapping[str, str], key: str) -> str | None:
    value = options.get(key.lower())
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def _int(options: Mapping[str, str], key: str, default: int | None, *, low: int = 0) -> int | None:
    text = _get(options, key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise OptionError(key, f"expected an integer, got {text!r}") from None
    if value < low:
        raise OptionError(key, f"must be >= {low}, got {value}")
    return value


def _req_int(options: Mapping[str, str], key: str, default: int, *, low: int = 0) -> int:
    value = _int(options, key, default, low=low)
    assert value is not None
    return value


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    text = _get(options, key)
    if text is None:
        return default
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise OptionError(key, f"expected true or false, got {text!r}")


def parse_duration_ms(key: str, text: str) -> int:
    """``"15m"``, ``"30s"``, ``"500ms"``, ``"1h"``, ``"2d"``; a bare number is milliseconds."""
    match = _DURATION_RE.match(text)
    if not match:
        raise OptionError(key, f"expected a duration such as '30s', '15m' or '500ms', got {text!r}")
    return int(match.group(1)) * _DURATION_UNITS_MS[(match.group(2) or "ms").lower()]


def parse_tag_expression(expression: str) -> frozenset[str] | None:
    """``"*"`` -> None; ``"TagA || TagB"`` -> {"TagA", "TagB"} (RocketMQ's TAG expression)."""
    text = expression.strip()
    if not text or text == "*":
        return None
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    return tags or None


def _client_config(options: Mapping[str, str]) -> ClientConfig:
    """The client settings from the ``tls`` and ``tlsTrustCertPath`` options."""
    trust = _get(options, "tlsTrustCertPath")
    if trust is not None and not os.path.isfile(trust):
        raise OptionError("tlsTrustCertPath", f"{trust!r} is not a readable file")
    # ACL: options accessKey/secretKey sign every request (docs/security.md "ACL")
    access_key, secret_key = _get(options, "accessKey"), _get(options, "secretKey")
    if (access_key is None) != (secret_key is None):
        missing = "accessKey" if access_key is None else "secretKey"
        raise OptionError(missing, "accessKey and secretKey go together")
    return ClientConfig(
        use_tls=_bool(options, "tls", False),
        tls_trust_cert_path=trust,
        access_key=access_key,
        secret_key=secret_key,
    )


def _check_unknown(options: Mapping[str, str], known: frozenset[str], what: str) -> None:
    for key in options:
        low = str(key).lower()
        if low not in known and low not in SPARK_INJECTED:
            raise OptionError(str(key), f"unknown {what} option; known options: {', '.join(sorted(known))}")


def _name_server(options: Mapping[str, str]) -> str:
    value = _get(options, "nameServer") or _get(options, "namesrvAddr")
    if value is None:
        raise OptionError("nameServer", "required (the NameServer address, e.g. '127.0.0.1:9876')")
    for addr in value.replace(",", ";").split(";"):
        host, sep, port = addr.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise OptionError("nameServer", f"expected 'host:port[;host:port...]', got {value!r}")
    return value


# -- source ----------------------------------------------------------------------------------


def _topics(options: Mapping[str, str]) -> tuple[tuple[str, ...], str | None]:
    topic_text = _get(options, "topic")
    pattern = _get(options, "topicPattern")
    if topic_text and pattern:
        raise OptionError("topic", "give only one of 'topic' and 'topicPattern'")
    if pattern:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError("topicPattern", f"not a valid regular expression: {exc}") from None
        return (), pattern
    if not topic_text:
        raise OptionError("topic", "required: a topic, several comma-separated, or use 'topicPattern'")
    topics = tuple(sorted({t.strip() for t in topic_text.split(",") if t.strip()}))
    for topic in topics:
        if not TOPIC_RE.match(topic) or len(topic) > 127:
            raise OptionError("topic", f"{topic!r} is not a valid RocketMQ topic name")
    return topics, None


def _offsets_json(key: str, text: str, *, allow_sentinels: bool) -> OffsetMap:
    try:
        return OffsetMap.from_json(text, allow_sentinels=allow_sentinels)
    except ValueError as exc:
        raise OptionError(key, f'{exc}; expected JSON like {{"topic": {{"broker-a:0": 42}}}}') from None


def _starting(options: Mapping[str, str], *, batch: bool | None) -> StartSpec:
    ts_text = _get(options, "startingTimestamp")
    if ts_text is not None:
        ts = _int(options, "startingTimestamp", None)
        return StartSpec(StartMode.TIMESTAMP, timestamp_ms=ts)
    by_ts = _get(options, "startingOffsetsByTimestamp")
    if by_ts is not None:
        return StartSpec(
            StartMode.TIMESTAMP_PER_QUEUE,
            offsets=_offsets_json("startingOffsetsByTimestamp", by_ts, allow_sentinels=False),
        )
    text = _get(options, "startingOffsets")
    if text is None:
        return StartSpec(StartMode.LATEST if batch is False else StartMode.EARLIEST)
    if text.startswith("{"):
        return StartSpec(
            StartMode.OFFSETS, offsets=_offsets_json("startingOffsets", text, allow_sentinels=True)
        )
    try:
        mode = StartMode(text.lower())
    except ValueError:
        mode = StartMode.OFFSETS
    if mode in (StartMode.OFFSETS, StartMode.TIMESTAMP, StartMode.TIMESTAMP_PER_QUEUE):
        raise OptionError(
            "startingOffsets", f"expected earliest, latest, committed or a JSON object, got {text!r}"
        )
    if batch and mode is StartMode.LATEST:
        raise OptionError(
            "startingOffsets", "'latest' is not allowed for batch reads (nothing would be read)"
        )
    return StartSpec(mode)


def _ending(options: Mapping[str, str], *, batch: bool | None) -> EndSpec:
    text = _get(options, "endingOffsets")
    if text is None:
        return EndSpec()
    if batch is False:
        raise OptionError("endingOffsets", "only applies to batch reads (spark.read), not to streaming")
    if text.lower() == "latest":
        return EndSpec()
    if not text.startswith("{"):
        raise OptionError("endingOffsets", f"expected 'latest' or a JSON object, got {text!r}")
    offsets = _offsets_json("endingOffsets", text, allow_sentinels=True)
    bad = [str(q) for q, o in offsets.items() if o == -2]
    if bad:
        raise OptionError(
            "endingOffsets", f"-2 (earliest) is not allowed as an ending offset ({', '.join(bad)})"
        )
    return EndSpec(latest=False, offsets=offsets)


def default_group(
    topics: tuple[str, ...], pattern: str | None, sub_expression: str, sql_filter: str | None = None
) -> str:
    """The consumer group used for committed offsets when ``group`` is not given.

    Derived from what the query reads (topics or pattern, the tag or SQL92 filter), so a restarted
    query, and ``startingOffsets=committed`` in a new query over the same topics, use the same
    group.  Give ``group`` explicitly when several queries read the same topics.
    """
    read: dict[str, object] = {"topics": list(topics), "pattern": pattern, "sub": sub_expression.strip()}
    if sql_filter is not None:  # only then, so groups derived before sqlFilter existed keep their name
        read["sql"] = sql_filter
    what = json.dumps(read, sort_keys=True)
    digest = hashlib.sha1(what.encode("utf-8")).hexdigest()[:12]
    return f"spark-rocketmq-{digest}"


def default_max_partitions() -> int | None:
    """Default for ``maxPartitions``: None, no cap -- one Spark task per queue range, as Kafka's
    source does.  A Python data source runs in a Python worker that cannot see the cluster's
    parallelism (docs/connector.md "Partitions"), and the driver's CPU count says nothing about it."""
    return None


def parse_source_options(options: Mapping[str, str], *, batch: bool | None = False) -> SourceOptions:
    """Validate the source options.

    ``batch=True`` applies spark.read rules (endingOffsets allowed, no 'latest' start),
    ``False`` streaming rules, ``None`` only the checks common to both (used by ``schema()``,
    which runs at ``load()`` before Spark says which kind of read it is).
    """
    options = _lower(options)
    _check_unknown(options, SOURCE_KEYS, "source")
    name_server = _name_server(options)
    topics, pattern = _topics(options)
    sub_expression = _get(options, "subExpression") or "*"
    if "|" in sub_expression.replace("||", "") or sub_expression.strip().startswith("||"):
        raise OptionError("subExpression", f"expected '*' or 'TagA || TagB', got {sub_expression!r}")
    group = _get(options, "group")
    max_parts = _int(options, "maxPartitions", default_max_partitions(), low=1)
    min_parts = _int(options, "minPartitions", None, low=1)
    delay_text = _get(options, "maxTriggerDelay")
    max_rows = _int(options, "maxMessagesPerTrigger", None, low=1)
    min_rows = _int(options, "minMessagesPerTrigger", None, low=1)
    if max_rows is not None and min_rows is not None and min_rows > max_rows:
        raise OptionError("minMessagesPerTrigger", f"{min_rows} exceeds maxMessagesPerTrigger={max_rows}")
    pull_max_bytes = _req_int(options, "pullMaxBytes", DEFAULT_PULL_MAX_BYTES, low=1024)
    if pull_max_bytes > MAX_PULL_BYTES:
        raise OptionError("pullMaxBytes", f"must be <= {MAX_PULL_BYTES} (one remoting frame)")
    return SourceOptions(
        name_server=name_server,
        topics=topics,
        topic_pattern=pattern,
        group=group or default_group(topics, pattern, sub_expression, _get(options, "sqlFilter")),
        group_is_default=group is None,
        starting=_starting(options, batch=batch),
        ending=_ending(options, batch=batch),
        max_messages_per_trigger=max_rows,
        min_messages_per_trigger=min_rows,
        max_trigger_delay_ms=(
            parse_duration_ms("maxTriggerDelay", delay_text) if delay_text else DEFAULT_MAX_TRIGGER_DELAY_MS
        ),
        sub_expression=sub_expression.strip(),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        min_partitions=min_parts,
        max_partitions=max_parts,
        pull_batch_size=_req_int(options, "pullBatchSize", DEFAULT_PULL_BATCH_SIZE, low=1),
        pull_max_bytes=pull_max_bytes,
        pull_timeout_ms=_req_int(options, "pullTimeoutMs", DEFAULT_PULL_TIMEOUT_MS, low=100),
        commit_offsets=_bool(options, "commitOffsets", True),
        client=_client_config(options),
        sql_filter=_sql_filter(options, sub_expression),
        push_filters=_push_filters(options, batch=batch),
        values=parse_value_options(options, topics=topics),
        enable_msg_trace=_bool(options, "enableMsgTrace", False),
        trace_topic=_trace_topic(options),
    )


def _sql_filter(options: Mapping[str, str], sub_expression: str) -> str | None:
    """``sqlFilter``: a SQL92 expression, exclusive with a tag ``subExpression``."""
    sql_filter = _get(options, "sqlFilter")
    if sql_filter is not None and sub_expression.strip() not in ("", "*"):
        raise OptionError(
            "sqlFilter",
            "give either 'sqlFilter' (SQL92) or 'subExpression' (tags), not both; "
            "a SQL92 filter can test tags itself: TAGS IN ('a', 'b')",
        )
    return sql_filter


def _push_filters(options: Mapping[str, str], *, batch: bool | None) -> bool:
    """``pushFilters``: batch reads only (Spark pushes no filters into Python streams)."""
    push = _bool(options, "pushFilters", False)
    if push and batch is False:
        raise OptionError(
            "pushFilters", "only applies to batch reads (spark.read); Spark pushes no filters to streams"
        )
    return push


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the sink options."""
    options = _lower(options)
    _check_unknown(options, SINK_KEYS, "sink")
    topic = _get(options, "topic")
    if topic is not None and not TOPIC_RE.match(topic):
        raise OptionError("topic", f"{topic!r} is not a valid RocketMQ topic name")
    text = _get(options, "deliveryGuarantee") or "atLeastOnce"
    guarantee = _GUARANTEES.get(text.replace("_", "").replace("-", "").lower())
    if guarantee is None:
        raise OptionError("deliveryGuarantee", f"expected 'atLeastOnce' or 'exactlyOnce', got {text!r}")
    batch_bytes = _req_int(options, "batchMaxBytes", DEFAULT_BATCH_MAX_BYTES, low=1024)
    if batch_bytes > 4 * 1024 * 1024:
        raise OptionError("batchMaxBytes", "must be <= 4194304 (the broker's maxMessageSize)")
    client = _client_config(options)  # TLS and ACL credentials: every connection, both guarantees
    return SinkOptions(
        client=client,
        name_server=_name_server(options),
        topic=topic,
        producer_group=_get(options, "producerGroup") or DEFAULT_PRODUCER_GROUP,
        send_timeout_ms=_req_int(options, "sendTimeoutMs", DEFAULT_SEND_TIMEOUT_MS, low=1),
        send_retries=_req_int(options, "sendRetries", DEFAULT_SEND_RETRIES, low=0),
        batch_max_messages=_req_int(options, "batchMaxMessages", DEFAULT_BATCH_MAX_MESSAGES, low=1),
        batch_max_bytes=batch_bytes,
        max_inflight_queues=_req_int(options, "maxInflightQueues", DEFAULT_MAX_INFLIGHT_QUEUES, low=1),
        delivery_guarantee=guarantee,
        sink_id=_sink_id(options) if guarantee is DeliveryGuarantee.EXACTLY_ONCE else None,
        commit_timeout_ms=_req_int(options, "commitTimeoutMs", DEFAULT_COMMIT_TIMEOUT_MS, low=100),
        value_format=parse_sink_value_format(options),
        enable_msg_trace=_bool(options, "enableMsgTrace", False),
        trace_topic=_trace_topic(options),
    )


def _trace_topic(options: Mapping[str, str]) -> str | None:
    """``traceTopic``: the topic of message traces (default RMQ_SYS_TRACE_TOPIC)."""
    topic = _get(options, "traceTopic")
    if topic is not None and not TOPIC_RE.match(topic):
        raise OptionError("traceTopic", f"{topic!r} is not a valid RocketMQ topic name")
    return topic


def _sink_id(options: Mapping[str, str]) -> str | None:
    """``transactionalId``, else a hash of the absolute ``checkpointLocation`` (streaming)."""
    explicit = _get(options, "transactionalId")
    if explicit is not None:
        if not SINK_ID_RE.match(explicit):
            raise OptionError(
                "transactionalId", f"expected 1-64 characters of [a-zA-Z0-9_-], got {explicit!r}"
            )
        return explicit
    location = _get(options, "checkpointLocation")
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
