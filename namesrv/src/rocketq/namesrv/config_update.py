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
import os
from pathlib import Path

from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.namesrv.config import NamesrvConfig, config_from_properties
from rocketq.namesrv.errors import NamesrvConfigError
from rocketq.server.properties import PropertiesSyntaxError, parse_properties

__all__ = ["RUNTIME_KEYS", "apply_update"]

#: the keys the NameServer reads per request: changeable at runtime
RUNTIME_KEYS: frozenset[str] = frozenset({"orderMessageEnable"})


def _persist(path: Path, changes: dict[str, str]) -> None:
    """Set ``changes`` in the properties file at ``path``, replacing their lines, keeping the rest."""
    old = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    pending = dict(changes)
    lines = []
    for line in old:
        key = line.split("=", 1)[0].strip()
        if key in pending:
            lines.append(f"{key}={pending.pop(key)}")
        else:
            lines.append(line)
    lines += [f"{k}={v}" for k, v in pending.items()]
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def apply_update(request: RemotingCommand, config: NamesrvConfig) -> tuple[RemotingCommand, NamesrvConfig]:
    """The response to an UPDATE_NAMESRV_CONFIG request and the configuration to run with."""
    try:
        props = parse_properties(request.body.decode("utf-8"))
    except (UnicodeDecodeError, PropertiesSyntaxError) as exc:
        return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad properties body: {exc}"), config
    if not props:
        return request.make_response(
            ResponseCode.SYSTEM_ERROR, "no key=value line in the request body"
        ), config
    refused = sorted(k for k in props if k not in RUNTIME_KEYS)
    if refused:
        remark = (
            f"Can not update config in black list: {', '.join(refused)} cannot change at runtime "
            f"(set it in the NameServer's properties file and restart it); runtime-updatable keys: "
            + ", ".join(sorted(RUNTIME_KEYS))
        )
        return request.make_response(ResponseCode.NO_PERMISSION, remark), config
    try:
        updated, _ = config_from_properties(props, config)
    except NamesrvConfigError as exc:
        return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc)), config
    updated = dataclasses.replace(updated, config_file=config.config_file)
    if config.config_file:
        try:
            _persist(Path(config.config_file), props)
        except OSError as exc:
            remark = f"cannot persist the configuration to {config.config_file}: {exc}"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark), config
    return request.make_response(ResponseCode.SUCCESS), updated
