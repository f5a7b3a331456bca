"""UPDATE_NAMESRV_CONFIG (318): change NameServer settings while it runs, and persist them.

The body is ``key=value`` lines.  Only keys the NameServer reads on each request can change
(:data:`RUNTIME_KEYS`: ``orderMessageEnable``); any other key is refused with NO_PERMISSION and a
remark naming it, as Java refuses its ``configBlackList`` (``configBlackList``,
``configStorePath``, ``kvConfigPath``) — rocketq refuses more because its other settings are read
once at start (ports, paths, timers, ACL, TLS).  A bad value is refused with the key named.  When
the NameServer was started with ``-c file``, the changed keys are written into that file (its other
lines kept) through a temporary file and a rename, so the change survives a restart; without a
file it lasts until the NameServer stops.
"""

from __future__ import annotations

import dataclasses

from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.namesrv.config import NamesrvConfig, config_from_properties
from rocketq.namesrv.errors import NamesrvConfigError
from rocketq.server.config_update import persist_update, read_update

__all__ = ["RUNTIME_KEYS", "apply_update"]

#: the keys the NameServer reads per request: changeable at runtime
RUNTIME_KEYS: frozenset[str] = frozenset({"orderMessageEnable"})


def apply_update(request: RemotingCommand, config: NamesrvConfig) -> tuple[RemotingCommand, NamesrvConfig]:
    """The response to an UPDATE_NAMESRV_CONFIG request and the configuration to run with."""
    props = read_update(request, RUNTIME_KEYS, "set it in the NameServer's properties file and restart it")
    if isinstance(props, RemotingCommand):
        return props, config
    try:
        updated, _ = config_from_properties(props, config)
    except NamesrvConfigError as exc:
        return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc)), config
    updated = dataclasses.replace(updated, config_file=config.config_file)
    response = persist_update(request, props, config.config_file)
    return response, (updated if response.code == ResponseCode.SUCCESS else config)
