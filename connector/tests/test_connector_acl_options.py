"""The connector's ACL options: accessKey/secretKey become the ClientConfig credentials."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def test_exactly_once_sink_carries_credentials_and_tls(tmp_path: Path) -> None:
    trust = tmp_path / "ca.pem"
    trust.write_text("not parsed by the option check", encoding="utf-8")
    options = {
        **BASE,
        "accessKey": "rocketq-app",
        "secretKey": "app-secret-1",
        "tls": "true",
        "tlsTrustCertPath": str(trust),
        "deliveryGuarantee": "exactlyOnce",
        "transactionalId": "eos-acl",
    }
    opts = parse_sink_options(options)
    assert opts.exactly_once and opts.sink_id == "eos-acl"
    assert opts.client.credentials == SessionCredentials(access_key="rocketq-app", secret_key="app-secret-1")
    assert opts.client.use_tls and opts.client.tls_trust_cert_path == str(trust)
    assert "app-secret-1" not in repr(opts)


def test_exactly_once_keys_still_go_together() -> None:
    options = {
        **BASE,
        "secretKey": "app-secret-1",
        "deliveryGuarantee": "exactlyOnce",
        "transactionalId": "x",
    }
    with pytest.raises(OptionError, match="accessKey"):
        parse_sink_options(options)


def test_exactly_once_connections_use_the_sinks_client_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor producer, its check listener and the driver's commit log get the sink's ClientConfig."""
    from rocketq.connector import access, transactional

    made: list[tuple[str, Any]] = []

    class FakeProducer:
        def __init__(self, name_server: str, **settings: Any) -> None:
            made.append(("producer", settings))

        def start(self) -> None:
            pass

    monkeypatch.setattr("rocketq.client.producer.TransactionProducer", FakeProducer)

    def fake_access(name_server: str, **kw: Any) -> object:
        made.append(("access", kw))
        return object()

    monkeypatch.setattr(access, "BrokerAccess", fake_access)
    for module, cache in (
        (access, "_EXECUTOR_CACHE"),
        (transactional, "_PRODUCERS"),
        (transactional, "_DRIVER_LOGS"),
    ):
        monkeypatch.setattr(module, cache, {})  # the process-wide caches must not keep the fakes
    opts = parse_sink_options(
        {**BASE, "accessKey": "ak-1", "secretKey": "sk-1", "deliveryGuarantee": "exactlyOnce",
         "transactionalId": "eos-unit-acl"}
    )  # fmt: skip
    transactional.executor_producer(opts.name_server, "eos-unit-acl", 1000, client=opts.client)
    producer = dict(made)["producer"]
    assert producer["client"] == opts.client
    resolver = producer["check_listener"]
    assert resolver.client == opts.client
    assert resolver.commit_log("eos-unit-acl").client == opts.client
    assert transactional.driver_commit_log(opts, "eos-unit-acl").client == opts.client
    # one cached access per (process, NameServer, client settings): the same for both
    assert [kw["client"] for what, kw in made if what == "access"] == [opts.client]
