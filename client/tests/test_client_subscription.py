"""MessageSelector: SQL92 and tag selectors, the refusal of non-tag text, and broker refusals."""

from __future__ import annotations

import pytest

from rocketq.client.consumer import (
    AsyncPushConsumer,
    ExpressionType,
    MessageSelector,
    SubscriptionRefusedError,
)
from rocketq.client.consumer.subscription import check_tag_expression, subscription_refused
from rocketq.client.errors import MQBrokerError, MQClientError, SubscriptionError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.javahash import java_string_hash


def test_by_sql_keeps_the_expression_and_filters_nothing_client_side() -> None:
    sel = MessageSelector.by_sql("  a > 5 AND b = 'x'  ")
    assert (sel.expression_type, sel.expression) == (ExpressionType.SQL92, "a > 5 AND b = 'x'")
    sub = sel.subscription("T")
    assert sub.expression_type is ExpressionType.SQL92
    assert not sub.is_all
    assert sub.tags_filter() is None
    assert sub.matches_tag("anything") and sub.matches_tag(None)
    obj = sub.to_obj()
    assert (obj["expressionType"], obj["subString"], obj["tagsSet"], obj["codeSet"]) == (
        "SQL92",
        "a > 5 AND b = 'x'",
        [],
        [],
    )


@pytest.mark.parametrize("text", ["", "   "])
def test_by_sql_needs_an_expression(text: str) -> None:
    with pytest.raises(MQClientError, match="needs an expression"):
        MessageSelector.by_sql(text)


def test_by_tag_splits_tags_with_their_java_hash_codes() -> None:
    sub = MessageSelector.by_tag("TagA || TagB").subscription("T")
    assert sub.expression_type is ExpressionType.TAG
    assert sub.tags_set == {"TagA", "TagB"}
    assert sub.code_set == {java_string_hash("TagA"), java_string_hash("TagB")}
    assert sub.tags_filter() == frozenset({"TagA", "TagB"})
    assert not sub.matches_tag("TagC")


@pytest.mark.parametrize("text", [None, "", "*", "  *  "])
def test_by_tag_of_nothing_or_star_is_everything(text: str | None) -> None:
    sel = MessageSelector.by_tag(text)
    assert sel.expression == "*"
    assert sel.subscription("T").is_all


@pytest.mark.parametrize(
    "text", ["TagA", "TagA||TagB", "TagA || TagB", " TagA ||TagB|| ", "order-created.v2:eu_1", "*"]
)
def test_plain_strings_that_can_be_tags_stay_tag_expressions(text: str) -> None:
    sel = MessageSelector.of(text)
    assert sel.expression_type is ExpressionType.TAG
    assert check_tag_expression(text) == text.strip()


@pytest.mark.parametrize(
    ("text", "culprit"),
    [
        ("a > 5 AND b = 'x'", "' '"),
        ("a>5", "'>'"),
        ("a=1", "'='"),
        ("a <> 1", "' '"),
        ("TagA OR TagB", "' '"),
        ("TagA | TagB", "' '"),
        ("TagA|TagB", "'|'"),
        ("(TagA)", "'('"),
        ("'TagA'", '"\'"'),
        ("TagA || b IS NULL", "' '"),
        ("a!=1", "'!'"),
    ],
)
def test_strings_that_cannot_be_tag_expressions_are_refused(text: str, culprit: str) -> None:
    with pytest.raises(MQClientError) as info:
        MessageSelector.of(text)
    message = str(info.value)
    assert f"contains {culprit}" in message
    assert f"MessageSelector.by_sql({text.strip()!r})" in message
    assert "enablePropertyFilter=true" in message


def test_a_selector_passes_through_and_by_tag_refuses_too() -> None:
    sel = MessageSelector.by_sql("a > 5")
    assert MessageSelector.of(sel) is sel
    with pytest.raises(MQClientError, match="is not a tag expression"):
        MessageSelector.by_tag("a > 5")


def test_push_consumer_heartbeat_carries_the_sql92_subscription() -> None:
    consumer = AsyncPushConsumer("127.0.0.1:9876", consumer_group="g")
    consumer.subscribe("T", MessageSelector.by_sql("a BETWEEN 1 AND 3"))
    consumer.subscribe("U", "TagA || TagB")
    kind, data = consumer.heartbeat_data()
    assert kind == "consumer"
    subs = {s["topic"]: s for s in data["subscriptionDataSet"]}
    assert subs["T"]["expressionType"] == "SQL92" and subs["T"]["subString"] == "a BETWEEN 1 AND 3"
    assert subs["U"]["expressionType"] == "TAG" and subs["U"]["tagsSet"] == ["TagA", "TagB"]


def test_broker_refusals_of_sql92_become_subscription_errors_with_a_hint() -> None:
    sql = MessageSelector.by_sql("a > 5").subscription("T")
    unsupported = "The broker does not support consumer to filter message by SQL92"
    java = MQBrokerError(ResponseCode.SYSTEM_ERROR, unsupported, "b:1")
    err = subscription_refused(java, sql)
    assert isinstance(err, SubscriptionRefusedError) and isinstance(err, SubscriptionError)
    assert (err.code, err.broker_addr) == (ResponseCode.SYSTEM_ERROR, "b:1")
    assert "refused the SQL92 subscription 'a > 5' of topic T" in err.remark
    assert "enablePropertyFilter=true in the broker's broker.conf" in err.remark

    bad_sql = "SQL92 expression error at position 2"
    parse = MQBrokerError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, bad_sql, "b:1")
    err = subscription_refused(parse, sql)
    assert isinstance(err, SubscriptionRefusedError)
    assert "position 2" in err.remark and "enablePropertyFilter" not in err.remark

    busy = MQBrokerError(ResponseCode.SYSTEM_BUSY, "busy", "b:1")
    assert subscription_refused(busy, sql) is None
    tag = MessageSelector.by_tag("TagA").subscription("T")
    assert subscription_refused(parse, tag) is None
