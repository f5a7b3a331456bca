"""TLS settings of the remoting ports and the ``ssl.SSLContext`` objects built from them.

RocketMQ configures TLS with system properties read by ``TlsSystemConfig`` (``tls.server.mode``,
``tls.server.certPath``, ``tls.client.trustCertPath`` ...), optionally from the properties file
named by ``tls.config.file``.  :class:`TlsConfig` holds the same settings and
:meth:`TlsConfig.from_properties` accepts the same keys, so the broker's ``broker.conf``, the
NameServer's properties file and a client's properties can carry them (the servers read the
``tls.config.file`` itself with :func:`rocketq.server.tls_config.tls_config_from_properties`).

Modes (``tls.server.mode``, alias ``tlsMode``): ``disabled`` serves plaintext only,
``permissive`` serves TLS and plaintext on the same port (the first byte of a connection tells
them apart: a TLS ClientHello starts with the handshake record type 0x16, a remoting frame with
the high byte of its length, which the 16 MiB frame cap keeps at 0), ``enforcing`` serves TLS
only.  Clients connect with TLS when ``tls.enable`` is true (Java's ``ClientConfig.setUseTLS``).

Certificates come from PEM files through the standard library's ``ssl``.  A client verifies the
server's certificate chain when a trust file is given or ``tls.client.authServer`` is true; like
RocketMQ it does not check host names (brokers are addressed by IP).  RocketMQ's test mode
(``tls.test.mode.enable``, a self-signed certificate made at start) needs a certificate
generator the standard library lacks: a server in a TLS mode needs ``tls.server.certPath`` and
``tls.server.keyPath``.
"""

from __future__ import annotations

import enum
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from rocketq.client.errors import RocketQError

__all__ = [
    "TLS_HANDSHAKE_RECORD",
    "TLS_KEYS",
    "ClientAuth",
    "TlsConfig",
    "TlsConfigError",
    "TlsMode",
    "client_ssl_context",
]

TLS_HANDSHAKE_RECORD = 0x16
"""First byte of a TLS ClientHello (record content type ``handshake``)."""


class TlsConfigError(RocketQError):
    """A TLS setting is invalid or a certificate/key file cannot be loaded."""


class TlsMode(enum.Enum):
    """``tls.server.mode``: what a server accepts on its remoting port."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(enum.Enum):
    """``tls.server.need.client.auth``: whether a server asks for a client certificate."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


# Java property key -> TlsConfig field
TLS_KEYS: dict[str, str] = {
    "tls.server.mode": "mode",
    "tlsMode": "mode",
    "tls.enable": "enable",
    "tls.test.mode.enable": "test_mode_enable",
    "tls.server.need.client.auth": "server_need_client_auth",
    "tls.server.keyPath": "server_key_path",
    "tls.server.keyPassword": "server_key_password",
    "tls.server.certPath": "server_cert_path",
    "tls.server.trustCertPath": "server_trust_cert_path",
    "tls.client.keyPath": "client_key_path",
    "tls.client.keyPassword": "client_key_password",
    "tls.client.certPath": "client_cert_path",
    "tls.client.trustCertPath": "client_trust_cert_path",
    "tls.client.authServer": "client_auth_server",
    "tls.config.file": "config_file",
}


@dataclass(frozen=True, kw_only=True)
class TlsConfig:
    """RocketMQ's TLS settings (``TlsSystemConfig``); the server and the client halves."""

    mode: TlsMode = TlsMode.DISABLED
    enable: bool = False  # outgoing connections (broker -> NameServer, slave -> master) use TLS
    test_mode_enable: bool = False
    server_need_client_auth: ClientAuth = ClientAuth.NONE
    server_key_path: str | None = None
    server_key_password: str | None = None
    server_cert_path: str | None = None
    server_trust_cert_path: str | None = None
    client_key_path: str | None = None
    client_key_password: str | None = None
    client_cert_path: str | None = None
    client_trust_cert_path: str | None = None
    client_auth_server: bool = False
    config_file: str | None = None

    def __post_init__(self) -> None:
        if self.mode is not TlsMode.DISABLED and not (self.server_cert_path and self.server_key_path):
            raise TlsConfigError(
                f"tls.server.mode={self.mode.value} needs tls.server.certPath and tls.server.keyPath"
                " (rocketq has no test-mode self-signed certificate)"
            )
        if self.server_need_client_auth is not ClientAuth.NONE and not self.server_trust_cert_path:
            raise TlsConfigError("tls.server.need.client.auth needs tls.server.trustCertPath")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TlsConfig:
        """Build from Java keys (``tls.config.file`` is kept as a path, not read here)."""
        kwargs: dict[str, object] = {}
        for key, raw in props.items():
            name = TLS_KEYS.get(key)
            if name is None:
                continue
            value = raw.strip()
            if name == "mode":
                kwargs[name] = _parse_enum(TlsMode, key, value)
            elif name == "server_need_client_auth":
                kwargs[name] = _parse_enum(ClientAuth, key, value)
            elif name in ("enable", "test_mode_enable", "client_auth_server"):
                kwargs[name] = value.lower() == "true"
            else:
                kwargs[name] = value or None
        return cls(**kwargs)  # type: ignore[arg-type]

    def to_properties(self) -> dict[str, str]:
        """The non-default settings as Java keys (for writing a config file back)."""
        out: dict[str, str] = {}
        default = TlsConfig()
        for key, name in TLS_KEYS.items():
            if key == "tlsMode":
                continue
            value = getattr(self, name)
            if value == getattr(default, name):
                continue
            if isinstance(value, enum.Enum):
                out[key] = str(value.value)
            elif isinstance(value, bool):
                out[key] = "true" if value else "false"
            else:
                out[key] = str(value)
        return out

    def server_context(self) -> ssl.SSLContext | None:
        """The server's context, or None in ``disabled`` mode."""
        if self.mode is TlsMode.DISABLED:
            return None
        assert self.server_cert_path and self.server_key_path
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        _load_chain(ctx, self.server_cert_path, self.server_key_path, self.server_key_password)
        if self.server_need_client_auth is not ClientAuth.NONE:
            assert self.server_trust_cert_path
            _load_trust(ctx, self.server_trust_cert_path)
            ctx.verify_mode = (
                ssl.CERT_REQUIRED if self.server_need_client_auth is ClientAuth.REQUIRE else ssl.CERT_OPTIONAL
            )
        return ctx

    def client_context(self) -> ssl.SSLContext | None:
        """The context for outgoing connections, or None when ``tls.enable`` is false."""
        if not self.enable:
            return None
        return client_ssl_context(
            trust_cert_path=self.client_trust_cert_path,
            auth_server=self.client_auth_server,
            cert_path=self.client_cert_path,
            key_path=self.client_key_path,
            key_password=self.client_key_password,
        )


def client_ssl_context(
    *,
    trust_cert_path: str | None = None,
    auth_server: bool = False,
    cert_path: str | None = None,
    key_path: str | None = None,
    key_password: str | None = None,
) -> ssl.SSLContext:
    """A client context: verifies the server's chain when a trust file is given or ``auth_server``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # as RocketMQ: brokers are addressed by IP, the chain is what counts
    if trust_cert_path:
        _load_trust(ctx, trust_cert_path)
        ctx.verify_mode = ssl.CERT_REQUIRED
    elif auth_server:
        ctx.load_default_certs()
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if cert_path:
        _load_chain(ctx, cert_path, key_path or cert_path, key_password)
    return ctx


def _load_chain(ctx: ssl.SSLContext, cert_path: str, key_path: str, password: str | None) -> None:
    try:
        ctx.load_cert_chain(cert_path, key_path, password)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load certificate {cert_path} / key {key_path}: {exc}") from exc


def _load_trust(ctx: ssl.SSLContext, path: str) -> None:
    try:
        ctx.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load trusted certificates from {path}: {exc}") from exc


def _parse_enum(kind: type[TlsMode] | type[ClientAuth], key: str, value: str) -> TlsMode | ClientAuth:
    try:
        return kind(value.lower())
    except ValueError:
        choices = " | ".join(m.value for m in kind)
        raise TlsConfigError(f"{key}={value!r}: expected {choices}") from None
