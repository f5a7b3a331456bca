"""mqadmin updateKvConfig / deleteKvConfig against two real NameServer processes: the item is
written to, and deleted from, every NameServer of ``-n``, with RocketMQ's output lines."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rocketq.client.cli.mqadmin import main as mqadmin
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.testing import ServerProcess
from rocketq.client.transport.blocking import BlockingRemotingClient

SpawnNamesrv = Callable[..., ServerProcess]


def _get(client: BlockingRemotingClient, ns: ServerProcess, namespace: str, key: str) -> str | None:
    cmd = RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key})
    resp = client.invoke(ns.addr, cmd, 5000)
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    assert resp.code == ResponseCode.SUCCESS, resp
    return resp.ext_fields["value"]


def test_update_and_delete_kv_config_on_every_namesrv(
    namesrv_factory: SpawnNamesrv, blocking_client: BlockingRemotingClient, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = namesrv_factory(), namesrv_factory()
    both = f"{a.addr};{b.addr}"

    assert (
        mqadmin(["updateKvConfig", "-n", both, "-s", "ORDER_TOPIC_CONFIG", "-k", "T", "-v", "broker-a:4"])
        == 0
    )
    assert capsys.readouterr().out == "create or update kv config to namespace success.\n"
    assert [_get(blocking_client, ns, "ORDER_TOPIC_CONFIG", "T") for ns in (a, b)] == ["broker-a:4"] * 2

    assert mqadmin(["deleteKvConfig", "-n", both, "--namespace", "ORDER_TOPIC_CONFIG", "--key", "T"]) == 0
    assert capsys.readouterr().out == "delete kv config from namespace success.\n"
    assert [_get(blocking_client, ns, "ORDER_TOPIC_CONFIG", "T") for ns in (a, b)] == [None, None]


def test_kv_commands_need_their_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        mqadmin(["updateKvConfig", "-n", "127.0.0.1:1", "-s", "NS", "-k", "K"])  # -v missing
    assert exited.value.code == 2
    assert "-v/--value" in capsys.readouterr().err
