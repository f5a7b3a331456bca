"""Parsing of the ``rocketmq`` data source options, once, into frozen dataclasses.

Spark hands options over as a case-insensitive mapping of strings (keys arrive lower-cased).
:func:`parse_source_options` (here) and :func:`parse_sink_options`
(:mod:`rocketq.connector.sink_options`) validate everything up front, on the driver when the
query starts, and raise :class:`OptionError` naming the offending option.  The result is a frozen
dataclass of plain values, so it pickles cheaply into executor tasks.  A source's value options
(``valueFormat``, ``valueSchema``, ``onDecodeError``, ``propertyColumns`` ...) are parsed here
into :class:`ValueOptions`; starting and ending positions in :mod:`rocketq.connector.option_positions`.
docs/connector.md lists every option with its default.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from rocketq.client.config import ClientConfig
from rocketq.client.remoting.vocabulary import MAX_GROUP_LENGTH, ExpressionType, MessageQueue
from rocketq.connector.errors import OptionError
from rocketq.connector.offsets import parse_queue_key
from rocketq.connector.option_positions import EndSpec, StartMode, StartSpec, parse_ending, parse_starting
from rocketq.connector.option_text import (
    CLIENT_KEYS,
    TOPIC_RE,
    aliased,
    check_unknown,
    client_config,
    get_bool,
    get_int,
    get_name_server,
    get_req_int,
    get_text,
    is_topic_name,
    lower_keys,
    parse_duration_ms,
    trace_topic,
    value_format,
)
from rocketq.connector.retry import RETRY_OPTION_KEYS, RetryPolicy, retry_policy
from rocketq.connector.schema import COLUMN_NAMES
from rocketq.connector.sink_options import DeliveryGuarantee, SinkOptions, parse_sink_options, require_sink_id
from rocketq.connector.value_types import (
    DDLError,
    DecodeErrorPolicy,
    ValueFormat,
    arrow_value_type,
    parse_ddl,
)

__all__ = [
    "DEFAULT_GROUP_ID_PREFIX",
    "TOPIC_RE",
    "DeliveryGuarantee",
    "EndSpec",
    "SinkOptions",
    "SourceOptions",
    "StartMode",
    "StartSpec",
    "ValueOptions",
    "generated_group",
    "parse_duration_ms",
    "parse_sink_options",
    "parse_source_options",
    "parse_tag_expression",
    "require_sink_id",
]

DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000
MAX_PULL_BYTES = 15 * 1024 * 1024  # a pull response must fit in one 16 MiB remoting frame
DEFAULT_PULL_BATCH_SIZE = 8192
DEFAULT_PULL_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_PULL_TIMEOUT_MS = 10_000

SOURCE_VALUE_KEYS = frozenset(
    {
        "valueformat",
        "valueschema",
        "valueschemainference",
        "ondecodeerror",
        "deadlettertopic",
        "decodestatspath",
        "propertycolumns",
    }
)
MAX_INFERENCE_SAMPLE = 100_000
#: the producer group of the dead letters a source sends (``onDecodeError=deadLetter``)
DEAD_LETTER_PRODUCER_GROUP = "spark-rocketmq-dead-letter"
PROPERTY_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "double": pa.float64()
}  # fmt: skip
_POLICIES = {p.value.lower(): p for p in DecodeErrorPolicy}
_PROPERTY_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")
_TYPE_ALIASES = {"integer": "int", "long": "bigint"}

SOURCE_KEYS = frozenset(
    {
        "nameserver", "namesrvaddr", "topic", "topicpattern", "group", "startingoffsets",
        "startingtimestamp", "startingoffsetsbytimestamp", "endingoffsets", "maxmessagespertrigger",
        "startingoffsetsbytimestampstrategy", "endingtimestamp", "endingoffsetsbytimestamp",
        "minmessagespertrigger", "maxtriggerdelay", "subexpression", "failondataloss",
        "minpartitions", "maxpartitions", "pullbatchsize", "pullmaxbytes", "pulltimeoutms",
        "commitoffsets", "tls", "tlstrustcertpath", "accesskey", "secretkey",
        "sqlfilter", "pushfilters", "enablemsgtrace", "tracetopic",
    }
) | SOURCE_VALUE_KEYS | CLIENT_KEYS  # fmt: skip
#: Spark's Kafka source option names accepted as they are (docs/connector.md "Kafka option map")
KAFKA_SOURCE_KEYS = frozenset(
    {"subscribe", "subscribepattern", "assign", "maxoffsetspertrigger", "minoffsetspertrigger",
     "groupidprefix"}
)  # fmt: skip
SOURCE_KEYS = SOURCE_KEYS | KAFKA_SOURCE_KEYS
SOURCE_KEYS = SOURCE_KEYS | RETRY_OPTION_KEYS  # fetchOffset.numRetries, fetchOffset.retryIntervalMs
#: ``groupIdPrefix``: the generated group of a query without ``group`` is ``<prefix>-<32 hex digits>``
DEFAULT_GROUP_ID_PREFIX = "spark-rocketmq-source"
#: the options naming what a source reads; exactly one of them is given
_WHAT_TO_READ = ("topic", "subscribe", "topicPattern", "subscribePattern", "assign")


@dataclass(frozen=True, slots=True)
class ValueOptions:
    """``valueFormat``, ``valueSchema`` and the poison-message policy of a source (or a sink's format)."""

    value_format: ValueFormat = ValueFormat.BINARY
    #: DDL of the ``value`` column (json, msgpack); None for binary and string
    value_schema: str | None = None
    #: ``valueSchemaInference``: messages sampled by ``schema()`` when no valueSchema is given
    inference_sample: int | None = None
    on_decode_error: DecodeErrorPolicy = DecodeErrorPolicy.FAIL
    dead_letter_topic: str | None = None
    #: a directory (seen by the driver and the executors) receiving per-task decode counts
    stats_path: str | None = None
    #: ``propertyColumns``: message properties also given as top-level columns (pushable)
    property_columns: tuple[str, ...] = ()
    #: their types, ``string``, ``int``, ``bigint`` or ``double`` (parallel to property_columns)
    property_types: tuple[str, ...] = ()

    def property_map(self) -> dict[str, str]:
        """Property column name -> its type name."""
        return dict(zip(self.property_columns, self.property_types, strict=True))

    @property
    def typed(self) -> bool:
        return self.value_format is not ValueFormat.BINARY

    def extra_names(self) -> tuple[str, ...]:
        """The names of the columns after the fixed source schema."""
        value: tuple[str, ...] = ()
        if self.typed:
            value = ("value", "decodeError") if self.on_decode_error is DecodeErrorPolicy.NULL else ("value",)
        return value + self.property_columns

    def value_type(self) -> pa.DataType | None:
        return arrow_value_type(self.value_format, self.value_schema)

    def extra_fields(self) -> list[pa.Field]:
        """The columns after the fixed source schema: ``value`` and, for ``onDecodeError=null``,
        ``decodeError``."""
        typ = self.value_type()
        out = [] if typ is None else [pa.field("value", typ)]
        if typ is not None and self.on_decode_error is DecodeErrorPolicy.NULL:
            out.append(pa.field("decodeError", pa.string()))
        return out + [
            pa.field(name, PROPERTY_TYPES[t])
            for name, t in zip(self.property_columns, self.property_types, strict=True)
        ]


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceOptions:
    name_server: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    #: ``assign``: the only queues read (of ``topics``); None reads every queue of the topics
    assigned: frozenset[MessageQueue] | None = None
    group: str
    group_is_default: bool = True
    starting: StartSpec = field(default_factory=lambda: StartSpec(StartMode.LATEST))
    ending: EndSpec = field(default_factory=EndSpec)
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
    #: ``fetchOffset.numRetries``/``fetchOffset.retryIntervalMs``: retries of look-ups and pulls
    retry: RetryPolicy = field(default_factory=RetryPolicy)

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

    def keep_assigned(self, queues: Mapping[MessageQueue, str]) -> dict[MessageQueue, str]:
        """``queues`` (discovered queue -> broker address) narrowed to ``assign``, if given."""
        if self.assigned is None:
            return dict(queues)
        return {q: a for q, a in queues.items() if q in self.assigned}

    def matches_topic(self, topic: str) -> bool:
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None
        return topic in self.topics

    def dead_letter_sink(self) -> SinkOptions | None:
        """The options of the sink that sends this source's dead letters (``onDecodeError=deadLetter``:
        the ``deadLetterTopic``, this source's NameServer and client settings); None without one."""
        topic = self.values.dead_letter_topic
        if topic is None:
            return None
        return SinkOptions(
            name_server=self.name_server,
            topic=topic,
            producer_group=DEAD_LETTER_PRODUCER_GROUP,
            client=self.client,
        )


def parse_tag_expression(expression: str) -> frozenset[str] | None:
    """``"*"`` -> None; ``"TagA || TagB"`` -> {"TagA", "TagB"} (RocketMQ's TAG expression)."""
    text = expression.strip()
    if not text or text == "*":
        return None
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    return tags or None


# -- values ----------------------------------------------------------------------------------


def _inference_sample(options: Mapping[str, str]) -> int | None:
    text = get_text(options, "valueSchemaInference")
    if text is None:
        return None
    if not text.isdigit() or not 1 <= int(text) <= MAX_INFERENCE_SAMPLE:
        raise OptionError(
            "valueSchemaInference", f"expected 1..{MAX_INFERENCE_SAMPLE} messages, got {text!r}"
        )
    return int(text)


def _value_schema(options: Mapping[str, str], fmt: ValueFormat, sample: int | None) -> str | None:
    """``valueSchema``: required (or ``valueSchemaInference``) for json and msgpack, only for them."""
    schema = get_text(options, "valueSchema")
    if fmt in (ValueFormat.BINARY, ValueFormat.STRING) and (schema or sample):
        raise OptionError("valueSchema", f"only applies to valueFormat=json or msgpack, not {fmt.value}")
    if fmt in (ValueFormat.JSON, ValueFormat.MSGPACK):
        if schema is None and sample is None:
            raise OptionError(
                "valueSchema",
                f"valueFormat={fmt.value} needs the value's type: a DDL string such as "
                "'id bigint, name string', or valueSchemaInference=<messages to sample>",
            )
        if schema is not None:
            try:
                parse_ddl(schema)
            except DDLError as exc:
                raise OptionError("valueSchema", str(exc)) from None
    return schema


def _dead_letter_topic(
    options: Mapping[str, str], policy: DecodeErrorPolicy, topics: tuple[str, ...]
) -> str | None:
    dead = get_text(options, "deadLetterTopic")
    if policy is DecodeErrorPolicy.DEAD_LETTER:
        if dead is None:
            raise OptionError("deadLetterTopic", "required with onDecodeError=deadLetter")
        if not is_topic_name(dead):
            raise OptionError("deadLetterTopic", f"{dead!r} is not a valid RocketMQ topic name")
        if dead in topics:
            raise OptionError("deadLetterTopic", f"{dead!r} is a topic this query reads")
    elif dead is not None:
        raise OptionError("deadLetterTopic", "only applies to onDecodeError=deadLetter")
    return dead


def parse_value_options(options: Mapping[str, str], *, topics: tuple[str, ...] = ()) -> ValueOptions:
    """The value options of a source, from lower-cased options (errors name the option)."""
    fmt = value_format(options)
    sample = _inference_sample(options)
    schema = _value_schema(options, fmt, sample)
    policy_text = get_text(options, "onDecodeError") or "fail"
    policy = _POLICIES.get(policy_text.lower())
    if policy is None:
        known = ", ".join(p.value for p in DecodeErrorPolicy)
        raise OptionError("onDecodeError", f"expected one of {known}, got {policy_text!r}")
    dead = _dead_letter_topic(options, policy, topics)
    if policy is not DecodeErrorPolicy.FAIL and fmt is ValueFormat.BINARY:
        raise OptionError("onDecodeError", "needs a valueFormat other than binary (binary never fails)")
    stats = get_text(options, "decodeStatsPath")
    names, types = _property_columns(options)
    return ValueOptions(fmt, schema, sample, policy, dead, stats, names, types)


def _property_columns(options: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``propertyColumns``: ``name[:type]`` items, each becoming a column of that name and type."""
    text = get_text(options, "propertyColumns")
    if text is None:
        return (), ()
    names: list[str] = []
    types: list[str] = []
    for item in text.split(","):
        name, _, kind = (part.strip() for part in item.partition(":"))
        kind = _TYPE_ALIASES.get(kind.lower(), kind.lower()) or "string"
        if kind not in PROPERTY_TYPES:
            raise OptionError(
                "propertyColumns", f"{item.strip()!r}: the type must be one of {', '.join(PROPERTY_TYPES)}"
            )
        names.append(name)
        types.append(kind)
    taken = {c.lower(): c for c in (*COLUMN_NAMES, "value", "decodeError")}
    seen: set[str] = set()
    for name in names:
        if not _PROPERTY_NAME.match(name):
            raise OptionError(
                "propertyColumns",
                f"{name!r} is not a property name a column can have: letters, digits, '_' and '$', "
                "not starting with a digit (read other properties as properties['name'])",
            )
        if name.lower() in taken:
            raise OptionError(
                "propertyColumns",
                f"{name!r} would hide the column {taken[name.lower()]!r}; read it as properties['{name}']",
            )
        if name.lower() in seen:
            raise OptionError("propertyColumns", f"{name!r} is listed twice (column names ignore case)")
        seen.add(name.lower())
    return tuple(names), tuple(types)


# -- source ----------------------------------------------------------------------------------


def _what_to_read(options: Mapping[str, str]) -> str:
    """The one option of ``topic``, ``subscribe``, ``topicPattern``, ``subscribePattern`` and
    ``assign`` that is given (Kafka's rule: exactly one)."""
    given = [key for key in _WHAT_TO_READ if get_text(options, key) is not None]
    if len(given) != 1:
        what = "none of them is" if not given else f"{' and '.join(given)} are"
        raise OptionError(
            given[0] if given else "topic",
            f"give exactly one of {', '.join(_WHAT_TO_READ)} ({what} given): 'topic'/'subscribe' name "
            "topics (comma-separated), 'topicPattern'/'subscribePattern' a regular expression, 'assign' "
            'queues as JSON {"topic": ["brokerName:queueId", ...]}',
        )
    return given[0]


def _topic_list(key: str, text: str) -> tuple[str, ...]:
    topics = tuple(sorted({t.strip() for t in text.split(",") if t.strip()}))
    if not topics:
        raise OptionError(key, "names no topic: give one or several comma-separated topics")
    for topic in topics:
        if not is_topic_name(topic):
            raise OptionError(key, f"{topic!r} is not a valid RocketMQ topic name")
    return topics


def parse_assign(text: str) -> frozenset[MessageQueue]:
    """``assign``: ``{"topic": ["brokerName:queueId", ...]}`` -- the queue keys of the offset JSON."""
    usage = (
        'expected JSON {"topic": ["brokerName:queueId", ...]}, e.g. {"orders": ["broker-a:0", "broker-a:1"]}'
    )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError("assign", f"malformed JSON ({exc.msg} at char {exc.pos}); {usage}") from None
    if not isinstance(data, dict) or not data:
        raise OptionError("assign", usage)
    queues: set[MessageQueue] = set()
    for topic, keys in data.items():
        if not is_topic_name(str(topic)):
            raise OptionError("assign", f"{topic!r} is not a valid RocketMQ topic name")
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            raise OptionError("assign", f"topic {topic!r}: a non-empty list of queue keys; {usage}")
        for key in keys:
            try:
                queues.add(parse_queue_key(str(topic), key))
            except ValueError as exc:
                raise OptionError("assign", f"topic {topic!r}: {exc}; {usage}") from None
    return frozenset(queues)


def _topics(
    options: Mapping[str, str],
) -> tuple[tuple[str, ...], str | None, frozenset[MessageQueue] | None]:
    """(topics, pattern, assigned queues) from the one option naming what is read."""
    key = _what_to_read(options)
    text = get_text(options, key)
    assert text is not None
    if key in ("topicPattern", "subscribePattern"):
        try:
            re.compile(text)
        except re.error as exc:
            raise OptionError(key, f"not a valid regular expression: {exc}") from None
        return (), text, None
    if key == "assign":
        assigned = parse_assign(text)
        return tuple(sorted({q.topic for q in assigned})), None, assigned
    return _topic_list(key, text), None, None


def generated_group(prefix: str = DEFAULT_GROUP_ID_PREFIX) -> str:
    """A consumer group of its own for a query that names none: ``<prefix>-<uuid hex>``.

    As Spark's Kafka source does (``spark-kafka-source-<uuid>``), every query run gets a fresh
    group, so two queries over the same topics never commit to one group.  A restarted query keeps
    its position through its checkpoint, not through the group; ``startingOffsets=committed``
    therefore needs a ``group`` the user names.
    """
    return f"{prefix}-{uuid.uuid4().hex}"


def _group(options: Mapping[str, str], starting: StartSpec, *, batch: bool | None) -> tuple[str, bool]:
    """(consumer group, whether it was generated): ``group``, else one made with ``groupIdPrefix``."""
    group, prefix = get_text(options, "group"), get_text(options, "groupIdPrefix")
    if group is not None:
        if prefix is not None:
            raise OptionError("groupIdPrefix", "only applies without 'group' (it prefixes a generated group)")
        if not TOPIC_RE.match(group) or len(group) > MAX_GROUP_LENGTH:
            raise OptionError("group", f"{group!r} is not a valid RocketMQ group name")
        return group, False
    prefix = prefix or DEFAULT_GROUP_ID_PREFIX
    if not TOPIC_RE.match(prefix) or len(prefix) > MAX_GROUP_LENGTH - 33:
        raise OptionError(
            "groupIdPrefix",
            f"{prefix!r}: letters, digits, '_', '-', '%' or '|', at most {MAX_GROUP_LENGTH - 33} of them",
        )
    if starting.mode is StartMode.COMMITTED:
        raise OptionError(
            "startingOffsets",
            "'committed' reads the offsets a named consumer group committed: set 'group' (a query "
            "without one commits to a group generated for this run alone)",
        )
    return generated_group(prefix), True


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
    options = lower_keys(options)
    check_unknown(options, SOURCE_KEYS, "source")
    name_server = get_name_server(options)
    topics, pattern, assigned = _topics(options)
    sub_expression = get_text(options, "subExpression") or "*"
    if "|" in sub_expression.replace("||", "") or sub_expression.strip().startswith("||"):
        raise OptionError("subExpression", f"expected '*' or 'TagA || TagB', got {sub_expression!r}")
    starting = parse_starting(options, batch=batch)
    group, generated = _group(options, starting, batch=batch)
    max_parts = get_int(options, "maxPartitions", default_max_partitions(), low=1)
    min_parts = get_int(options, "minPartitions", None, low=1)
    delay_text = get_text(options, "maxTriggerDelay")
    max_key = aliased(options, "maxMessagesPerTrigger", "maxOffsetsPerTrigger")
    min_key = aliased(options, "minMessagesPerTrigger", "minOffsetsPerTrigger")
    max_rows = get_int(options, max_key, None, low=1)
    min_rows = get_int(options, min_key, None, low=1)
    if max_rows is not None and min_rows is not None and min_rows > max_rows:
        raise OptionError(min_key, f"{min_rows} exceeds {max_key}={max_rows}")
    pull_max_bytes = get_req_int(options, "pullMaxBytes", DEFAULT_PULL_MAX_BYTES, low=1024)
    if pull_max_bytes > MAX_PULL_BYTES:
        raise OptionError("pullMaxBytes", f"must be <= {MAX_PULL_BYTES} (one remoting frame)")
    return SourceOptions(
        name_server=name_server,
        topics=topics,
        topic_pattern=pattern,
        assigned=assigned,
        group=group,
        group_is_default=generated,
        starting=starting,
        ending=parse_ending(options, batch=batch),
        max_messages_per_trigger=max_rows,
        min_messages_per_trigger=min_rows,
        max_trigger_delay_ms=(
            parse_duration_ms("maxTriggerDelay", delay_text) if delay_text else DEFAULT_MAX_TRIGGER_DELAY_MS
        ),
        sub_expression=sub_expression.strip(),
        fail_on_data_loss=get_bool(options, "failOnDataLoss", True),
        min_partitions=min_parts,
        max_partitions=max_parts,
        pull_batch_size=get_req_int(options, "pullBatchSize", DEFAULT_PULL_BATCH_SIZE, low=1),
        pull_max_bytes=pull_max_bytes,
        pull_timeout_ms=get_req_int(options, "pullTimeoutMs", DEFAULT_PULL_TIMEOUT_MS, low=100),
        commit_offsets=get_bool(options, "commitOffsets", True),
        client=client_config(options),
        sql_filter=_sql_filter(options, sub_expression),
        push_filters=_push_filters(options, batch=batch),
        values=parse_value_options(options, topics=topics),
        enable_msg_trace=get_bool(options, "enableMsgTrace", False),
        trace_topic=trace_topic(options),
        retry=retry_policy(options),
    )


def _sql_filter(options: Mapping[str, str], sub_expression: str) -> str | None:
    """``sqlFilter``: a SQL92 expression, exclusive with a tag ``subExpression``."""
    sql_filter = get_text(options, "sqlFilter")
    if sql_filter is not None and sub_expression.strip() not in ("", "*"):
        raise OptionError(
            "sqlFilter",
            "give either 'sqlFilter' (SQL92) or 'subExpression' (tags), not both; "
            "a SQL92 filter can test tags itself: TAGS IN ('a', 'b')",
        )
    return sql_filter


def _push_filters(options: Mapping[str, str], *, batch: bool | None) -> bool:
    """``pushFilters``: batch reads only (Spark pushes no filters into Python streams)."""
    push = get_bool(options, "pushFilters", False)
    if push and batch is False:
        raise OptionError(
            "pushFilters", "only applies to batch reads (spark.read); Spark pushes no filters to streams"
        )
    return push
