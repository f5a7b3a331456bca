"""Edits of ``plain_acl.yml`` made by the ACL admin requests (codes 50, 51 and 53).

Each edit reads the file as YAML, changes one account (or the global white list), checks that the
result is still valid rules (:func:`~rocketq.server.acl.plain_config.parse_plain_acl`), bumps
the file's ``dataVersion`` (RocketMQ's ``[{counter, timestamp}]`` entry) and replaces the file
atomically (temporary file, fsync, rename), so a reader never sees half a file.  The validator's
mtime poll then installs the new rules; callers force it with ``reload_if_changed(force=True)``.
Comments in the file are not kept (the YAML is re-written), as with RocketMQ.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from rocketq.client.remoting.acl import PlainAccessConfig
from rocketq.server.acl.addresses import AclConfigError
from rocketq.server.acl.plain_config import parse_plain_acl

__all__ = ["AclFileVersion", "acl_file_version", "delete_account", "update_account", "update_global_white"]

AclFileVersion = tuple[int, int]
"""(counter, timestamp in ms) of the file's dataVersion."""


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
    except yaml.YAMLError as exc:
        raise AclConfigError(f"{path}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AclConfigError(f"{path}: not a mapping")
    return data


def acl_file_version(path: str | Path) -> AclFileVersion:
    data = _read(Path(path))
    entries = data.get("dataVersion")
    if isinstance(entries, list) and entries and isinstance(entries[0], dict):
        return int(entries[0].get("counter", 0)), int(entries[0].get("timestamp", 0))
    return 0, 0


def _write(path: Path, data: dict[str, Any]) -> None:
    parse_plain_acl(data)  # never write rules that would not load
    counter, _ = acl_file_version(path)
    data["dataVersion"] = [{"counter": counter + 1, "timestamp": int(time.time() * 1000)}]
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    fd, tmp = tempfile.mkstemp(prefix=".plain_acl.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _accounts(data: dict[str, Any]) -> list[dict[str, Any]]:
    accounts = data.get("accounts")
    if accounts is None:
        accounts = data["accounts"] = []
    if not isinstance(accounts, list):
        raise AclConfigError("accounts must be a list")
    return accounts


def update_account(path: str | Path, config: PlainAccessConfig) -> bool:
    """Create or update the account ``config.access_key``; True when it was created."""
    p = Path(path)
    data = _read(p)
    accounts = _accounts(data)
    entry = next(
        (a for a in accounts if isinstance(a, dict) and str(a.get("accessKey")) == config.access_key), None
    )
    created = entry is None
    if entry is None:
        if config.secret_key is None:
            raise AclConfigError(f"a new account ({config.access_key}) needs a secretKey")
        entry = {"accessKey": config.access_key}
        accounts.append(entry)
    updates: dict[str, Any] = {
        "secretKey": config.secret_key,
        "whiteRemoteAddress": config.white_remote_address,
        "admin": config.admin,
        "defaultTopicPerm": config.default_topic_perm,
        "defaultGroupPerm": config.default_group_perm,
        "topicPerms": None if config.topic_perms is None else list(config.topic_perms),
        "groupPerms": None if config.group_perms is None else list(config.group_perms),
    }
    entry.update({k: v for k, v in updates.items() if v is not None})
    _write(p, data)
    return created


def delete_account(path: str | Path, access_key: str) -> bool:
    """Remove the account; False when there was none."""
    p = Path(path)
    data = _read(p)
    accounts = _accounts(data)
    kept = [a for a in accounts if not (isinstance(a, dict) and str(a.get("accessKey")) == access_key)]
    if len(kept) == len(accounts):
        return False
    data["accounts"] = kept
    _write(p, data)
    return True


def update_global_white(path: str | Path, addresses: list[str]) -> None:
    """Replace ``globalWhiteRemoteAddresses``."""
    p = Path(path)
    data = _read(p)
    data["globalWhiteRemoteAddresses"] = [a.strip() for a in addresses if a.strip()]
    _write(p, data)
