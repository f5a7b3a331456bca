"""The plain-ACL verifier: one decision per request (PlainAccessValidator + PlainPermissionManager).

Order of the checks, as in RocketMQ 4.x:

1. a peer in ``globalWhiteRemoteAddresses`` is accepted;
2. a request without ``AccessKey`` is refused, as is an access key with no account;
3. a peer in the account's ``whiteRemoteAddress`` is accepted without further checks;
4. the ``Signature`` must equal the one computed with the account's secret over the request's
   ext fields and body (:func:`rocketq.client.remoting.acl.request_content`);
5. admin request codes need ``admin: true``; every (resource, permission) the request needs
   (:func:`~rocketq.server.acl.permissions.required_resources`) must be granted by the account's
   rule for that topic or group, or by its default topic/group permission.  An admin account
   with no rules of its own may access every resource.

Refusals are answered ``NO_PERMISSION`` with a remark naming the missing permission.  The rules
file is re-read when its modification time or size changes (checked at most once per
``reload_interval_s``); a file that fails to parse keeps the previous rules and logs the error.
Nothing logged or answered contains a secret key or a signature.
"""

from __future__ import annotations

import enum
import hmac
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rocketq.client.remoting.acl import ACCESS_KEY, SIGNATURE, calc_signature, request_content
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import RETRY_GROUP_TOPIC_PREFIX
from rocketq.client.transport.channel import Channel
from rocketq.server.acl.addresses import AclConfigError
from rocketq.server.acl.permissions import is_admin_code, required_resources
from rocketq.server.acl.plain_config import (
    AclAccount,
    AclPerm,
    PlainAclConfig,
    load_plain_acl,
    perm_allows,
    perm_name,
)

__all__ = ["AclDecision", "AclOutcome", "PlainAclValidator", "first_lacking", "peer_ip"]

log = logging.getLogger("rocketq.server.acl")


class AclOutcome(enum.Enum):
    """Why a request was accepted or refused."""

    GLOBAL_WHITE_LISTED = "GLOBAL_WHITE_LISTED"
    ACCOUNT_WHITE_LISTED = "ACCOUNT_WHITE_LISTED"
    ACCEPTED = "ACCEPTED"
    NO_ACCESS_KEY = "NO_ACCESS_KEY"
    UNKNOWN_ACCOUNT = "UNKNOWN_ACCOUNT"
    BAD_SIGNATURE = "BAD_SIGNATURE"
    NEED_ADMIN = "NEED_ADMIN"
    NO_RESOURCE_PERMISSION = "NO_RESOURCE_PERMISSION"
    BAD_REQUEST = "BAD_REQUEST"

    @property
    def accepted(self) -> bool:
        return self in _ACCEPTED


_ACCEPTED = frozenset({AclOutcome.GLOBAL_WHITE_LISTED, AclOutcome.ACCOUNT_WHITE_LISTED, AclOutcome.ACCEPTED})


@dataclass(frozen=True)
class AclDecision:
    outcome: AclOutcome
    remark: str = ""


def peer_ip(remote_address: str) -> str:
    """``"1.2.3.4:5"`` / ``"[::1]:5"`` -> the IP address without the port."""
    host = remote_address.rpartition(":")[0] if ":" in remote_address else remote_address
    return host.strip("[]")


class PlainAclValidator:
    """Decides requests against ``plain_acl.yml``; see the module docstring."""

    def __init__(self, path: str | Path, *, reload_interval_s: float = 1.0) -> None:
        self.path = Path(path)
        self.reload_interval_s = reload_interval_s
        self._stamp = self._file_stamp()
        self.config: PlainAclConfig = load_plain_acl(self.path)
        self._next_poll = time.monotonic() + reload_interval_s

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def reload_if_changed(self, *, force: bool = False) -> bool:
        """Re-read the file if it changed; True when new rules were installed."""
        now = time.monotonic()
        if not force and now < self._next_poll:
            return False
        self._next_poll = now + self.reload_interval_s
        stamp = self._file_stamp()
        if stamp == self._stamp and not force:
            return False
        self._stamp = stamp
        try:
            self.config = load_plain_acl(self.path)
        except (OSError, AclConfigError) as exc:
            log.error("ACL rules not reloaded, the previous rules stay in force: %s", exc)
            return False
        log.info("ACL rules reloaded from %s (%d accounts)", self.path, len(self.config.accounts))
        return True

    def decide(self, cmd: RemotingCommand, remote_address: str) -> AclDecision:
        """The decision for one request from ``remote_address`` (``ip:port``)."""
        self.reload_if_changed()
        config = self.config
        ip = peer_ip(remote_address)
        if any(p.matches(ip) for p in config.global_white_remote_addresses):
            return AclDecision(AclOutcome.GLOBAL_WHITE_LISTED)
        access_key = cmd.ext_fields.get(ACCESS_KEY)
        if not access_key:
            return AclDecision(AclOutcome.NO_ACCESS_KEY, f"request code {cmd.code} needs an AccessKey")
        account = config.accounts.get(access_key)
        if account is None:
            return AclDecision(AclOutcome.UNKNOWN_ACCOUNT, f"no ACL account for accessKey={access_key}")
        if account.white_remote_address.matches(ip):
            return AclDecision(AclOutcome.ACCOUNT_WHITE_LISTED)
        expected = calc_signature(request_content(cmd.ext_fields, cmd.body), account.secret_key)
        if not hmac.compare_digest(expected, cmd.ext_fields.get(SIGNATURE, "")):
            return AclDecision(AclOutcome.BAD_SIGNATURE, f"check signature failed for accessKey={access_key}")
        if is_admin_code(cmd.code) and not account.admin:
            return AclDecision(
                AclOutcome.NEED_ADMIN,
                f"request code {cmd.code} needs admin permission, accessKey={access_key} is not admin",
            )
        try:
            needed = required_resources(cmd)
        except ValueError as exc:
            return AclDecision(AclOutcome.BAD_REQUEST, f"cannot check permissions: {exc}")
        if account.admin and not account.resource_perms:
            return AclDecision(AclOutcome.ACCEPTED)
        lacking = first_lacking(account, needed)
        if lacking is not None:
            return AclDecision(AclOutcome.NO_RESOURCE_PERMISSION, _missing(access_key, *lacking))
        return AclDecision(AclOutcome.ACCEPTED)

    def check(self, cmd: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """A ``request_check`` for :class:`rocketq.server.RemotingServer`: None or the refusal."""
        decision = self.decide(cmd, channel.remote_address)
        if decision.outcome.accepted:
            return None
        log.info(
            "ACL refused request code %d from %s: %s (%s)",
            cmd.code,
            channel.remote_address,
            decision.outcome.value,
            decision.remark,
        )
        return cmd.make_response(ResponseCode.NO_PERMISSION, decision.remark)


def first_lacking(account: AclAccount, needed: Iterable[tuple[str, AclPerm]]) -> tuple[str, AclPerm] | None:
    """The first (resource, permission) of ``needed`` the account may not use (None: it may use
    them all).  A ``%RETRY%group`` resource is a group: without a rule of its own it gets the
    account's default group permission, a topic the default topic permission."""
    for resource, perm in needed:
        is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
        owned = account.resource_perms.get(resource)
        if owned is None:
            owned = account.default_group_perm if is_group else account.default_topic_perm
        if not perm_allows(perm, owned):
            return resource, perm
    return None


def _missing(access_key: str, resource: str, perm: AclPerm) -> str:
    if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
        what = f"group {resource[len(RETRY_GROUP_TOPIC_PREFIX) :]}"
    else:
        what = f"topic {resource}"
    return f"no {perm_name(perm)} permission on {what} for accessKey={access_key}"
