"""The replication keys of broker.conf: role/id consistency, haListenPort's default, bad values."""

from __future__ import annotations

import pytest

from rocketq.broker.config import BrokerRole
from rocketq.broker.config_keys import broker_properties
from rocketq.broker.config_loader import config_from_properties
from rocketq.broker.errors import BrokerConfigError


def test_defaults_follow_rocketmq() -> None:
    config = config_from_properties({"listenPort": "10911"})
    assert config.ha_listen_port == 10912  # listenPort + 1
    assert config.ha_send_heartbeat_interval_ms == 5_000
    assert config.ha_housekeeping_interval_ms == 20_000
    assert config.ha_transfer_batch_size == 32 * 1024
    assert config.ha_max_gap_not_in_sync == 256 * 1024 * 1024
    assert config.ha_slave_truncate_divergent and not config.slave_read_enable
    assert config_from_properties({"listenPort": "0"}).ha_listen_port == 0  # a free port too
    assert config_from_properties({"listenPort": "20911", "haListenPort": "30000"}).ha_listen_port == 30000


def test_slave_keys() -> None:
    config = config_from_properties(
        {
            "brokerRole": "SLAVE",
            "brokerId": "2",
            "haMasterAddress": "10.0.0.1:10912",
            "haSlaveTruncateDivergent": "false",
            "slaveReadEnable": "true",
            "haSlaveFallbehindMax": "1024",
        }
    )
    assert config.broker_role is BrokerRole.SLAVE and not config.is_master
    assert config.ha_master_address == "10.0.0.1:10912"
    assert not config.ha_slave_truncate_divergent and config.slave_read_enable
    assert config.ha_max_gap_not_in_sync == 1024
    assert "haListenPort" in broker_properties(config)


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"brokerRole": "SLAVE", "brokerId": "0"}, "brokerId"),
        ({"brokerRole": "SYNC_MASTER", "brokerId": "1"}, "brokerId"),
        ({"haMasterAddress": "nowhere"}, "haMasterAddress"),
        ({"haTransferBatchSize": "0"}, "haTransferBatchSize"),
        ({"haSendHeartbeatInterval": "30000"}, "haHousekeepingInterval"),
        ({"listenPort": "10911", "haListenPort": "10911"}, "haListenPort"),
        ({"haListenPort": "70000"}, "haListenPort"),
    ],
)
def test_bad_values_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(BrokerConfigError, match=key):
        config_from_properties(props)
