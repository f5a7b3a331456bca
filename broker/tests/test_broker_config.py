"""Unit tests of broker.conf loading: RocketMQ keys, defaults, warnings and named errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketq.broker.cli import main as mqbroker_main
from rocketq.broker.config import BrokerConfig, BrokerRole
from rocketq.broker.config_keys import KeyOwner, broker_conf_keys
from rocketq.broker.config_loader import (
    build_store_config,
    camel_to_snake,
    config_from_properties,
    load_broker_config,
)
from rocketq.broker.errors import BrokerConfigError
from rocketq.broker.store.config import FlushDiskType
from rocketq.server.properties import parse_properties

SEED_CONF = """\
# NameServer addresses
namesrvAddr=192.168.1.100:9876;192.168.1.101:9876
brokerClusterName=itzhai-com-cluster
brokerIP1=192.168.1.100
listenPort=10911
brokerName=broker-1
brokerId=0
deleteWhen=02
fileReservedTime=48
brokerRole=SYNC_MASTER
flushDiskType=ASYNC_FLUSH
autoCreateTopicEnable=true
storePathRootDir=/data/rocketmq/store-m
"""


def test_defaults_match_rocketmq() -> None:
    cfg = BrokerConfig(broker_name="b")
    assert cfg.listen_port == 10911
    assert cfg.bind_address == "127.0.0.1"
    assert cfg.broker_cluster_name == "DefaultCluster"
    assert cfg.broker_role is BrokerRole.ASYNC_MASTER
    assert cfg.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert cfg.default_topic_queue_nums == 8
    assert cfg.auto_create_topic_enable is True
    assert cfg.max_message_size == 4 * 1024 * 1024
    assert cfg.register_period_s == 30.0


def test_rocketmq_broker_conf_loads(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(SEED_CONF, encoding="utf-8")
    cfg = load_broker_config(conf)
    assert cfg.namesrv_addr == ("192.168.1.100:9876", "192.168.1.101:9876")
    assert cfg.broker_cluster_name == "itzhai-com-cluster"
    assert cfg.broker_name == "broker-1"
    assert cfg.broker_role is BrokerRole.SYNC_MASTER
    assert cfg.broker_addr == "192.168.1.100:10911"
    # a routable brokerIP1 without bindAddress listens on every interface
    assert cfg.bind_address == "0.0.0.0"
    store = build_store_config(cfg)
    assert store.file_reserved_time_hours == 48
    assert store.delete_when == "02"
    assert store.store_path_root_dir == "/data/rocketmq/store-m"


def test_unknown_keys_warned_not_fatal() -> None:
    warnings: list[str] = []
    cfg = load_broker_config(
        None, overrides={"brokerName": "b", "noSuchKey": "1", "aclEnable": "false"}, warn=warnings.append
    )
    assert cfg.broker_name == "b"
    assert len(warnings) == 1 and "noSuchKey" in warnings[0]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("listenPort", "abc"),
        ("listenPort", "70000"),
        ("brokerId", "-1"),
        ("autoCreateTopicEnable", "yes please"),
        ("flushDiskType", "SOMETIMES"),
        ("brokerRole", "LEADER"),
        ("namesrvAddr", "nohost"),
        ("deleteWhen", "25"),
        ("replicaDispatchIntervalMs", "0"),
        ("commitLogPageCacheWindow", "-1"),
        ("mappedFileSizeCommitLog", "big"),
        ("defaultTopicQueueNums", "0"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(BrokerConfigError) as info:
        load_broker_config(None, overrides={"brokerName": "b", key: value})
    assert key in str(info.value)


def test_store_keys_reach_store_config(tmp_path: Path) -> None:
    cfg = load_broker_config(
        None,
        overrides={
            "brokerName": "b",
            "storePathRootDir": str(tmp_path),
            "flushDiskType": "SYNC_FLUSH",
            "mappedFileSizeCommitLog": str(8 << 20),
            "maxMessageSize": str(1 << 20),
            "syncFlushTimeout": "1234",
            "commitLogPageCacheWindow": str(64 << 20),
        },
    )
    store = build_store_config(cfg)
    assert store.commit_log_page_cache_window_bytes == 64 << 20
    assert store.flush_disk_type.name == "SYNC_FLUSH"
    assert store.mapped_file_size_commit_log_bytes == 8 << 20
    assert store.max_message_size_bytes == 1 << 20
    assert store.sync_flush_timeout_ms == 1234
    assert cfg.max_message_size == 1 << 20


def test_properties_syntax() -> None:
    text = "# c\n! c2\na=1\nb : two\nc three\nd=x\\\n  y\n  e = spaced value  \n"
    assert parse_properties(text) == {"a": "1", "b": "two", "c": "three", "d": "xy", "e": "spaced value"}


def test_camel_to_snake() -> None:
    assert camel_to_snake("mappedFileSizeCommitLog") == "mapped_file_size_commit_log"
    assert camel_to_snake("brokerIP1") == "broker_ip1"


def test_print_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=bx\nlistenPort=0\n", encoding="utf-8")
    assert mqbroker_main(["-c", str(conf), "-n", "127.0.0.1:9876", "-p"]) == 0
    out = capsys.readouterr().out
    assert "brokerName=bx" in out and "namesrvAddr=127.0.0.1:9876" in out


def test_bad_config_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=x\n", encoding="utf-8")
    assert mqbroker_main(["-c", str(conf)]) == 1
    assert "listenPort" in capsys.readouterr().err


def test_every_listed_key_is_accepted_with_its_default() -> None:
    """``broker_conf_keys`` (the source of the configuration reference) lists what the loader takes."""
    listed = broker_conf_keys()
    assert len({k.key for k in listed}) == len(listed)
    for entry in listed:
        if entry.owner is KeyOwner.IGNORED or not entry.default:
            continue
        warnings: list[str] = []
        config_from_properties({entry.key: entry.default}, warn=warnings.append)
        assert warnings == [], entry
    warnings = []
    config_from_properties({"noSuchKey": "1"}, warn=warnings.append)
    assert warnings
