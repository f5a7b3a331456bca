"""The VIP channel's address rule and which requests a client sends through it."""

from __future__ import annotations

import asyncio

from rocketq.client.api import MQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vip_channel import NOT_ON_VIP_CHANNEL, VIA_VIP_CHANNEL, vip_channel_addr


def test_vip_address_is_the_port_minus_two() -> None:
    assert vip_channel_addr("10.0.0.21:10911") == "10.0.0.21:10909"
    assert vip_channel_addr("broker-a.internal:2") == "broker-a.internal:0"
    assert vip_channel_addr("[::1]:10911") == "[::1]:10909"
    assert vip_channel_addr("no-port") == "no-port"  # unchanged when the port cannot be split
    assert vip_channel_addr("h:1") == "h:1"


def test_long_polls_are_neither_served_nor_sent_on_the_vip_channel() -> None:
    assert not NOT_ON_VIP_CHANNEL & VIA_VIP_CHANNEL
    assert RequestCode.SEND_MESSAGE_V2 in VIA_VIP_CHANNEL
    assert RequestCode.HEART_BEAT not in VIA_VIP_CHANNEL
    assert RequestCode.GET_ROUTEINFO_BY_TOPIC not in VIA_VIP_CHANNEL


def _channel_addrs(enabled: bool) -> tuple[str, str, str]:
    async def run() -> tuple[str, str, str]:
        api = MQClientAPI("127.0.0.1:9876", config=ClientConfig(vip_channel_enabled=enabled))
        try:
            send = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2)
            pull = RemotingCommand.request(RequestCode.PULL_MESSAGE)
            route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC)
            addr = "127.0.0.1:10911"
            return api.channel_addr(addr, send), api.channel_addr(addr, pull), api.channel_addr(addr, route)
        finally:
            await api.close()

    return asyncio.run(run())


def test_client_sends_through_the_vip_channel_only_when_enabled() -> None:
    assert _channel_addrs(True) == ("127.0.0.1:10909", "127.0.0.1:10911", "127.0.0.1:10911")
    assert _channel_addrs(False) == ("127.0.0.1:10911",) * 3
    assert ClientConfig.from_properties({"vipChannelEnabled": "true"}).vip_channel_enabled
