"""DLedger mode's broker.conf keys: accepted, checked, and the keys rocketq does not act on refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketq.broker.config_loader import config_from_properties
from rocketq.broker.dledger.java_store import java_dledger_store
from rocketq.broker.dledger.peers import parse_peers
from rocketq.broker.errors import BrokerConfigError
from rocketq.server.properties import parse_properties

CONF = Path(__file__).resolve().parents[2] / "examples" / "conf" / "dledger"
PEERS = "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"
BASE = {
    "brokerName": "RaftNode00",
    "enableDLegerCommitLog": "true",
    "dLegerGroup": "RaftNode00",
    "dLegerPeers": PEERS,
    "dLegerSelfId": "n1",
}


def refused(props: dict[str, str]) -> BrokerConfigError:
    with pytest.raises(BrokerConfigError) as info:
        config_from_properties(props)
    return info.value


@pytest.mark.parametrize("name", ["broker-n0.conf", "broker-n1.conf", "broker-n2.conf"])
def test_the_example_files_load_without_unknown_keys(name: str) -> None:
    warnings: list[str] = []
    props = parse_properties((CONF / name).read_text(encoding="utf-8"))
    config = config_from_properties(props, warn=warnings.append)
    assert warnings == []
    assert config.enable_dleger_commit_log and config.dleger_self_id == name[7:9]
    assert [p.broker_id for p in parse_peers(config.dleger_peers)] == [1, 2, 3]


def test_keys_are_read() -> None:
    config = config_from_properties({**BASE, "preferredLeaderId": "n2"})
    assert (config.dleger_group, config.dleger_self_id, config.preferred_leader_id) == (
        "RaftNode00",
        "n1",
        "n2",
    )


@pytest.mark.parametrize("key", ["isEnableBatchPush", "enableBatchPush"])
def test_dledger_keys_rocketq_does_not_act_on_are_refused_by_name(key: str) -> None:
    error = refused({**BASE, key: "false"})
    assert error.key == key and key in str(error)


@pytest.mark.parametrize("key", ["dLegerGroup", "dLegerPeers", "dLegerSelfId"])
def test_a_missing_key_is_named(key: str) -> None:
    props = dict(BASE)
    del props[key]
    assert refused(props).key == key


@pytest.mark.parametrize(
    ("props", "key", "words"),
    [
        ({"dLegerSelfId": "n7"}, "dLegerSelfId", "not one of"),
        ({"preferredLeaderId": "n9"}, "preferredLeaderId", "not one of"),
        ({"dLegerPeers": "n0-127.0.0.1:1;n0-127.0.0.1:2"}, "dLegerPeers", "unique"),
        ({"dLegerPeers": "n1-127.0.0.1:1;n2-127.0.0.1:1"}, "dLegerPeers", "share one address"),
        ({"dLegerPeers": "a-127.0.0.1:1"}, "dLegerPeers", "id like n0"),
        ({"dLegerPeers": "n1-127.0.0.1:99999"}, "dLegerPeers", "port"),
        (
            {"enableControllerMode": "true", "controllerAddr": "127.0.0.1:9878"},
            "enableDLegerCommitLog",
            "enableControllerMode",
        ),
    ],
)
def test_inconsistent_values_are_refused_with_the_key(props: dict[str, str], key: str, words: str) -> None:
    error = refused({**BASE, **props})
    assert error.key == key and words in str(error)


def test_dledger_keys_without_the_switch_change_nothing() -> None:
    config = config_from_properties({"dLegerPeers": "whatever", "dLegerSelfId": "x"})
    assert not config.enable_dleger_commit_log


def test_a_java_dledger_store_is_found(tmp_path: Path) -> None:
    assert java_dledger_store(str(tmp_path)) is None
    (tmp_path / "dledger-raft").mkdir()  # rocketq's own Raft journal
    (tmp_path / "commitlog").mkdir()
    assert java_dledger_store(str(tmp_path)) is None
    (tmp_path / "dledger-n0" / "data").mkdir(parents=True)
    assert java_dledger_store(str(tmp_path)) == tmp_path / "dledger-n0"
