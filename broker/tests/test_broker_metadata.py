"""The broker's config/*.json metadata files: round trips, .bak fallback, fastjson keys, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketq.broker.metadata import (
    ConsumerOffsetTable,
    DelayOffsetTable,
    MetadataFiles,
    SubscriptionGroupConfig,
    SubscriptionGroupTable,
    TopicConfig,
    TopicConfigTable,
    persist_json_file,
)
from rocketq.broker.store.errors import MetadataError
from rocketq.client.remoting.route import DataVersion


def test_topics_round_trip_and_backup(tmp_path: Path) -> None:
    files = MetadataFiles(str(tmp_path / "config"))
    table = TopicConfigTable({"TopicA": TopicConfig("TopicA", 4, 4)}, DataVersion(1700000000000, 3))
    files.persist_topics(table)
    raw = json.loads((tmp_path / "config" / "topics.json").read_text())
    assert raw["topicConfigTable"]["TopicA"]["readQueueNums"] == 4 and raw["dataVersion"]["counter"] == 3
    files.persist_topics(
        TopicConfigTable({**table.topic_config_table, "B": TopicConfig("B")}, table.data_version)
    )
    assert json.loads((tmp_path / "config" / "topics.json.bak").read_text()) == raw
    loaded = files.load_topics()
    assert (
        set(loaded.topic_config_table) == {"TopicA", "B"}
        and loaded.topic_config_table["TopicA"].write_queue_nums == 4
    )
    assert not (tmp_path / "config" / "topics.json.tmp").exists()


def test_corrupt_file_falls_back_to_backup(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    files = MetadataFiles(str(tmp_path))
    files.persist_consumer_offsets(ConsumerOffsetTable(offset_table={"T@g": {0: 5}}))
    files.persist_consumer_offsets(ConsumerOffsetTable(offset_table={"T@g": {0: 9, 1: 2}}))
    (tmp_path / "consumerOffset.json").write_text('{"offsetTable": {"T@g": {0: 9')  # torn
    assert files.load_consumer_offsets().offset_table == {"T@g": {0: 5}}
    (tmp_path / "consumerOffset.json.bak").write_text("garbage")
    with pytest.raises(MetadataError):
        files.load_consumer_offsets()


def test_fastjson_unquoted_keys_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "consumerOffset.json").write_text(
        '{"offsetTable":{"TopicTest@please_rename_unique_group_name_4":{0:250,1:249}}}'
    )
    (tmp_path / "delayOffset.json").write_text('{"offsetTable":{1:0,3:17}}')
    files = MetadataFiles(str(tmp_path))
    assert files.load_consumer_offsets().offset_table == {
        "TopicTest@please_rename_unique_group_name_4": {0: 250, 1: 249}
    }
    assert files.load_delay_offsets().offset_table == {1: 0, 3: 17}
    assert files.load_subscription_groups().subscription_group_table == {}
    assert files.load_topics().topic_config_table == {}


def test_subscription_groups_and_delay_offsets(tmp_path: Path) -> None:
    files = MetadataFiles(str(tmp_path))
    t = SubscriptionGroupTable(
        subscription_group_table={"g": SubscriptionGroupConfig(group_name="g", retry_max_times=3)}
    )
    t.next_version()
    files.persist_subscription_groups(t)
    raw = json.loads((tmp_path / "subscriptionGroup.json").read_text())
    assert raw["subscriptionGroupTable"]["g"]["retryMaxTimes"] == 3 and raw["dataVersion"]["counter"] == 1
    assert files.load_subscription_groups().subscription_group_table["g"].retry_max_times == 3
    files.persist_delay_offsets(DelayOffsetTable(offset_table={2: 7}))
    assert json.loads((tmp_path / "delayOffset.json").read_text()) == {"offsetTable": {"2": 7}}


def test_persist_failure_is_a_metadata_error(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("x")
    with pytest.raises(MetadataError):
        persist_json_file(str(tmp_path / "blocker" / "topics.json"), {})
