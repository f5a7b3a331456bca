"""What a server process (broker, NameServer) plugs in for ACL: the request check and the signer.

``acl_request_check(enabled, path)`` is the ``request_check`` of
:class:`rocketq.server.RemotingServer` (None when ACL is off); the rules file must load at start,
so a typo stops the process with the file named.  :class:`RequestSigner` is the ``rpc_hook`` of
the server's own :class:`~rocketq.client.transport.aio.RemotingClient`, so a broker's
registrations and slave sync carry the broker's ``accessKey``/``secretKey``.
"""

from __future__ import annotations

from rocketq.client.remoting.acl import SessionCredentials, sign_request
from rocketq.client.remoting.command import RemotingCommand
from rocketq.server.acl.plain_config import resolve_acl_file_path
from rocketq.server.acl.validator import PlainAclValidator
from rocketq.server.remoting_server import RequestCheck

__all__ = ["RequestSigner", "acl_request_check", "acl_validator"]


def acl_validator(enabled: bool, acl_file_path: str) -> PlainAclValidator | None:
    """The validator for ``aclEnable``/``aclFilePath``; raises AclConfigError/OSError for a bad file."""
    if not enabled:
        return None
    return PlainAclValidator(resolve_acl_file_path(acl_file_path))


def acl_request_check(enabled: bool, acl_file_path: str) -> RequestCheck | None:
    """The ``request_check`` for ``aclEnable``/``aclFilePath`` (None when ACL is off)."""
    validator = acl_validator(enabled, acl_file_path)
    return None if validator is None else validator.check


class RequestSigner:
    """An ``rpc_hook`` signing every request with one account (None-safe factory: :meth:`of`)."""

    def __init__(self, credentials: SessionCredentials) -> None:
        self.credentials = credentials

    @classmethod
    def of(cls, access_key: str, secret_key: str) -> RequestSigner | None:
        if not access_key and not secret_key:
            return None
        return cls(SessionCredentials(access_key=access_key, secret_key=secret_key))

    def __call__(self, cmd: RemotingCommand) -> None:
        sign_request(cmd, self.credentials)
