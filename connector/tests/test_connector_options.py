"""Unit tests of option parsing (no Spark, no broker)."""

from __future__ import annotations

import pytest

from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.connector.errors import OptionError
from rocketq.connector.offsets import OffsetMap
from rocketq.connector.options import (
    DEFAULT_GROUP_ID_PREFIX,
    DEFAULT_MAX_TRIGGER_DELAY_MS,
    StartMode,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
    parse_tag_expression,
)

NS = {"nameserver": "127.0.0.1:9876"}


def src(**kw: str) -> dict[str, str]:
    return {**NS, "topic": "orders", **{k.lower(): v for k, v in kw.items()}}


def test_defaults_streaming() -> None:
    o = parse_source_options(src())
    assert o.topics == ("orders",)
    assert o.starting.mode is StartMode.LATEST
    assert o.sub_expression == "*" and o.tags is None
    assert o.fail_on_data_loss is True
    assert o.max_trigger_delay_ms == DEFAULT_MAX_TRIGGER_DELAY_MS
    assert o.max_partitions is None and o.min_partitions is None  # no cap: one task per queue range
    assert o.group.startswith(f"{DEFAULT_GROUP_ID_PREFIX}-") and o.group_is_default


def test_batch_defaults_to_earliest_and_rejects_latest() -> None:
    assert parse_source_options(src(), batch=True).starting.mode is StartMode.EARLIEST
    with pytest.raises(OptionError, match="startingOffsets"):
        parse_source_options(src(startingOffsets="latest"), batch=True)


def test_namesrvaddr_alias_and_several_topics() -> None:
    o = parse_source_options({"namesrvaddr": "h:1;h2:2", "topic": "b, a"})
    assert o.name_server == "h:1;h2:2"
    assert o.topics == ("a", "b")


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"topic": "t"}, "nameServer"),
        ({**NS}, "topic"),
        ({**NS, "topic": "t", "topicpattern": "t.*"}, "topic"),
        ({**NS, "topicpattern": "("}, "topicPattern"),
        ({**NS, "topic": "bad topic"}, "topic"),
        ({**NS, "topic": "t", "startingoffsets": "yesterday"}, "startingOffsets"),
        ({**NS, "topic": "t", "startingoffsets": "{not json"}, "startingOffsets"),
        ({**NS, "topic": "t", "startingoffsets": '{"t": {"0": 1}}'}, "startingOffsets"),
        ({**NS, "topic": "t", "startingoffsets": '{"t": {"b:0": -3}}'}, "startingOffsets"),
        ({**NS, "topic": "t", "startingoffsets": '{"t": {"b:0": "x"}}'}, "startingOffsets"),
        ({**NS, "topic": "t", "endingoffsets": "latest"}, "endingOffsets"),
        ({**NS, "topic": "t", "maxmessagespertrigger": "0"}, "maxMessagesPerTrigger"),
        ({**NS, "topic": "t", "maxmessagespertrigger": "ten"}, "maxMessagesPerTrigger"),
        (
            {**NS, "topic": "t", "maxmessagespertrigger": "5", "minmessagespertrigger": "6"},
            "minMessagesPerTrigger",
        ),
        ({**NS, "topic": "t", "maxtriggerdelay": "soon"}, "maxTriggerDelay"),
        ({**NS, "topic": "t", "failondataloss": "maybe"}, "failOnDataLoss"),
        ({**NS, "topic": "t", "minpartitions": "8", "maxpartitions": "4"}, "minPartitions"),
        ({**NS, "topic": "t", "subexpression": "A | B"}, "subExpression"),
        ({**NS, "topic": "t", "nosuchoption": "1"}, "nosuchoption"),
        ({"nameserver": "localhost", "topic": "t"}, "nameServer"),
        ({**NS, "topic": "t", "pullmaxbytes": str(64 * 1024 * 1024)}, "pullMaxBytes"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], option: str) -> None:
    with pytest.raises(OptionError) as info:
        parse_source_options(options)
    assert info.value.option == option
    assert f"'{option}'" in str(info.value)


def test_starting_precedence_is_kafkas() -> None:
    both = src(
        startingOffsets="earliest", startingOffsetsByTimestamp='{"orders": {"b:0": 5}}', startingTimestamp="7"
    )
    assert parse_source_options(both).starting.mode is StartMode.TIMESTAMP
    two = src(startingOffsets="earliest", startingOffsetsByTimestamp='{"orders": {"b:0": 5}}')
    spec = parse_source_options(two).starting
    assert spec.mode is StartMode.TIMESTAMP_PER_QUEUE
    assert spec.offsets == OffsetMap({MessageQueue("orders", "b", 0): 5})


def test_json_offsets_with_sentinels() -> None:
    o = parse_source_options(
        src(startingOffsets='{"orders": {"broker-a:1": -1, "broker-a:0": -2, "broker-b:0": 9}}')
    )
    assert o.starting.mode is StartMode.OFFSETS
    assert o.starting.offsets is not None
    assert list(o.starting.offsets.values()) == [-2, -1, 9]


def test_ending_offsets_batch_only_and_no_earliest() -> None:
    o = parse_source_options(src(endingOffsets='{"orders": {"b:0": 10, "b:1": -1}}'), batch=True)
    assert not o.ending.latest and o.ending.offsets is not None
    with pytest.raises(OptionError, match="endingOffsets"):
        parse_source_options(src(endingOffsets='{"orders": {"b:0": -2}}'), batch=True)


def test_case_insensitive_keys() -> None:
    o = parse_source_options({"NameServer": "h:1", "TOPIC": "t", "MaxMessagesPerTrigger": "5"})
    assert o.max_messages_per_trigger == 5


def test_durations_and_tags() -> None:
    assert parse_duration_ms("k", "15m") == 900_000
    assert parse_duration_ms("k", "30s") == 30_000
    assert parse_duration_ms("k", "250") == 250
    assert parse_tag_expression("*") is None
    assert parse_tag_expression("TagA || TagB ") == frozenset({"TagA", "TagB"})


def test_group_default_is_generated_per_query_and_explicit_wins() -> None:
    a = parse_source_options(src()).group
    assert a != parse_source_options(src()).group  # two queries on one topic: two groups
    assert parse_source_options(src(group="g1")).group == "g1"


def test_sink_options() -> None:
    o = parse_sink_options({**NS, "topic": "out"})
    assert o.topic == "out" and o.send_retries == 2
    with pytest.raises(OptionError, match="deliveryGuarantee"):
        parse_sink_options({**NS, "deliveryguarantee": "atMostOnce"})
    with pytest.raises(OptionError, match="batchMaxBytes"):
        parse_sink_options({**NS, "batchmaxbytes": str(8 * 1024 * 1024)})
    with pytest.raises(OptionError, match="startingoffsets"):
        parse_sink_options({**NS, "startingoffsets": "earliest"})
    # Spark adds these to sink options itself
    parse_sink_options({**NS, "checkpointlocation": "/tmp/x", "queryname": "q", "path": "p"})
