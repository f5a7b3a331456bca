"""Reading ``broker.conf``: the loader that turns camelCase properties into a ``BrokerConfig``.

The file is read in Java ``.properties`` syntax (:mod:`rocketq.server.properties`), then each key is
routed by the key table (:mod:`.config_keys`): broker keys are parsed into typed fields, store keys
are kept as raw strings and converted once by :func:`build_store_config` so that a bad store value
is rejected at load time too, TLS and metrics keys go to their own config objects.  Unknown keys
produce a warning (RocketMQ has hundreds of knobs; an unimplemented one must not stop a broker from
starting); values that cannot be parsed raise :class:`BrokerConfigError` naming the key.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rocketq.broker.config import BrokerConfig
from rocketq.broker.config_keys import (
    BROKER_KEYS,
    IGNORED_KEYS,
    REFUSED_DLEGER_KEYS,
    STORE_BASE_KEYS,
    store_keys,
)
from rocketq.broker.errors import BrokerConfigError
from rocketq.broker.metrics.config import METRICS_KEYS, MetricsConfig
from rocketq.broker.schedule.delay import parse_delay_levels
from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.errors import StoreError
from rocketq.client.transport.tls import TLS_KEYS, TlsConfigError
from rocketq.server.properties import PropertiesSyntaxError, parse_properties
from rocketq.server.tls_config import tls_config_from_properties

__all__ = ["build_store_config", "camel_to_snake", "config_from_properties", "load_broker_config"]

log = logging.getLogger(__name__)


def camel_to_snake(name: str) -> str:
    """``mappedFileSizeCommitLog`` -> ``mapped_file_size_commit_log``; ``brokerIP1`` -> ``broker_ip1``."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def build_store_config(config: BrokerConfig, **overrides: Any) -> StoreConfig:
    """The store's ``StoreConfig`` for this broker: its store keys plus snake_case ``overrides``."""
    conf: dict[str, str] = {
        "storePathRootDir": config.store_path_root_dir,
        "flushDiskType": config.flush_disk_type.value,
        "maxMessageSize": str(config.max_message_size),
        **dict(config.store_options),
    }
    try:
        return StoreConfig.from_broker_conf(conf, **overrides)
    except (StoreError, ValueError, TypeError) as exc:
        raise BrokerConfigError(_guess_key(str(exc), conf), str(exc)) from exc


def _guess_key(message: str, conf: Mapping[str, str]) -> str:
    for key in conf:
        if key in message or camel_to_snake(key) in message:
            return key
    return "store"


def load_broker_config(
    path: str | os.PathLike[str] | None = None,
    *,
    overrides: Mapping[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> BrokerConfig:
    """Load ``broker.conf`` (if given) plus camelCase ``overrides`` (e.g. ``-n`` on the command line).

    Unknown keys are reported through ``warn`` (default: a logging warning); bad values raise
    :class:`BrokerConfigError` naming the key.
    """
    props: dict[str, str] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise BrokerConfigError("-c", f"cannot read {path}: {exc.strerror or exc}") from exc
        try:
            props.update(parse_properties(text))
        except PropertiesSyntaxError as exc:
            raise BrokerConfigError("-c", f"{path}: {exc}") from None
    props.update(overrides or {})
    return config_from_properties(props, warn=warn)


def config_from_properties(
    props: Mapping[str, str], *, warn: Callable[[str], None] | None = None
) -> BrokerConfig:
    """Build a validated :class:`BrokerConfig` from camelCase properties."""
    warn_fn = warn or log.warning
    store_keys_ = store_keys()
    kwargs: dict[str, Any] = {}
    store_options: dict[str, str] = {}
    tls_options: dict[str, str] = {}
    metrics_options: dict[str, str] = {}
    for key, raw in props.items():
        if key in REFUSED_DLEGER_KEYS:
            raise BrokerConfigError(key, f"{REFUSED_DLEGER_KEYS[key]}; remove {key} from broker.conf")
        known = False
        if key in METRICS_KEYS:
            metrics_options[key] = raw
            known = True
        if key in TLS_KEYS:
            tls_options[key] = raw
            known = True
        if key in BROKER_KEYS:
            attr, parser = BROKER_KEYS[key]
            kwargs[attr] = parser(key, raw)
            known = True
        if key in store_keys_ and key not in STORE_BASE_KEYS:
            store_options[key] = raw.strip()
            known = True
        if not known and key not in IGNORED_KEYS:
            warn_fn(f"broker.conf: unknown key {key!r} ignored")
    if (
        kwargs.get("broker_ip1", "127.0.0.1") not in ("127.0.0.1", "localhost")
        and "bind_address" not in kwargs
    ):
        # Advertising a routable address but listening on loopback would make the broker unreachable.
        kwargs["bind_address"] = "0.0.0.0"
    if "messageDelayLevel" in store_options:
        _check_delay_levels(store_options["messageDelayLevel"])
    kwargs["store_options"] = tuple(sorted(store_options.items()))
    try:
        kwargs["tls"] = tls_config_from_properties(tls_options)
    except TlsConfigError as exc:
        raise BrokerConfigError("tls.server.mode", str(exc)) from None
    kwargs["metrics"] = MetricsConfig.from_properties(metrics_options)
    config = BrokerConfig(**kwargs)
    build_store_config(config)  # rejects bad store values now, with the key named
    return config


def _check_delay_levels(raw: str) -> None:
    try:
        parse_delay_levels(raw)
    except ValueError as exc:
        raise BrokerConfigError("messageDelayLevel", str(exc)) from None
