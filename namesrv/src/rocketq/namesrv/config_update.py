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

from rocketq.client.remoting.command import RemotingCommand
from rocketq.namesrv.config import NamesrvConfig, config_from_properties
from rocketq.namesrv.errors import NamesrvConfigError
from rocketq.server.config_update import apply_properties_update

__all__ = ["RUNTIME_KEYS", "apply_update"]

#: the keys the NameServer reads per request: changeable at runtime
RUNTIME_KEYS: frozenset[str] = frozenset({"orderMessageEnable"})


def apply_update(request: RemotingCommand, config: NamesrvConfig) -> tuple[RemotingCommand, NamesrvConfig]:
    """The response to an UPDATE_NAMESRV_CONFIG request and the configuration to run with."""
    return apply_properties_update(
        request,
        config,
        runtime_keys=RUNTIME_KEYS,
        restart_hint="set it in the NameServer's properties file and restart it",
        parse=config_from_properties,
        error=NamesrvConfigError,
        config_file=config.config_file,
    )
