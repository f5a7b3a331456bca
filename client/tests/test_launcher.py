"""The launcher (rocketq.client.launcher): broker.conf text, boot-line parsing, start failures."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from rocketq.client import testing
from rocketq.client.launcher import (
    BROKER_BOOT_RE,
    NAMESRV_BOOT_RE,
    ServerStartError,
    broker_conf_text,
    free_port,
    spawn_broker,
    spawn_namesrv,
)


def test_broker_conf_text_has_defaults_and_overrides(tmp_path: Path) -> None:
    text = broker_conf_text(
        "127.0.0.1:9876", tmp_path / "store", brokerName="broker-b", autoCreateTopicEnable=False
    )
    conf = dict(line.split("=", 1) for line in text.splitlines())
    assert conf["brokerName"] == "broker-b" and conf["autoCreateTopicEnable"] == "false"
    assert conf["namesrvAddr"] == "127.0.0.1:9876" and conf["listenPort"] == "0"
    assert conf["storePathRootDir"] == str(tmp_path / "store")
    assert list(conf).count("brokerName") == 1


def test_boot_lines_are_parsed() -> None:
    line = "The Name Server boot success. serializeType=JSON, listening on 127.0.0.1:4321"
    ns = NAMESRV_BOOT_RE.search(f"x\n{line}\n")
    assert ns is not None and ns.group(1) == "127.0.0.1:4321"
    broker = BROKER_BOOT_RE.search("The broker[broker-a, 127.0.0.1:10911] boot success. serializeType=JSON")
    assert broker is not None and broker.groups() == ("broker-a", "127.0.0.1:10911")
    assert NAMESRV_BOOT_RE.search("The Name Server boot failed") is None


def test_free_port_can_be_bound() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_a_server_that_exits_before_booting_raises_with_its_log(tmp_path: Path) -> None:
    with pytest.raises(ServerStartError) as info:
        spawn_namesrv(tmp_path, "--listen-port", "nope", timeout_s=30)
    text = str(info.value)
    assert "exited with status 2 before booting" in text and "invalid int value: 'nope'" in text


def test_a_broker_that_cannot_start_is_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(ServerStartError) as info:
        spawn_broker(tmp_path, "127.0.0.1:1", timeout_s=30, extra_args=("--no-such-flag",))
    assert "broker-broker-a-0" in str(info.value)


def test_testing_re_exports_the_launcher() -> None:
    assert testing.spawn_broker is spawn_broker and testing.ServerStartError is ServerStartError
