"""RocketMQ 4.x plain-ACL request signing (``AclClientRPCHook``), sans-IO.

A client with credentials adds three ext fields to every request before it is sent:
``AccessKey``, ``SecurityToken`` (only when one is configured) and ``Signature``.  The signature
is ``base64(HmacSHA1(secretKey, content))`` where ``content`` is

* the *values* of the request's ext fields, sorted by field name in Java ``TreeMap`` order
  (UTF-16 code unit order, which for the ASCII names on the wire is plain byte order), after
  ``AccessKey``/``SecurityToken`` were added, leaving out ``Signature`` itself and the
  ``_UNIQUE_KEY_QUERY`` flag (RocketMQ's verifier skips it: Java clients add it outside the
  signed header), concatenated and encoded as UTF-8,
* followed by the body bytes as they are sent.

The verifier (``rocketq.server.acl``) recomputes the same content from the ext fields it
received, so both sides share :func:`request_content` and :func:`calc_signature`.  There is no
timestamp or nonce in this scheme: a captured request can be replayed (see docs/security.md).
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketq.client.errors import ClientError
from rocketq.client.remoting.command import RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "ACL_INFO_FIELDS",
    "DELETE_ACL_ACCESS_KEY",
    "GLOBAL_WHITE_ADDRS",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "UNIQUE_MSG_QUERY_FLAG",
    "PlainAccessConfig",
    "SessionCredentials",
    "calc_signature",
    "request_content",
    "sign_request",
]

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
"""Ext field RocketMQ's verifier leaves out of the signed content (MixAll.UNIQUE_MSG_QUERY_FLAG)."""

_UNSIGNED = frozenset((SIGNATURE, UNIQUE_MSG_QUERY_FLAG))


@dataclass(frozen=True, kw_only=True)
class SessionCredentials:
    """An account's AccessKey/SecretKey, and the optional SecurityToken sent along."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ClientError("ACL credentials need both an access key and a secret key")

    def __repr__(self) -> str:  # never show the secret
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key='***')"


def _java_order(name: str) -> tuple[int, ...]:
    """Sort key matching Java's String.compareTo (UTF-16 code units)."""
    data = name.encode("utf-16-be")
    return tuple(int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))


def request_content(ext_fields: Mapping[str, str], body: bytes | None) -> bytes:
    """The bytes a request's signature covers (AclUtils.combineRequestContent)."""
    names = [k for k in ext_fields if k not in _UNSIGNED]
    # ASCII names (every name RocketMQ defines) sort the same by code point as by UTF-16 unit
    if all(k.isascii() for k in names):
        names.sort()
    else:
        names.sort(key=_java_order)
    text = "".join(ext_fields[k] for k in names)
    return text.encode("utf-8") + body if body else text.encode("utf-8")


def calc_signature(content: bytes, secret_key: str) -> str:
    """``base64(HmacSHA1(secret_key, content))`` (AclUtils.calSignature)."""
    digest = hmac.digest(secret_key.encode("utf-8"), content, "sha1")
    return base64.b64encode(digest).decode("ascii")


def sign_request(cmd: RemotingCommand, credentials: SessionCredentials) -> None:
    """Add AccessKey, SecurityToken (if any) and Signature to ``cmd``'s ext fields, in place.

    Signing a command again (a retry to another address) replaces the earlier signature.
    """
    fields = cmd.ext_fields
    fields.pop(SIGNATURE, None)
    fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        fields[SECURITY_TOKEN] = credentials.security_token
    else:
        fields.pop(SECURITY_TOKEN, None)
    fields[SIGNATURE] = calc_signature(request_content(fields, cmd.body), credentials.secret_key)


# -- the ACL admin requests (codes 50-53) ----------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PlainAccessConfig:
    """UPDATE_AND_CREATE_ACL_CONFIG's header (RocketMQ's CreateAccessConfigRequestHeader).

    ``topic_perms`` / ``group_perms`` are ``"name=PERM"`` items (a comma-separated string on the
    wire); None leaves a field of an existing account unchanged.
    """

    access_key: str
    secret_key: str | None = field(default=None, repr=False)
    white_remote_address: str | None = None
    admin: bool | None = None
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: tuple[str, ...] | None = None
    group_perms: tuple[str, ...] | None = None

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"accessKey": self.access_key}
        optional = {
            "secretKey": self.secret_key,
            "whiteRemoteAddress": self.white_remote_address,
            "admin": None if self.admin is None else str(self.admin).lower(),
            "defaultTopicPerm": self.default_topic_perm,
            "defaultGroupPerm": self.default_group_perm,
            "topicPerms": None if self.topic_perms is None else ",".join(self.topic_perms),
            "groupPerms": None if self.group_perms is None else ",".join(self.group_perms),
        }
        fields.update({k: v for k, v in optional.items() if v is not None})
        return fields

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> PlainAccessConfig:
        def items(name: str) -> tuple[str, ...] | None:
            raw = fields.get(name)
            return None if raw is None else tuple(i.strip() for i in raw.split(",") if i.strip())

        admin = fields.get("admin")
        return cls(
            access_key=fields.get("accessKey", ""),
            secret_key=fields.get("secretKey"),
            white_remote_address=fields.get("whiteRemoteAddress"),
            admin=None if admin is None else admin.strip().lower() == "true",
            default_topic_perm=fields.get("defaultTopicPerm"),
            default_group_perm=fields.get("defaultGroupPerm"),
            topic_perms=items("topicPerms"),
            group_perms=items("groupPerms"),
        )


DELETE_ACL_ACCESS_KEY = "accessKey"
"""DELETE_ACL_CONFIG's header field (DeleteAccessConfigRequestHeader)."""
GLOBAL_WHITE_ADDRS = "globalWhiteAddrs"
"""UPDATE_GLOBAL_WHITE_ADDRS_CONFIG's header field: addresses separated by commas."""
ACL_INFO_FIELDS = ("version", "allAclFileVersion", "clusterName", "brokerName", "brokerAddr")
"""GET_BROKER_CLUSTER_ACL_INFO's response header fields (GetBrokerAclConfigResponseHeader)."""
