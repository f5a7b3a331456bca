"""UPDATE_CONTROLLER_CONFIG (1009): change controller settings while it runs, and persist them.

As Java's ``ControllerRequestProcessor.updateControllerConfig``, any controller of the group
answers (not only the Raft leader) and changes only its own settings; ``mqadmin
updateControllerConfig -a`` sends to each controller listed.  Only keys the controller reads each
time it uses them can change (:data:`RUNTIME_KEYS`); any other key is refused with NO_PERMISSION
and a remark naming it, as Java refuses its ``configBlackList`` (default ``configBlackList``,
``configStorePath``) — rocketq refuses more because its other settings are read once at start
(peers, ports, Raft timers, store path, the heartbeat timeout).  A bad value is refused with the
key named.  When the controller was started with a properties file (``mqcontroller -c``, or the
NameServer's ``-c`` for a controller embedded in it), the changed keys are written into that file
(its other lines kept) through a temporary file and a rename, so the change survives a restart;
without a file it lasts until the process stops.
"""

from __future__ import annotations

from rocketq.client.remoting.command import RemotingCommand
from rocketq.controller.config import ControllerConfig, config_from_properties
from rocketq.controller.errors import ControllerConfigError
from rocketq.server.config_update import apply_properties_update

__all__ = ["RUNTIME_KEYS", "apply_update"]

#: the keys the controller reads each time it uses them: changeable at runtime
RUNTIME_KEYS: frozenset[str] = frozenset(
    {
        "enableElectUncleanMaster",
        "notifyBrokerRoleChanged",
        "electMasterMaxRetryCount",
        "scanNotActiveBrokerInterval",
    }
)


def apply_update(
    request: RemotingCommand, config: ControllerConfig
) -> tuple[RemotingCommand, ControllerConfig]:
    """The response to an UPDATE_CONTROLLER_CONFIG request and the configuration to run with."""
    return apply_properties_update(
        request,
        config,
        runtime_keys=RUNTIME_KEYS,
        restart_hint="set it in the controller's config file and restart it",
        parse=config_from_properties,
        error=ControllerConfigError,
        config_file=config.config_file,
    )
