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


def client_config(options: Mapping[str, str]) -> ClientConfig:
    """The client settings from the ``tls`` and ``tlsTrustCertPath`` options."""
    trust = get_text(options, "tlsTrustCertPath")
    if trust is not None and not os.path.isfile(trust):
        raise OptionError("tlsTrustCertPath", f"{trust!r} is not a readable file")
    # ACL: options accessKey/secretKey sign every request (docs/security.md "ACL")
    access_key, secret_key = get_text(options, "accessKey"), get_text(options, "secretKey")
    if (access_key is None) != (secret_key is None):
        missing = "accessKey" if access_key is None else "secretKey"
        raise OptionError(missing, "accessKey and secretKey go together")
    return ClientConfig(
        use_tls=get_bool(options, "tls", False),
        tls_trust_cert_path=trust,
        access_key=access_key,
        secret_key=secret_key,
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
