"""RocketMQ 4.x plain ACL on the server side, shared by the broker and the NameServer.

:class:`PlainAclValidator` loads ``plain_acl.yml`` (:mod:`.plain_config`), compiles its address
patterns (:mod:`.addresses`), knows what each request code needs (:mod:`.permissions`) and
verifies request signatures; its ``check`` method is the ``request_check`` a
:class:`rocketq.server.RemotingServer` runs before dispatching each request.
"""

from rocketq.server.acl.addresses import AclConfigError, AddressPattern, compile_address_pattern
from rocketq.server.acl.permissions import ADMIN_CODES, is_admin_code, required_resources
from rocketq.server.acl.plain_config import (
    AclAccount,
    AclPerm,
    PlainAclConfig,
    load_plain_acl,
    parse_perm,
    resolve_acl_file_path,
)
from rocketq.server.acl.validator import AclDecision, AclOutcome, PlainAclValidator
from rocketq.server.acl.wiring import RequestSigner, acl_request_check, acl_validator

__all__ = [
    "ADMIN_CODES",
    "AclAccount",
    "AclConfigError",
    "AclDecision",
    "AclOutcome",
    "AclPerm",
    "AddressPattern",
    "PlainAclConfig",
    "PlainAclValidator",
    "RequestSigner",
    "acl_request_check",
    "acl_validator",
    "compile_address_pattern",
    "is_admin_code",
    "load_plain_acl",
    "parse_perm",
    "required_resources",
    "resolve_acl_file_path",
]
