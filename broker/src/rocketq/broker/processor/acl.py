"""The ACL admin requests, answered by a broker running with ``aclEnable=true``.

UPDATE_AND_CREATE_ACL_CONFIG (50) creates or updates an account, DELETE_ACL_CONFIG (51) removes
one, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) replaces the global white list -- each by rewriting
the broker's ``plain_acl.yml`` (:mod:`rocketq.server.acl.plain_file`) and reloading the rules at
once -- and GET_BROKER_CLUSTER_ACL_INFO (52) tells the file's version.  All four are admin codes:
the request check has refused them before they get here unless an admin account signed them.
A rejected edit answers RocketMQ's ``*_FAILED`` code with the reason (never with a secret).
"""

from __future__ import annotations

import json
import logging

from rocketq.broker.processor.context import BrokerContext
from rocketq.client.remoting.acl import DELETE_ACL_ACCESS_KEY, GLOBAL_WHITE_ADDRS, PlainAccessConfig
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.server import Channel, Processor
from rocketq.server.acl import AclConfigError, PlainAclValidator
from rocketq.server.acl.plain_file import (
    acl_file_version,
    delete_account,
    update_account,
    update_global_white,
)

__all__ = ["AclAdminProcessor"]

log = logging.getLogger("rocketq.broker.acl")


class AclAdminProcessor:
    """Codes 50-53 over the validator's file; see the module docstring."""

    def __init__(self, ctx: BrokerContext, validator: PlainAclValidator) -> None:
        self.ctx = ctx
        self.validator = validator

    def processors(self) -> dict[int, Processor]:
        return {
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: self.update_and_create,
            RequestCode.DELETE_ACL_CONFIG: self.delete,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.get_acl_info,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white,
        }

    def _edited(self, request: RemotingCommand, what: str) -> RemotingCommand:
        self.validator.reload_if_changed(force=True)
        log.info("ACL %s by %s", what, request.ext_fields.get("AccessKey", "?"))
        return request.make_response(ResponseCode.SUCCESS)

    async def update_and_create(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        config = PlainAccessConfig.from_ext_fields(request.ext_fields)
        failed = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        if not config.access_key:
            return request.make_response(failed, "accessKey is required")
        try:
            created = update_account(self.validator.path, config)
        except (AclConfigError, OSError) as exc:
            return request.make_response(failed, f"ACL account {config.access_key} not saved: {exc}")
        return self._edited(request, f"account {config.access_key} {'created' if created else 'updated'}")

    async def delete(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        access_key = request.ext_fields.get(DELETE_ACL_ACCESS_KEY, "")
        failed = ResponseCode.DELETE_ACL_CONFIG_FAILED
        try:
            found = delete_account(self.validator.path, access_key)
        except (AclConfigError, OSError) as exc:
            return request.make_response(failed, f"ACL account {access_key} not deleted: {exc}")
        if not found:
            return request.make_response(failed, f"no ACL account {access_key}")
        return self._edited(request, f"account {access_key} deleted")

    async def update_global_white(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        addresses = request.ext_fields.get(GLOBAL_WHITE_ADDRS, "").split(",")
        try:
            update_global_white(self.validator.path, addresses)
        except (AclConfigError, OSError) as exc:
            return request.make_response(
                ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, f"global white list not saved: {exc}"
            )
        return self._edited(request, "global white list replaced")

    async def get_acl_info(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        path = self.validator.path
        try:
            counter, timestamp = acl_file_version(path)
        except (AclConfigError, OSError) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"cannot read {path}: {exc}")
        version = json.dumps({"counter": counter, "timestamp": timestamp}, separators=(",", ":"))
        config = self.ctx.config
        fields = {
            "version": version,
            "allAclFileVersion": json.dumps({str(path): {"counter": counter, "timestamp": timestamp}}),
            "clusterName": config.broker_cluster_name,
            "brokerName": config.broker_name,
            "brokerAddr": self.ctx.broker_addr,
        }
        return request.make_response(ResponseCode.SUCCESS, ext_fields=fields)
