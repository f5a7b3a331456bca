"""The account the proxy signs its requests to the brokers with (RocketMQ's cluster-mode ACL hook).

RocketMQ's proxy in cluster mode signs nothing unless ``enableAclRpcHookForClusterMode`` is on;
then every remoting request it sends (sends, pops, acks, heartbeats of its 5.x clients, route
look-ups) carries the 4.x plain-ACL signature of *one* account, the proxy's own: the JSON
``innerClientAuthenticationCredentials`` (``{"accessKey": ..., "secretKey": ...}``) when given,
else the ``accessKey``/``secretKey`` of ``$ROCKETMQ_HOME/conf/tools.yml``
(``DefaultMessagingProcessor.createForClusterMode``).  It does not forward a client's own
AccessKey: the clients' credentials are checked by the proxy itself (``enableACL``,
:mod:`rocketq.proxy.auth`), and the brokers trust the proxy's account.  Where RocketMQ then signs
nothing (no credentials found), rocketq refuses to start, saying what to configure.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from rocketq.client.cli.tools_conf import ToolsConfError, tools_credentials
from rocketq.client.config import ClientConfig
from rocketq.proxy.config import ProxyConfig, ProxyConfigError

__all__ = ["broker_client_config", "proxy_credentials"]


def _inner_credentials(text: str) -> tuple[str, str]:
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise ProxyConfigError(
            "innerClientAuthenticationCredentials must be a JSON object as a string,"
            ' e.g. "{\\"accessKey\\":\\"proxy\\",\\"secretKey\\":\\"12345678\\"}"'
        )
    access = str(doc.get("accessKey") or "").strip()
    secret = str(doc.get("secretKey") or "").strip()
    if not access or not secret:
        raise ProxyConfigError("innerClientAuthenticationCredentials needs both accessKey and secretKey")
    return access, secret


def proxy_credentials(config: ProxyConfig, env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """``(accessKey, secretKey)`` the proxy signs with, or None when it signs nothing."""
    if not config.enable_acl_rpc_hook_for_cluster_mode:
        return None
    if config.inner_client_authentication_credentials.strip():
        return _inner_credentials(config.inner_client_authentication_credentials)
    try:
        found = tools_credentials(None, os.environ if env is None else env)
    except ToolsConfError as exc:
        raise ProxyConfigError(f"enableAclRpcHookForClusterMode=true: {exc}") from None
    if found is None:
        raise ProxyConfigError(
            "enableAclRpcHookForClusterMode=true but the proxy has no account to sign with: give"
            " innerClientAuthenticationCredentials in rmq-proxy.json or accessKey/secretKey in"
            " $ROCKETMQ_HOME/conf/tools.yml"
        )
    return found


def broker_client_config(config: ProxyConfig, env: Mapping[str, str] | None = None) -> ClientConfig:
    """The client settings of every connection from the proxy to the NameServers and brokers."""
    found = proxy_credentials(config, env)
    if found is None:
        return ClientConfig()
    return ClientConfig(access_key=found[0], secret_key=found[1])
