"""``plain_acl.yml``: RocketMQ 4.x's plain ACL rules, loaded into frozen values.

The file (RocketMQ's format, unchanged)::

    globalWhiteRemoteAddresses: ["10.10.103.*", "192.168.0.*"]   # no credentials needed from here
    accounts:
      - accessKey: RocketMQ
        secretKey: "12345678"
        whiteRemoteAddress: ""          # requests from here skip signature and permission checks
        admin: false                    # admin accounts may send the admin request codes
        defaultTopicPerm: DENY          # for topics not listed in topicPerms
        defaultGroupPerm: SUB           # for groups not listed in groupPerms
        topicPerms: ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB"]
        groupPerms: ["groupA=DENY", "groupB=PUB|SUB"]

Permissions are :class:`AclPerm` flags (RocketMQ's ``Permission``: DENY=1, ANY=2, PUB=4, SUB=8);
an unknown permission word reads as DENY, as in RocketMQ.  Group rules are keyed by the group's
retry topic (``%RETRY%group``), which is how the verifier names a group resource.  Access and
secret keys must be at least 6 characters (RocketMQ's rule).  Anything else malformed raises
:class:`~rocketq.server.acl.addresses.AclConfigError` naming the account, never its secret.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rocketq.client.remoting.vocabulary import retry_topic
from rocketq.server.acl.addresses import AclConfigError, AddressPattern, compile_address_pattern

__all__ = [
    "AclAccount",
    "AclPerm",
    "PlainAclConfig",
    "load_plain_acl",
    "parse_perm",
    "parse_plain_acl",
    "resolve_acl_file_path",
]

MIN_KEY_LENGTH = 6


class AclPerm(enum.IntFlag):
    """RocketMQ ACL permission bits (org.apache.rocketmq.acl.common.Permission)."""

    NONE = 0
    DENY = 1
    ANY = 2
    PUB = 4
    SUB = 8


def parse_perm(text: str | None) -> AclPerm:
    """``"PUB"``, ``"SUB"``, ``"PUB|SUB"``/``"SUB|PUB"``, ``"DENY"``; anything else is DENY."""
    words = {w.strip().upper() for w in (text or "").split("|")}
    if words == {"PUB"}:
        return AclPerm.PUB
    if words == {"SUB"}:
        return AclPerm.SUB
    if words == {"PUB", "SUB"}:
        return AclPerm.PUB | AclPerm.SUB
    return AclPerm.DENY


def perm_allows(needed: AclPerm, owned: AclPerm) -> bool:
    """Permission.checkPermission: DENY refuses all, ANY wants PUB or SUB, else any common bit."""
    if owned & AclPerm.DENY:
        return False
    if needed & AclPerm.ANY:
        return bool(owned & (AclPerm.PUB | AclPerm.SUB))
    return bool(needed & owned)


def perm_name(perm: AclPerm) -> str:
    names = [p.name for p in (AclPerm.DENY, AclPerm.ANY, AclPerm.PUB, AclPerm.SUB) if perm & p and p.name]
    return "|".join(names) or "NONE"


@dataclass(frozen=True)
class AclAccount:
    """One entry of ``accounts``; ``resource_perms`` maps topics and ``%RETRY%group`` names."""

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: AddressPattern
    admin: bool
    default_topic_perm: AclPerm
    default_group_perm: AclPerm
    resource_perms: Mapping[str, AclPerm]


@dataclass(frozen=True)
class PlainAclConfig:
    """The whole file: global white list and accounts by access key."""

    global_white_remote_addresses: tuple[AddressPattern, ...] = ()
    accounts: Mapping[str, AclAccount] = field(default_factory=dict)


def _perm_rules(items: Any, what: str, access_key: str, key_of: Any) -> dict[str, AclPerm]:
    rules: dict[str, AclPerm] = {}
    if items is None:
        return rules
    if not isinstance(items, list):
        raise AclConfigError(f"account {access_key!r}: {what} must be a list of 'name=PERM'")
    for item in items:
        name, sep, perm = str(item).partition("=")
        if not sep or not name.strip():
            raise AclConfigError(f"account {access_key!r}: bad {what} entry {item!r}, expected 'name=PERM'")
        rules[key_of(name.strip())] = parse_perm(perm)
    return rules


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _account(raw: Any, index: int) -> AclAccount:
    if not isinstance(raw, dict):
        raise AclConfigError(f"accounts[{index}] must be a mapping")
    access_key = _text(raw.get("accessKey")).strip()
    secret_key = _text(raw.get("secretKey")).strip()
    if len(access_key) < MIN_KEY_LENGTH or len(secret_key) < MIN_KEY_LENGTH:
        raise AclConfigError(
            f"accounts[{index}] (accessKey {access_key!r}): accessKey and secretKey must each be "
            f"at least {MIN_KEY_LENGTH} characters"
        )
    perms = _perm_rules(raw.get("topicPerms"), "topicPerms", access_key, lambda n: n)
    perms.update(_perm_rules(raw.get("groupPerms"), "groupPerms", access_key, retry_topic))
    admin = raw.get("admin", False)
    return AclAccount(
        access_key=access_key,
        secret_key=secret_key,
        white_remote_address=compile_address_pattern(_text(raw.get("whiteRemoteAddress"))),
        admin=admin is True or str(admin).strip().lower() == "true",
        default_topic_perm=parse_perm(_text(raw.get("defaultTopicPerm")) or None),
        default_group_perm=parse_perm(_text(raw.get("defaultGroupPerm")) or None),
        resource_perms=perms,
    )


def parse_plain_acl(data: Any) -> PlainAclConfig:
    """Build the rules from the parsed YAML document (an empty document is no rules)."""
    if data is None:
        return PlainAclConfig()
    if not isinstance(data, dict):
        raise AclConfigError("plain_acl.yml must be a mapping with globalWhiteRemoteAddresses and accounts")
    white = data.get("globalWhiteRemoteAddresses") or []
    if not isinstance(white, list):
        raise AclConfigError("globalWhiteRemoteAddresses must be a list")
    raw_accounts = data.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise AclConfigError("accounts must be a list")
    accounts: dict[str, AclAccount] = {}
    for i, raw in enumerate(raw_accounts):
        account = _account(raw, i)
        if account.access_key in accounts:
            raise AclConfigError(f"accessKey {account.access_key!r} is defined twice")
        accounts[account.access_key] = account
    return PlainAclConfig(
        global_white_remote_addresses=tuple(compile_address_pattern(_text(w)) for w in white),
        accounts=accounts,
    )


def load_plain_acl(path: str | Path) -> PlainAclConfig:
    """Read and parse ``plain_acl.yml``; raises AclConfigError (or OSError) with the path."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"{path}: not valid YAML: {exc}") from None
    try:
        return parse_plain_acl(data)
    except AclConfigError as exc:
        raise AclConfigError(f"{path}: {exc}") from None


def resolve_acl_file_path(configured: str) -> Path:
    """``aclFilePath``, or RocketMQ's default ``$ROCKETMQ_HOME/conf/plain_acl.yml`` when empty."""
    if configured:
        return Path(configured)
    home = os.environ.get("ROCKETMQ_HOME")
    if not home:
        raise AclConfigError("aclEnable=true needs aclFilePath (or ROCKETMQ_HOME with conf/plain_acl.yml)")
    return Path(home) / "conf" / "plain_acl.yml"
