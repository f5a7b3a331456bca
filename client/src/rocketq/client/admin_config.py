"""Runtime configuration of brokers and NameServers: read it, change what can change while running.

GET_BROKER_CONFIG (26) answers a broker's whole configuration as ``key=value`` lines;
UPDATE_BROKER_CONFIG (25) sends ``key=value`` lines, and the broker applies them at once and
rewrites its configuration file, or refuses a key it cannot change while running (NO_PERMISSION,
the key named in the remark).  GET_NAMESRV_CONFIG (319) / UPDATE_NAMESRV_CONFIG (318) are the
NameServer's pair, sent to every NameServer of the admin client's address list as Java's
``getNamesrvConfig`` / ``updateNamesrvConfig`` do.  The bodies are Java's
``MixAll.properties2String`` text: one unescaped ``key=value`` per line.
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_subgroup import target_brokers
from rocketq.client.errors import MQClientError
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand

__all__ = [
    "get_broker_config",
    "get_namesrv_config",
    "parse_properties_body",
    "properties_body",
    "update_broker_config",
    "update_namesrv_config",
]


def properties_body(props: Mapping[str, str]) -> bytes:
    """``key=value`` lines (Java's ``MixAll.properties2String``); a line break in a value is refused."""
    for k, v in props.items():
        if not k or any(c in k for c in "=:\n\r ") or "\n" in v or "\r" in v:
            raise MQClientError(f"bad config item {k!r}={v!r}: keys are words, values one line")
    return "".join(f"{k}={v}\n" for k, v in props.items()).encode("utf-8")


def parse_properties_body(body: bytes) -> dict[str, str]:
    """The ``key=value`` lines of a config answer (``#`` / ``!`` comments and blank lines skipped)."""
    props: dict[str, str] = {}
    for line in body.decode("utf-8").splitlines():
        text = line.strip()
        if text and text[0] not in "#!":
            key, _, value = text.partition("=")
            props[key.strip()] = value.strip()
    return props


async def get_broker_config(admin: AsyncAdmin, broker_addr: str) -> dict[str, str]:
    """GET_BROKER_CONFIG of one broker: its configuration as ``broker.conf`` keys."""
    cmd = RemotingCommand.request(RequestCode.GET_BROKER_CONFIG)
    response = admin.api.check(await admin.api.invoke(broker_addr, cmd), broker_addr)
    return parse_properties_body(response.body)


async def update_broker_config(
    admin: AsyncAdmin,
    props: Mapping[str, str],
    *,
    broker_addr: str | None = None,
    cluster: str | None = None,
) -> list[str]:
    """UPDATE_BROKER_CONFIG on one broker or every master of ``cluster``; the addresses changed.
    Raises the broker's refusal (MQBrokerError, the key named) at the first broker that refuses."""
    body = properties_body(props)
    addrs = await target_brokers(admin, broker_addr=broker_addr, cluster=cluster)
    for addr in addrs:
        cmd = RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, body=body)
        admin.api.check(await admin.api.invoke(addr, cmd), addr)
    return addrs


async def get_namesrv_config(admin: AsyncAdmin) -> dict[str, dict[str, str]]:
    """GET_NAMESRV_CONFIG of every NameServer: address -> its configuration."""
    result = {}
    for ns in admin.api.namesrv_addrs:
        cmd = RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG)
        response = admin.api.check(await admin.api.invoke(ns, cmd), ns)
        result[ns] = parse_properties_body(response.body)
    return result


async def update_namesrv_config(admin: AsyncAdmin, props: Mapping[str, str]) -> list[str]:
    """UPDATE_NAMESRV_CONFIG on every NameServer; their addresses."""
    body = properties_body(props)
    for ns in admin.api.namesrv_addrs:
        cmd = RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body)
        admin.api.check(await admin.api.invoke(ns, cmd), ns)
    return list(admin.api.namesrv_addrs)
