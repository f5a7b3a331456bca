"""Unit tests of the dashboard without a cluster: password hashes, the users file, the guard that
refuses state changes (read-only mode, missing or wrong logins), the sampler's bounded history and
how group members are marked as RocketMQ 5 SDKs.

The web application runs in aiohttp's in-process test server; its NameServer address points at a
closed port, so a request that passes the guard reaches the handler and fails there (400 for a bad
body), which is how the tests tell "refused by the guard" from "let through".
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_groups import ConsumerConnection
from rocketq.client.launcher import free_port
from rocketq.tools.dashboard.app import DashboardSettings, make_app
from rocketq.tools.dashboard.auth import UsersFileError, UserStore, hash_password, verify_password
from rocketq.tools.dashboard.cli import main as dashboard_main
from rocketq.tools.dashboard.sampler import Sample, Sampler
from rocketq.tools.dashboard.service import client_protocol, connection_json

DEAD_NAMESRV = f"127.0.0.1:{free_port()}"
HASH = hash_password("pw-1")
GOOD = "Basic " + base64.b64encode(b"alice:pw-1").decode()
BAD = "Basic " + base64.b64encode(b"alice:wrong").decode()
PAGE = {"X-Requested-With": "rocketq-dashboard"}
Client = TestClient[web.Request, web.Application]


def test_hash_round_trip_and_salt() -> None:
    assert verify_password("pw-1", HASH)
    assert not verify_password("pw-2", HASH)
    assert hash_password("pw-1") != HASH  # a fresh salt each time
    with pytest.raises(UsersFileError, match="scrypt"):
        verify_password("pw-1", "plain-text-password")


def test_users_file(tmp_path: Path) -> None:
    good = tmp_path / "users.yml"
    good.write_text(f'users:\n  alice: "{HASH}"\nlogin_required_for_reads: true\n', encoding="utf-8")
    store = UserStore.load(good)
    assert store.check(GOOD) == "alice" and store.check(GOOD) == "alice"  # second time from the cache
    assert store.check(BAD) is None and store.check(None) is None and store.check("Basic !!") is None
    assert store.login_required_for_reads
    bad = tmp_path / "bad.yml"
    bad.write_text("users:\n  bob: secret\n", encoding="utf-8")
    with pytest.raises(UsersFileError, match="bob"):
        UserStore.load(bad)


def test_hash_password_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("pw-1\n"))
    assert dashboard_main(["hash-password", "--password-stdin"]) == 0
    assert verify_password("pw-1", capsys.readouterr().out.strip())


def _run(settings: DashboardSettings, body: Callable[[Client], Awaitable[None]]) -> None:
    async def go() -> None:
        async with TestClient(TestServer(make_app(settings))) as client:
            await body(client)

    asyncio.run(go())


def test_read_only_refuses_every_state_change() -> None:
    settings = DashboardSettings(namesrv_addr=DEAD_NAMESRV, read_only=True, users=UserStore({"alice": HASH}))

    async def body(client: Client) -> None:
        for path in ("/api/topics", "/api/topics/t/messages", "/api/groups/g/reset-offset"):
            resp = await client.post(path, json={}, headers={"Authorization": GOOD})
            assert resp.status == 403, path
            assert "read-only" in (await resp.json())["error"]
        assert (await client.get("/api/config")).status == 200
        assert (await client.get("/topics")).status == 200

    _run(settings, body)


def test_state_changes_need_a_valid_login() -> None:
    settings = DashboardSettings(namesrv_addr=DEAD_NAMESRV, users=UserStore({"alice": HASH}))

    async def body(client: Client) -> None:
        resp = await client.post("/api/topics", json={"topic": "t"})
        assert resp.status == 401 and "WWW-Authenticate" in resp.headers
        resp = await client.post("/api/topics", json={"topic": "t"}, headers={**PAGE, "Authorization": BAD})
        assert resp.status == 401 and "WWW-Authenticate" not in resp.headers  # no browser pop-up
        resp = await client.post("/api/topics", json={}, headers={"Authorization": GOOD})
        assert resp.status == 400 and "topic name" in (await resp.json())["error"]  # passed the guard
        assert (await client.get("/api/whoami", headers={"Authorization": GOOD})).status == 200
        assert (await client.get("/api/whoami", headers={**PAGE, "Authorization": BAD})).status == 401

    _run(settings, body)


def test_without_users_nothing_may_change() -> None:
    async def body(client: Client) -> None:
        resp = await client.post("/api/topics", json={"topic": "t"}, headers={"Authorization": GOOD})
        assert resp.status == 401 and "--users" in (await resp.json())["error"]

    _run(DashboardSettings(namesrv_addr=DEAD_NAMESRV), body)


def test_reads_can_require_a_login() -> None:
    users = UserStore({"alice": HASH}, login_required_for_reads=True)

    async def body(client: Client) -> None:
        assert (await client.get("/api/history")).status == 401
        assert (await client.get("/api/history", headers={"Authorization": GOOD})).status == 200
        assert (await client.get("/api/config")).status == 200  # the page needs it to show the login

    _run(DashboardSettings(namesrv_addr=DEAD_NAMESRV, users=users), body)


def test_sampler_history_is_bounded_and_survives_a_dead_cluster() -> None:
    async def go() -> None:
        admin = AsyncAdmin(DEAD_NAMESRV)
        sampler = Sampler(admin, interval_s=0.01, capacity=3)
        try:
            for _ in range(5):
                sampler.samples.append(await sampler.sample_once())
        finally:
            await admin.close()
        assert len(sampler.samples) == 3
        assert all(s.tps == {} and s.lag == {} for s in sampler.samples)
        assert Sample(1, {"b:1": (1.5, 2.0)}, {"g": 3}).to_json() == {
            "t": 1,
            "tps": {"b:1": {"put": 1.5, "get": 2.0}},
            "lag": {"g": 3},
        }

    asyncio.run(go())


def test_group_members_say_which_are_rocketmq_5_sdks() -> None:
    python_sdk = ConsumerConnection("host@1@0@abc", "127.0.0.1:5000", "PYTHON", 437)
    assert connection_json(python_sdk) == {
        "client_id": "host@1@0@abc",
        "client_addr": "127.0.0.1:5000",
        "language": "PYTHON",
        "version": 437,
        "version_name": "V5_1_2",
        "protocol": "gRPC 5.x",
    }
    assert client_protocol("NODE_JS", 413) == "gRPC 5.x"
    assert client_protocol("JAVA", 479) == "5.x"  # Java 5's remoting and gRPC clients look alike
    assert client_protocol("PYTHON", 401) == "remoting"  # rocketq's own clients send V4_9_4
    assert client_protocol("JAVA", 373) == "remoting"
