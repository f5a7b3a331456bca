"""The connector's ACL options: accessKey/secretKey become the ClientConfig credentials."""

from __future__ import annotations

import pytest

from rocketq.client.remoting.acl import SessionCredentials
from rocketq.connector.errors import OptionError
from rocketq.connector.options import parse_sink_options, parse_source_options

BASE = {"nameServer": "127.0.0.1:9876", "topic": "T"}


def test_source_and_sink_carry_the_credentials() -> None:
    creds = SessionCredentials(access_key="rocketq-app", secret_key="app-secret-1")
    options = {**BASE, "accessKey": "rocketq-app", "secretKey": "app-secret-1"}
    assert parse_source_options({k.lower(): v for k, v in options.items()}).client.credentials == creds
    assert parse_sink_options(options).client.credentials == creds
    assert parse_sink_options(BASE).client.credentials is None
    assert "app-secret-1" not in repr(parse_sink_options(options))


def test_keys_go_together() -> None:
    with pytest.raises(OptionError, match="secretKey"):
        parse_sink_options({**BASE, "accessKey": "rocketq-app"})


def test_exactly_once_sink_refuses_credentials_for_now() -> None:
    options = {
        **BASE,
        "accessKey": "rocketq-app",
        "secretKey": "app-secret-1",
        "deliveryGuarantee": "exactlyOnce",
    }
    with pytest.raises(OptionError, match="exactlyOnce"):
        parse_sink_options(options)
