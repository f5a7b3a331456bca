"""The VIP channel: a broker also serves on ``listenPort - 2`` (RocketMQ 4.x's fast remoting server).

A raw remoting client sends to the VIP port, reads the message back through it (VIEW_MESSAGE_BY_ID)
and commits and reads a consumer offset there; a pull on the VIP port is refused as RocketMQ's
fast server refuses it (long polls stay on ``listenPort``) and the same pull on ``listenPort``
returns the message.  A Producer and a LitePullConsumer with ``vip_channel_enabled=True`` send
and commit through the VIP port, proven by this process's established connections to that port
(Linux ``/proc/net/tcp``); a client without the option never connects there.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.errors import MQBrokerError
from rocketq.client.model import Message, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.msgid import decode_offset_msg_id
from rocketq.client.remoting.vip_channel import vip_channel_addr
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    free_port,
    produce_and_consume,
    pull_header,
    send_header,
    spawn_broker,
    spawn_namesrv,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/net/tcp")


def _port_pair() -> int:
    """A free ``listenPort`` whose ``listenPort - 2`` is free too (bounded tries)."""
    for _ in range(100):
        port = free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port - 2))
            except OSError:
                continue
            return port
    raise AssertionError("no free port pair (p, p - 2) found in 100 tries")


def _established_to(port: int) -> int:
    """How many established TCP connections on this host have ``127.0.0.1:port`` as remote end."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, state = fields[2], fields[3]
        if state == "01" and int(remote.split(":")[1], 16) == port:
            count += 1
    return count


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp = tmp_path_factory.mktemp("vip")
    with spawn_namesrv(tmp / "ns") as ns, spawn_broker(tmp / "b", ns.addr, listenPort=_port_pair()) as b:
        yield ns, b


def test_raw_client_produces_and_consumes_through_the_vip_port(
    cluster: tuple[ServerProcess, ServerProcess],
) -> None:
    ns, broker = cluster
    vip = vip_channel_addr(broker.addr)
    assert vip == f"127.0.0.1:{broker.port - 2}"
    topic = "VipRaw"
    create_topic(ns.addr, topic, 1)
    with BlockingMQClientAPI(ns.addr) as api:  # vip_channel_enabled is off: addresses used as given
        sent = api.send_message(
            vip, "broker-a", Message(topic, b"through-vip"), send_header(topic), timeout_ms=5000
        )
        assert sent.send_status is SendStatus.SEND_OK
        _, _, phy_offset = decode_offset_msg_id(sent.offset_msg_id)
        assert api.view_message(vip, phy_offset).body == b"through-vip"
        api.update_consumer_offset(vip, "vip-group", topic, 0, sent.queue_offset + 1)
        assert api.query_consumer_offset(vip, "vip-group", topic, 0) == sent.queue_offset + 1
        header = pull_header(topic, 0, sent.queue_offset, group="vip-group", max_msg_nums=8)
        with pytest.raises(MQBrokerError) as refused:  # long polls are not served on the VIP port
            api.pull_message(vip, header, timeout_ms=5000)
        assert refused.value.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        pulled = api.pull_message(broker.addr, header, timeout_ms=5000)
        assert [m.body for m in pulled.messages] == [b"through-vip"]


def test_clients_with_vip_channel_enabled_send_through_it(
    cluster: tuple[ServerProcess, ServerProcess],
) -> None:
    ns, broker = cluster
    vip_port = broker.port - 2
    topic = "VipClients"
    create_topic(ns.addr, topic, 2)
    before = _established_to(vip_port)
    with Producer(ns.addr, producer_group="pg-plain") as plain:
        assert plain.send(Message(topic, b"plain")).send_status is SendStatus.SEND_OK
        assert _established_to(vip_port) == before  # without the option: listenPort only
    with Producer(ns.addr, producer_group="pg-vip", client=ClientConfig(vip_channel_enabled=True)) as vip:
        assert vip.send(Message(topic, b"vip")).send_status is SendStatus.SEND_OK
        assert _established_to(vip_port) > before  # the send went to listenPort - 2
    produce_and_consume(
        ns.addr, "VipRoundTrip", group="vip-cg", client=ClientConfig(vip_channel_enabled=True), n=20
    )
