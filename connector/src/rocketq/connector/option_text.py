"""Reading option strings: typed getters whose errors name the option, and the options every
reader and writer shares (``nameServer``, TLS and ACL client settings, unknown-key checks).

Spark hands options over as a case-insensitive mapping of strings (keys arrive lower-cased);
:func:`lower_keys` normalises any mapping to that form, and the getters take keys in their
documented camelCase.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from rocketq.client.config import ClientConfig
from rocketq.client.remoting.vocabulary import NAME_PATTERN
from rocketq.connector.errors import OptionError
from rocketq.connector.value_types import ValueFormat

SPARK_INJECTED = frozenset({"path", "checkpointlocation", "queryname"})
TOPIC_RE = re.compile(NAME_PATTERN)
_DURATION_RE = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """Spark passes a case-insensitive dict; normalise any mapping to lower-case keys."""
    return {str(k).lower(): v for k, v in options.items()}


def get_text(options: Mapping[str, str], key: str) -> str | None:
    value = options.get(key.lower())
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def aliased(options: Mapping[str, str], key: str, alias: str) -> str:
    """Which of ``key`` and its ``alias`` (a Kafka option name) the options give, so errors name
    the option the user wrote; both given is an error."""
    if get_text(options, key) is not None and get_text(options, alias) is not None:
        raise OptionError(alias, f"is another name for '{key}': give only one of them")
    return alias if get_text(options, alias) is not None else key


def get_int(options: Mapping[str, str], key: str, default: int | None, *, low: int = 0) -> int | None:
    text = get_text(options, key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise OptionError(key, f"expected an integer, got {text!r}") from None
    if value < low:
        raise OptionError(key, f"must be >= {low}, got {value}")
    return value


def get_req_int(options: Mapping[str, str], key: str, default: int, *, low: int = 0) -> int:
    value = get_int(options, key, default, low=low)
    assert value is not None
    return value


def get_bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    text = get_text(options, key)
    if text is None:
        return default
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise OptionError(key, f"expected true or false, got {text!r}")


def parse_duration_ms(key: str, text: str) -> int:
    """``"15m"``, ``"30s"``, ``"500ms"``, ``"1h"``, ``"2d"``; a bare number is milliseconds."""
    match = _DURATION_RE.match(text)
    if not match:
        raise OptionError(key, f"expected a duration such as '30s', '15m' or '500ms', got {text!r}")
    return int(match.group(1)) * _DURATION_UNITS_MS[(match.group(2) or "ms").lower()]


#: the client settings every reader and writer takes (TLS, mutual TLS, ACL)
CLIENT_KEYS = frozenset(
    {"tls", "tlstrustcertpath", "tlscertpath", "tlskeypath", "tlskeypassword", "accesskey", "secretkey",
     "securitytoken"}
)  # fmt: skip


def _readable_file(options: Mapping[str, str], key: str) -> str | None:
    path = get_text(options, key)
    if path is not None and not os.path.isfile(path):
        raise OptionError(key, f"{path!r} is not a readable file")
    return path


def client_config(options: Mapping[str, str]) -> ClientConfig:
    """The client settings from the ``tls``, ``tlsTrustCertPath``, ``tlsCertPath``/``tlsKeyPath``
    (mutual TLS: the client's certificate chain and key) and ACL options."""
    use_tls = get_bool(options, "tls", False)
    trust = _readable_file(options, "tlsTrustCertPath")
    cert, key = _readable_file(options, "tlsCertPath"), _readable_file(options, "tlsKeyPath")
    if (cert is None) != (key is None):
        given, missing = ("tlsCertPath", "tlsKeyPath") if key is None else ("tlsKeyPath", "tlsCertPath")
        raise OptionError(missing, f"{given} and {missing} go together (the client's certificate and key)")
    password = get_text(options, "tlsKeyPassword")
    if password is not None and key is None:
        raise OptionError("tlsKeyPassword", "only applies with tlsKeyPath (an encrypted client key)")
    for name, value in (("tlsTrustCertPath", trust), ("tlsCertPath", cert)):
        if value is not None and not use_tls:
            raise OptionError(name, "needs tls=true (TLS connections)")
    # ACL: options accessKey/secretKey (and securityToken) sign every request (docs/security.md "ACL")
    access_key, secret_key = get_text(options, "accessKey"), get_text(options, "secretKey")
    if (access_key is None) != (secret_key is None):
        missing = "accessKey" if access_key is None else "secretKey"
        raise OptionError(missing, "accessKey and secretKey go together")
    token = get_text(options, "securityToken")
    if token is not None and access_key is None:
        raise OptionError("securityToken", "needs accessKey and secretKey (the token travels with them)")
    return ClientConfig(
        use_tls=use_tls,
        tls_trust_cert_path=trust,
        tls_cert_path=cert,
        tls_key_path=key,
        tls_key_password=password,
        access_key=access_key,
        secret_key=secret_key,
        security_token=token,
    )


def check_unknown(options: Mapping[str, str], known: frozenset[str], what: str) -> None:
    for key in options:
        low = str(key).lower()
        if low not in known and low not in SPARK_INJECTED:
            raise OptionError(str(key), f"unknown {what} option; known options: {', '.join(sorted(known))}")


def get_name_server(options: Mapping[str, str]) -> str:
    value = get_text(options, "nameServer") or get_text(options, "namesrvAddr")
    if value is None:
        raise OptionError("nameServer", "required (the NameServer address, e.g. '127.0.0.1:9876')")
    for addr in value.replace(",", ";").split(";"):
        host, sep, port = addr.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise OptionError("nameServer", f"expected 'host:port[;host:port...]', got {value!r}")
    return value


def is_topic_name(name: str) -> bool:
    """Whether ``name`` is a valid RocketMQ topic name (characters and length)."""
    return TOPIC_RE.match(name) is not None and len(name) <= 127


def trace_topic(options: Mapping[str, str]) -> str | None:
    """``traceTopic``: the topic of message traces (default RMQ_SYS_TRACE_TOPIC)."""
    topic = get_text(options, "traceTopic")
    if topic is not None and not TOPIC_RE.match(topic):
        raise OptionError("traceTopic", f"{topic!r} is not a valid RocketMQ topic name")
    return topic


def value_format(options: Mapping[str, str]) -> ValueFormat:
    """``valueFormat`` (the source's decoding, the sink's encoding of the ``value`` column)."""
    text = get_text(options, "valueFormat") or "binary"
    try:
        return ValueFormat(text.lower())
    except ValueError:
        known = ", ".join(f.value for f in ValueFormat)
        raise OptionError("valueFormat", f"expected one of {known}, got {text!r}") from None
