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

import dataclasses

from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.controller.config import ControllerConfig, config_from_properties
from rocketq.controller.errors import ControllerConfigError
from rocketq.server.config_update import persist_update, read_update

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
    props = read_update(request, RUNTIME_KEYS, "set it in the controller's config file and restart it")
    if isinstance(props, RemotingCommand):
        return props, config
    try:
        updated, _ = config_from_properties(props, config)
    except ControllerConfigError as exc:
        return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc)), config
    updated = dataclasses.replace(updated, config_file=config.config_file)
    response = persist_update(request, props, config.config_file)
    return response, (updated if response.code == ResponseCode.SUCCESS else config)
