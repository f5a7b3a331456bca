"""The broker's message-trace keys: ``traceTopicEnable`` creates ``msgTraceTopicName`` at start."""

from __future__ import annotations

import pytest

from rocketq.broker.config_loader import load_broker_config
from rocketq.broker.errors import BrokerConfigError
from rocketq.broker.topic_manager import TRACE_TOPIC, TopicConfigManager


def test_trace_topic_is_off_by_default() -> None:
    cfg = load_broker_config(None, overrides={"brokerName": "b"})
    assert (cfg.trace_topic_enable, cfg.msg_trace_topic_name) == (False, TRACE_TOPIC)
    assert TRACE_TOPIC not in TopicConfigManager(cfg)


@pytest.mark.parametrize("name", [None, "MyTraceTopic"])
def test_trace_topic_enable_creates_the_topic(name: str | None) -> None:
    overrides = {"brokerName": "b", "traceTopicEnable": "true"}
    if name is not None:
        overrides["msgTraceTopicName"] = name
    warnings: list[str] = []
    topics = TopicConfigManager(load_broker_config(None, overrides=overrides, warn=warnings.append))
    tc = topics.select(name or TRACE_TOPIC)
    assert tc is not None and (tc.read_queue_nums, tc.write_queue_nums) == (1, 1)
    assert tc.is_writeable and warnings == []


def test_a_bad_trace_topic_name_is_refused() -> None:
    with pytest.raises(BrokerConfigError, match="msgTraceTopicName"):
        load_broker_config(None, overrides={"brokerName": "b", "msgTraceTopicName": "bad topic!"})
