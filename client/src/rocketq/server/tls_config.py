"""A server's TLS settings from its config keys, including the file named by ``tls.config.file``.

RocketMQ's ``TlsSystemConfig`` reads the ``tls.*`` keys from the process's properties and,
when ``tls.config.file`` names one, from that properties file first; keys given directly win.
:func:`tls_config_from_properties` does the same for ``broker.conf`` and ``namesrv.properties``:
the file is read with the one ``.properties`` reader (:mod:`rocketq.server.properties`) and the
merged keys become a :class:`~rocketq.client.transport.tls.TlsConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rocketq.client.transport.tls import TlsConfig, TlsConfigError
from rocketq.server.properties import PropertiesSyntaxError, parse_properties

__all__ = ["tls_config_from_properties"]

CONFIG_FILE_KEY = "tls.config.file"


def tls_config_from_properties(props: Mapping[str, str]) -> TlsConfig:
    """The TLS settings: ``tls.config.file``'s keys (if any), overridden by the keys in ``props``."""
    merged: dict[str, str] = {}
    path = props.get(CONFIG_FILE_KEY)
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise TlsConfigError(f"{CONFIG_FILE_KEY}: cannot read {path}: {exc.strerror or exc}") from exc
        try:
            merged.update(parse_properties(text))
        except PropertiesSyntaxError as exc:
            raise TlsConfigError(f"{CONFIG_FILE_KEY}: {path}: {exc}") from None
    merged.update(props)
    return TlsConfig.from_properties(merged)
