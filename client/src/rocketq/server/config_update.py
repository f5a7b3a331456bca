"""What every ``update*Config`` request shares: reading the body, refusing keys, writing the file.

UPDATE_NAMESRV_CONFIG, UPDATE_BROKER_CONFIG and UPDATE_CONTROLLER_CONFIG all carry ``key=value``
lines (Java's ``MixAll.properties2String``), refuse with NO_PERMISSION the keys that cannot change
while the server runs (Java's ``configBlackList``; rocketq refuses every key outside a server's
runtime set, naming them), and persist an accepted change through a temporary file and a rename
(Java's ``MixAll.string2File``).  Each server keeps its own runtime keys, value parsing and
choice of file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Set
from pathlib import Path
from typing import TypeVar

from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.server.properties import PropertiesSyntaxError, parse_properties

__all__ = [
    "apply_properties_update",
    "merge_properties_file",
    "persist_update",
    "read_update",
    "write_atomically",
]

C = TypeVar("C")


def read_update(
    request: RemotingCommand, runtime_keys: Set[str], restart_hint: str
) -> dict[str, str] | RemotingCommand:
    """The ``key=value`` pairs of an update request, or the response refusing it.

    Refused: a body that is not properties text (SYSTEM_ERROR), an empty one (SYSTEM_ERROR), a key
    outside ``runtime_keys`` (NO_PERMISSION; the remark names the keys, says where to set them
    instead — ``restart_hint`` — and lists the keys that can change).
    """
    try:
        props = parse_properties(request.body.decode("utf-8"))
    except (UnicodeDecodeError, PropertiesSyntaxError) as exc:
        return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad properties body: {exc}")
    if not props:
        return request.make_response(ResponseCode.SYSTEM_ERROR, "no key=value line in the request body")
    refused = sorted(k for k in props if k not in runtime_keys)
    if refused:
        remark = (
            f"Can not update config in black list: {', '.join(refused)} cannot change at runtime "
            f"({restart_hint}); runtime-updatable keys: " + ", ".join(sorted(runtime_keys))
        )
        return request.make_response(ResponseCode.NO_PERMISSION, remark)
    return props


def write_atomically(path: Path, text: str, *, keep_backup: bool = False) -> None:
    """Write ``text`` to ``path`` through ``path.tmp``, fsync and a rename; ``keep_backup`` keeps
    the previous file as ``path.bak`` (Java's ``MixAll.string2File``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if keep_backup and path.exists():
        os.replace(path, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)


def merge_properties_file(path: Path, changes: Mapping[str, str]) -> None:
    """Set ``changes`` in the properties file at ``path``: their lines replaced in place, new keys
    appended, every other line (comments, other keys) kept."""
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
    write_atomically(path, "\n".join(lines) + "\n")


def persist_update(
    request: RemotingCommand, changes: Mapping[str, str], config_file: str | None
) -> RemotingCommand:
    """Write accepted ``changes`` into ``config_file`` (:func:`merge_properties_file`) when the
    server has one: the SUCCESS response, or SYSTEM_ERROR naming the file that could not be written."""
    if config_file:
        try:
            merge_properties_file(Path(config_file), changes)
        except OSError as exc:
            remark = f"cannot persist the configuration to {config_file}: {exc}"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
    return request.make_response(ResponseCode.SUCCESS)


def apply_properties_update(
    request: RemotingCommand,
    config: C,
    *,
    runtime_keys: Set[str],
    restart_hint: str,
    parse: Callable[[Mapping[str, str], C], tuple[C, list[str]]],
    error: type[Exception],
    config_file: str | None,
) -> tuple[RemotingCommand, C]:
    """An update request of a server whose settings are a frozen config read from properties
    (NameServer, controller): the response and the configuration to run with.

    The body is read and refused as :func:`read_update` does; the pairs are applied with
    ``parse(props, config)`` (a bad value raises ``error``, answered SYSTEM_ERROR with its message)
    and written into ``config_file`` (:func:`persist_update`); ``config`` is kept on any refusal.
    """
    props = read_update(request, runtime_keys, restart_hint)
    if isinstance(props, RemotingCommand):
        return props, config
    try:
        updated, _ = parse(props, config)
    except error as exc:
        return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc)), config
    response = persist_update(request, props, config_file)
    return response, (updated if response.code == ResponseCode.SUCCESS else config)
