"""UPDATE_BROKER_CONFIG (25): change broker configuration at runtime and persist it, as Java does.

The request body is ``key=value`` lines (Java's ``MixAll.properties2String``).  Each key must be
one the broker reads anew on every request (:data:`RUNTIME_KEYS`), so that the change takes effect
without a restart; every other key is refused with NO_PERMISSION and a remark naming it, as Java
refuses the keys of its ``configBlackList`` (``configBlackList``, ``brokerConfigPath``) — rocketq
refuses more because its other settings are read once at start (ports, paths, identity, store
layout, thread pools).  A value is parsed and validated as ``broker.conf`` would be; a bad one is
refused with the key named.  An accepted change is written first, then applied: the whole
configuration is rewritten as properties to the file the broker was started with (``-c``; without
one ``<storePathRootDir>/config/broker.properties``, Java's default place), through a temporary
file and a rename, the previous file kept as ``.bak`` (Java's ``MixAll.string2File``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rocketq.broker.config import BrokerConfig
from rocketq.broker.config_keys import BROKER_KEYS, broker_properties
from rocketq.broker.errors import BrokerConfigError
from rocketq.broker.executor import Busy
from rocketq.broker.processor.context import BrokerContext
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.server import Channel
from rocketq.server.config_update import read_update, write_atomically

__all__ = ["RUNTIME_KEYS", "BrokerConfigProcessor", "config_file_path", "properties_text"]

#: the broker.conf keys whose value the broker reads on each request: changeable at runtime
RUNTIME_KEYS: frozenset[str] = frozenset(
    {
        "enablePropertyFilter",
        "rejectTransactionMessage",
        "maxTransferCountOnMessageInMemory",
        "maxTransferBytesOnMessageInMemory",
        "longPollingEnable",
        "shortPollingTimeMills",
        "slaveReadEnable",
        "recallMessageEnable",
        "serverLoadBalancerEnable",
        "defaultMessageRequestMode",
        "defaultPopShareQueueNum",
        "popResponseReturnActualRetryTopic",
    }
)


def config_file_path(config: BrokerConfig) -> Path:
    """Where the configuration is persisted: the ``-c`` file, else Java's default place."""
    if config.config_file:
        return Path(config.config_file)
    return Path(config.store_path_root_dir) / "config" / "broker.properties"


def properties_text(config: BrokerConfig) -> str:
    """The whole configuration as ``key=value`` lines, the secret key in clear (it is the file)."""
    props = broker_properties(config)
    if config.secret_key:
        props["secretKey"] = config.secret_key
    return "".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in props.items())


class BrokerConfigProcessor:
    """Registered for UPDATE_BROKER_CONFIG."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def update_broker_config(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        props = read_update(request, RUNTIME_KEYS, "set it in broker.conf and restart the broker")
        if isinstance(props, RemotingCommand):
            return props
        try:
            changes = {BROKER_KEYS[k][0]: BROKER_KEYS[k][1](k, v) for k, v in props.items()}
            config = dataclasses.replace(self.ctx.config, **changes)
        except BrokerConfigError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        path = config_file_path(config)
        text = properties_text(config)
        try:
            await self.ctx.query_executor.run(lambda: write_atomically(path, text, keep_backup=True))
        except Busy as busy:
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        except OSError as exc:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"cannot persist the configuration to {path}: {exc}"
            )
        self.ctx.config = config
        return request.make_response(ResponseCode.SUCCESS)
