"""Where Kafka users expect it (no Spark, no broker): Kafka option names, generated consumer groups,
mutual TLS and security-token options, the sink's topic and properties rules, and lag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from rocketq.client.remoting.batch import decode_batch
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.connector import lag
from rocketq.connector.encoding import SYSTEM_PROPERTY_KEYS, BulkUniqKeys, properties_column
from rocketq.connector.errors import OptionError
from rocketq.connector.lag import SourceLag, source_lag
from rocketq.connector.options import (
    DEFAULT_GROUP_ID_PREFIX,
    StartMode,
    parse_sink_options,
    parse_source_options,
)
from rocketq.connector.writer import TargetQueue, TaskState, _split_by_topic, batch_requests, route_rows

NS = {"nameServer": "127.0.0.1:9876"}


def src(batch: bool | None = False, /, **kw: str) -> Any:
    return parse_source_options({**NS, **kw}, batch=batch)


def refused(option: str, match: str, batch: bool | None = False, /, **kw: str) -> None:
    with pytest.raises(OptionError, match=match) as info:
        parse_source_options({**NS, **kw}, batch=batch)
    assert info.value.option == option


# -- what to read: subscribe, subscribePattern, assign ----------------------------------------


def test_subscribe_is_topic() -> None:
    assert src(subscribe="b, a").topics == src(topic="a,b").topics == ("a", "b")


def test_subscribe_pattern_is_topic_pattern() -> None:
    o = src(subscribePattern="ord.*")
    assert o.topic_pattern == "ord.*" and o.topics == () and o.matches_topic("orders")
    refused("subscribePattern", "regular expression", subscribePattern="(")


def test_assign_names_queues_with_the_offset_json_keys() -> None:
    o = src(assign='{"b": ["broker-a:1"], "a": ["broker-a:0", "broker-b:3"]}')
    assert o.topics == ("a", "b")
    assert o.assigned == {
        MessageQueue("a", "broker-a", 0), MessageQueue("a", "broker-b", 3), MessageQueue("b", "broker-a", 1)
    }  # fmt: skip
    found = {MessageQueue("a", "broker-a", q): "addr" for q in range(3)}
    assert o.keep_assigned(found) == {MessageQueue("a", "broker-a", 0): "addr"}
    assert src(topic="a").keep_assigned(found) == found


@pytest.mark.parametrize(
    "text",
    [
        "{bad",
        "[]",
        "{}",
        '{"a": []}',
        '{"a": [0, 1]}',
        '{"a": "broker-a:0"}',
        '{"a": ["0"]}',
        '{"a b": ["x:0"]}',
    ],
)
def test_bad_assign_is_refused_with_its_form(text: str) -> None:
    refused("assign", "brokerName:queueId|topic name", assign=text)


@pytest.mark.parametrize(
    "given",
    [
        {"topic": "a", "subscribe": "b"},
        {"topic": "a", "topicPattern": "a.*"},
        {"subscribe": "a", "subscribePattern": "a.*"},
        {"subscribe": "a", "assign": '{"a": ["b:0"]}'},
        {"topicPattern": "a", "assign": '{"a": ["b:0"]}'},
    ],
)
def test_more_than_one_way_to_name_topics_is_refused(given: dict[str, str]) -> None:
    with pytest.raises(OptionError, match="give exactly one of topic, subscribe, topicPattern"):
        parse_source_options({**NS, **given})


def test_no_topic_at_all_names_every_way() -> None:
    refused("topic", "none of them is given", **{})


# -- admission control aliases ----------------------------------------------------------------


def test_max_and_min_offsets_per_trigger_are_the_message_limits() -> None:
    o = src(topic="t", maxOffsetsPerTrigger="100", minOffsetsPerTrigger="10")
    assert (o.max_messages_per_trigger, o.min_messages_per_trigger) == (100, 10)


@pytest.mark.parametrize(
    ("given", "option", "match"),
    [
        ({"maxOffsetsPerTrigger": "5", "maxMessagesPerTrigger": "5"}, "maxOffsetsPerTrigger", "only one"),
        ({"minOffsetsPerTrigger": "5", "minMessagesPerTrigger": "5"}, "minOffsetsPerTrigger", "only one"),
        ({"maxOffsetsPerTrigger": "many"}, "maxOffsetsPerTrigger", "integer"),
        ({"minOffsetsPerTrigger": "0"}, "minOffsetsPerTrigger", ">= 1"),
        ({"maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "6"}, "minOffsetsPerTrigger", "maxOffsets"),
    ],
)
def test_alias_errors_name_the_option_written(given: dict[str, str], option: str, match: str) -> None:
    refused(option, match, topic="t", **given)


@pytest.mark.parametrize("key", ["kafka.bootstrap.servers", "startingOffset", "maxRatePerPartition"])
def test_unknown_options_are_still_refused(key: str) -> None:
    refused(key.lower(), "unknown source option", topic="t", **{key: "1"})  # Spark lower-cases keys
    with pytest.raises(OptionError, match="unknown sink option"):
        parse_sink_options({**NS, "topic": "t", key: "1"})


# -- consumer groups ---------------------------------------------------------------------------


def test_each_query_gets_its_own_group() -> None:
    groups = {src(topic="t").group for _ in range(20)}
    assert len(groups) == 20
    assert all(g.startswith(f"{DEFAULT_GROUP_ID_PREFIX}-") and len(g) == len(DEFAULT_GROUP_ID_PREFIX) + 33
               for g in groups)  # fmt: skip
    assert src(topic="t").group_is_default


def test_group_id_prefix_and_named_groups() -> None:
    o = src(topic="t", groupIdPrefix="etl-orders")
    assert o.group.startswith("etl-orders-") and o.group_is_default
    named = src(topic="t", group="billing")
    assert named.group == "billing" and not named.group_is_default
    refused("groupIdPrefix", "only applies without 'group'", topic="t", group="g", groupIdPrefix="p")
    refused("groupIdPrefix", "letters, digits", topic="t", groupIdPrefix="bad prefix")
    refused("group", "not a valid RocketMQ group name", topic="t", group="a.b")


def test_committed_needs_a_named_group() -> None:
    for batch in (False, True, None):
        refused("startingOffsets", "set 'group'", batch, topic="t", startingOffsets="committed")
    assert src(topic="t", group="g", startingOffsets="committed").starting.mode is StartMode.COMMITTED


def test_traces_work_with_a_generated_group() -> None:
    assert src(topic="t", enableMsgTrace="true").enable_msg_trace
    assert src(topic="t", group="g", enableMsgTrace="true").enable_msg_trace
    assert src(True, topic="t", enableMsgTrace="true").enable_msg_trace


# -- TLS and ACL ------------------------------------------------------------------------------


@pytest.fixture
def pem(tmp_path: Path) -> dict[str, str]:
    files = {}
    for name in ("ca", "cert", "key"):
        path = tmp_path / f"{name}.pem"
        path.write_text("-----BEGIN-----\n", encoding="utf-8")
        files[name] = str(path)
    return files


def test_mutual_tls_and_security_token_reach_the_client_of_source_and_sink(pem: dict[str, str]) -> None:
    given = {
        "tls": "true", "tlsTrustCertPath": pem["ca"], "tlsCertPath": pem["cert"], "tlsKeyPath": pem["key"],
        "tlsKeyPassword": "pw", "accessKey": "ak", "secretKey": "sk", "securityToken": "token",
    }  # fmt: skip
    for client in (src(topic="t", **given).client, parse_sink_options({**NS, "topic": "t", **given}).client):
        assert client.use_tls and client.tls_trust_cert_path == pem["ca"]
        assert (client.tls_cert_path, client.tls_key_path, client.tls_key_password) == (
            pem["cert"],
            pem["key"],
            "pw",
        )
        assert client.credentials is not None and client.credentials.security_token == "token"


@pytest.mark.parametrize(
    ("given", "option", "match"),
    [
        ({"tls": "true", "tlsCertPath": "cert"}, "tlsKeyPath", "go together"),
        ({"tls": "true", "tlsKeyPath": "key"}, "tlsCertPath", "go together"),
        ({"tlsCertPath": "cert", "tlsKeyPath": "key"}, "tlsCertPath", "needs tls=true"),
        ({"tlsTrustCertPath": "ca"}, "tlsTrustCertPath", "needs tls=true"),
        ({"tls": "true", "tlsKeyPassword": "pw"}, "tlsKeyPassword", "only applies with tlsKeyPath"),
        ({"securityToken": "t"}, "securityToken", "needs accessKey"),
        ({"accessKey": "ak"}, "secretKey", "go together"),
    ],
)
def test_tls_and_acl_option_errors(
    pem: dict[str, str], given: dict[str, str], option: str, match: str
) -> None:
    files = {k: pem.get(v, v) for k, v in given.items()}
    refused(option, match, topic="t", **files)
    with pytest.raises(OptionError, match=match):
        parse_sink_options({**NS, "topic": "t", **files})


def test_unreadable_key_file_is_named(tmp_path: Path, pem: dict[str, str]) -> None:
    missing = str(tmp_path / "nope.key")
    refused(
        "tlsKeyPath",
        "not a readable file",
        topic="t",
        tls="true",
        tlsCertPath=pem["cert"],
        tlsKeyPath=missing,
    )


# -- sink: the topic option wins, system properties are dropped --------------------------------


def test_topic_option_wins_over_the_topic_column() -> None:
    batch = pa.RecordBatch.from_pydict({"topic": ["src", "src", None], "body": [b"a", b"b", b"c"]})
    assert [(t, b.num_rows) for t, b in _split_by_topic(batch, "copy")] == [("copy", 3)]
    assert sorted((t, b.num_rows) for t, b in _split_by_topic(batch.slice(0, 2), None)) == [("src", 2)]
    with pytest.raises(Exception, match="set the 'topic' option"):
        list(_split_by_topic(batch, None))


def test_forwarded_source_properties_keep_only_user_keys() -> None:
    forwarded = [
        ("UNIQ_KEY", "SOURCEUNIQ"), ("TAGS", "old-tag"), ("KEYS", "old-key"), ("DELAY", "3"),
        ("TRAN_MSG", "true"), ("WAIT", "false"), ("PGROUP", "pg"), ("__SHARDINGKEY", "s"),
        ("TIMER_DELIVER_MS", "1"), ("__RMQ.TRANSIENT.X", "1"), ("region", "eu"), ("batchId", "7"),
    ]  # fmt: skip
    uniq = BulkUniqKeys().take(2)
    props = properties_column(
        2, uniq_keys=uniq, tags=pa.array(["new-tag", None]), keys_text=pa.array(["new-key", None]),
        sharding_key=None, user=pa.array([forwarded, forwarded], pa.map_(pa.string(), pa.string())),
    )  # fmt: skip
    for i, text in enumerate(props.to_pylist()):
        entries = dict(e.split("\x01") for e in text.split("\x02") if e)
        assert text.count("UNIQ_KEY") == 1 and entries["UNIQ_KEY"] == uniq[i].as_py()
        assert entries["WAIT"] == "true" and entries["region"] == "eu" and entries["batchId"] == "7"
        assert entries.get("TAGS") == ("new-tag" if i == 0 else None)
        assert entries.get("KEYS") == ("new-key" if i == 0 else None)
        for gone in ("DELAY", "TRAN_MSG", "PGROUP", "__SHARDINGKEY", "TIMER_DELIVER_MS", "__RMQ.TRANSIENT.X"):
            assert gone not in entries


def test_system_keys_cover_the_reserved_list() -> None:
    assert {"UNIQ_KEY", "TAGS", "KEYS", "DELAY", "TRAN_MSG", "WAIT", "__SHARDINGKEY", "REAL_TOPIC"} <= (
        SYSTEM_PROPERTY_KEYS
    )
    assert "region" not in SYSTEM_PROPERTY_KEYS


def test_encoded_batch_carries_the_rows_own_tags() -> None:
    opts = parse_sink_options({**NS, "topic": "out"})
    queues = [TargetQueue("out", "broker-a", 0)]
    batch = pa.RecordBatch.from_pydict(
        {
            "body": [b"x"],
            "tags": ["mine"],
            "properties": pa.array([[("TAGS", "theirs"), ("k", "v")]], pa.map_(pa.string(), pa.string())),
        }
    )
    (request,) = batch_requests(batch, queues, route_rows(batch, queues, TaskState()), opts, BulkUniqKeys())
    (message,) = decode_batch(request.body)
    assert message.properties["TAGS"] == "mine" and message.properties["k"] == "v"


# -- lag -------------------------------------------------------------------------------------


def _source(end: Any, latest: Any) -> dict[str, Any]:
    return {"description": "PythonMicroBatchStream", "endOffset": end, "latestOffset": latest}


def test_lag_per_queue_and_kafka_figures() -> None:
    end = {"t": {"broker-a:0": 10, "broker-a:1": 4}, "u": {"broker-a:0": 7}}
    latest = {"t": {"broker-a:0": 25, "broker-a:1": 4, "broker-a:2": 9}, "u": {"broker-a:0": 8}}
    progress = {"sources": [_source(json.dumps(end), json.dumps(latest))]}
    (found,) = lag(progress)
    # broker-a:2 is not in the batch's end offset yet: no figure for it
    assert found.per_queue == {"t/broker-a:0": 15, "t/broker-a:1": 0, "u/broker-a:0": 1}
    assert found.metrics() == {"minOffsetsBehindLatest": 0, "maxOffsetsBehindLatest": 15,
                               "avgOffsetsBehindLatest": 16 / 3}  # fmt: skip
    assert found.total_offsets_behind_latest == 16
    assert lag(json.dumps(progress)) == [found]


def test_lag_skips_other_sources_and_missing_offsets() -> None:
    kafka = _source('{"t": {"0": 5}}', '{"t": {"0": 9}}')
    rocketmq = _source({"t": {"b:0": 5}}, {"t": {"b:0": 9}})
    none_yet = _source({"t": {"b:0": 5}}, "null")
    found = lag({"sources": [kafka, none_yet, rocketmq]})
    assert found == [SourceLag(2, {"t/b:0": 4})]
    assert source_lag(0, _source(None, None)) is None


def test_lag_of_a_query_uses_its_last_progress() -> None:
    class Query:
        lastProgress: Any = None

    q = Query()
    assert lag(q) == []
    q.lastProgress = {"sources": [_source({"t": {"b:0": 1}}, {"t": {"b:0": 3}})]}
    assert [s.max_offsets_behind_latest for s in lag(q)] == [2]
    empty = SourceLag(0, {})
    assert (empty.min_offsets_behind_latest, empty.avg_offsets_behind_latest) == (0, 0.0)
