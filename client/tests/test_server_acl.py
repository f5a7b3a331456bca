"""rocketq.server.acl: plain_acl.yml parsing, address patterns, the permission matrix, and the
request check wired into a real RemotingServer with a signing RemotingClient."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from rocketq.client.remoting.acl import PlainAccessConfig, SessionCredentials, sign_request
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.transport.aio import RemotingClient
from rocketq.client.transport.channel import Channel
from rocketq.server import RemotingServer
from rocketq.server.acl import (
    AclConfigError,
    AclOutcome,
    AclPerm,
    PlainAclValidator,
    compile_address_pattern,
    load_plain_acl,
    parse_perm,
)
from rocketq.server.acl.plain_file import (
    acl_file_version,
    delete_account,
    update_account,
    update_global_white,
)

ACL_YML = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
      - topicD=PUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: 87654321
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""

USER = SessionCredentials(access_key="RocketMQ", secret_key="12345678")
ADMIN = SessionCredentials(access_key="rocketmq2", secret_key="87654321")
PEER = "127.0.0.1:40000"


@pytest.fixture
def validator(tmp_path: Path) -> PlainAclValidator:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_YML, encoding="utf-8")
    return PlainAclValidator(path, reload_interval_s=0)


def _signed(
    code: int, fields: dict[str, str], creds: SessionCredentials | None, body: bytes = b""
) -> RemotingCommand:
    cmd = RemotingCommand.request(code, fields, body)
    if creds is not None:
        sign_request(cmd, creds)
    return cmd


# -- yml -------------------------------------------------------------------------------------


def test_yml_is_parsed(validator: PlainAclValidator) -> None:
    config = validator.config
    user = config.accounts["RocketMQ"]
    assert user.secret_key == "12345678"  # a YAML int read as text
    assert not user.admin and config.accounts["rocketmq2"].admin
    assert user.default_topic_perm is AclPerm.DENY and user.default_group_perm is AclPerm.SUB
    assert user.resource_perms["topicB"] == AclPerm.PUB | AclPerm.SUB
    assert user.resource_perms["%RETRY%groupA"] == AclPerm.DENY
    assert config.global_white_remote_addresses[0].matches("10.10.103.7")


@pytest.mark.parametrize(
    ("text", "perm"),
    [
        ("PUB", AclPerm.PUB),
        ("SUB", AclPerm.SUB),
        ("PUB|SUB", AclPerm.PUB | AclPerm.SUB),
        ("SUB|PUB", AclPerm.PUB | AclPerm.SUB),
        ("DENY", AclPerm.DENY),
        ("junk", AclPerm.DENY),
        (None, AclPerm.DENY),
    ],
)
def test_parse_perm(text: str | None, perm: AclPerm) -> None:
    assert parse_perm(text) == perm


@pytest.mark.parametrize(
    ("yml", "message"),
    [
        ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "at least 6"),
        (
            "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [nope]\n",
            "name=PERM",
        ),
        ("accounts: 3\n", "must be a list"),
        ("globalWhiteRemoteAddresses: [300.1.1.1]\n", "300.1.1.1"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_bad_yml_is_refused_without_the_secret(tmp_path: Path, yml: str, message: str) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(yml, encoding="utf-8")
    with pytest.raises(AclConfigError, match=message) as info:
        load_plain_acl(path)
    assert "12345678" not in str(info.value)


# -- address patterns ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "ip", "match"),
    [
        ("*", "1.2.3.4", True),
        ("*.*.*.*", "1.2.3.4", True),
        ("", "1.2.3.4", False),
        ("192.168.0.1", "192.168.0.1", True),
        ("192.168.0.1", "192.168.0.2", False),
        ("192.168.0.*", "192.168.0.200", True),
        ("192.168.0.*", "192.168.1.1", False),
        ("192.168.0.{1,2,3}", "192.168.0.2", True),
        ("192.168.0.{1,2,3}", "192.168.0.4", False),
        ("192.168.0.1,10.0.0.2", "10.0.0.2", True),
        ("192.168.1-10.*", "192.168.5.77", True),
        ("192.168.1-10.*", "192.168.11.1", False),
        ("192.168.0.10-20", "192.168.0.15", True),
        ("192.168.0.10-20", "192.168.0.21", False),
        ("192.*.*.*", "192.1.2.3", True),
        ("::1", "0:0:0:0:0:0:0:1", True),
        ("192.168.0.*", "not-an-ip", False),
    ],
)
def test_address_patterns(pattern: str, ip: str, match: bool) -> None:
    assert compile_address_pattern(pattern).matches(ip) is match


@pytest.mark.parametrize(
    "pattern", ["192.168.*.1", "192.168.0.300", "1.2.3", "192.168.0.{1,x}", "*.1.1.1", "10-5.1.1.1"]
)
def test_bad_address_patterns(pattern: str) -> None:
    with pytest.raises(AclConfigError):
        compile_address_pattern(pattern)


# -- permission matrix -----------------------------------------------------------------------

SEND_V2 = RequestCode.SEND_MESSAGE_V2
PULL = RequestCode.PULL_MESSAGE


@pytest.mark.parametrize(
    ("code", "fields", "outcome"),
    [
        (SEND_V2, {"a": "pg", "b": "topicB"}, AclOutcome.ACCEPTED),
        (SEND_V2, {"a": "pg", "b": "topicD"}, AclOutcome.ACCEPTED),
        (SEND_V2, {"a": "pg", "b": "topicC"}, AclOutcome.NO_RESOURCE_PERMISSION),
        (SEND_V2, {"a": "pg", "b": "topicA"}, AclOutcome.NO_RESOURCE_PERMISSION),
        (SEND_V2, {"a": "pg", "b": "other"}, AclOutcome.NO_RESOURCE_PERMISSION),  # default DENY
        (RequestCode.SEND_MESSAGE, {"topic": "topicB"}, AclOutcome.ACCEPTED),
        (SEND_V2, {"a": "pg", "b": "%RETRY%groupB"}, AclOutcome.ACCEPTED),
        (SEND_V2, {"a": "pg", "b": "%RETRY%groupA"}, AclOutcome.NO_RESOURCE_PERMISSION),
        (PULL, {"topic": "topicC", "consumerGroup": "groupB"}, AclOutcome.ACCEPTED),
        (PULL, {"topic": "topicC", "consumerGroup": "anyGroup"}, AclOutcome.ACCEPTED),  # default SUB
        (PULL, {"topic": "topicD", "consumerGroup": "groupB"}, AclOutcome.NO_RESOURCE_PERMISSION),
        (PULL, {"topic": "topicC", "consumerGroup": "groupA"}, AclOutcome.NO_RESOURCE_PERMISSION),
        (PULL, {"topic": "topicC"}, AclOutcome.BAD_REQUEST),
        (
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"topic": "topicB", "consumerGroup": "groupB"},
            AclOutcome.ACCEPTED,
        ),
        (
            RequestCode.CONSUMER_SEND_MSG_BACK,
            {"originTopic": "topicB", "group": "groupA"},
            AclOutcome.NO_RESOURCE_PERMISSION,
        ),
        (RequestCode.QUERY_MESSAGE, {"topic": "topicA"}, AclOutcome.NO_RESOURCE_PERMISSION),
        (RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "anything"}, AclOutcome.ACCEPTED),
        (RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "topicB"}, AclOutcome.NEED_ADMIN),
        (RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "topicB"}, AclOutcome.NEED_ADMIN),
        (RequestCode.GET_BROKER_CONFIG, {}, AclOutcome.NEED_ADMIN),
        (RequestCode.REGISTER_BROKER, {}, AclOutcome.NEED_ADMIN),
    ],
)
def test_permission_matrix_of_a_plain_account(
    validator: PlainAclValidator, code: int, fields: dict[str, str], outcome: AclOutcome
) -> None:
    assert validator.decide(_signed(code, fields, USER), PEER).outcome is outcome


def test_admin_account_without_rules_may_do_anything(validator: PlainAclValidator) -> None:
    for code, fields in [
        (RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "x"}),
        (SEND_V2, {"a": "g", "b": "x"}),
    ]:
        assert validator.decide(_signed(code, fields, ADMIN), PEER).outcome is AclOutcome.ACCEPTED


def test_heartbeat_needs_sub_on_groups_and_topics(validator: PlainAclValidator) -> None:
    def heartbeat(group: str, topic: str) -> RemotingCommand:
        consumer = {"groupName": group, "subscriptionDataSet": [{"topic": topic, "subString": "*"}]}
        body = json.dumps({"clientID": "c", "producerDataSet": [], "consumerDataSet": [consumer]}).encode()
        return _signed(RequestCode.HEART_BEAT, {}, USER, body)

    assert validator.decide(heartbeat("groupB", "topicC"), PEER).outcome is AclOutcome.ACCEPTED
    assert validator.decide(heartbeat("groupA", "topicC"), PEER).outcome is AclOutcome.NO_RESOURCE_PERMISSION
    assert validator.decide(heartbeat("groupB", "topicD"), PEER).outcome is AclOutcome.NO_RESOURCE_PERMISSION
    bad = _signed(RequestCode.HEART_BEAT, {}, USER, b"{not json")
    assert validator.decide(bad, PEER).outcome is AclOutcome.BAD_REQUEST


def test_authentication_outcomes(validator: PlainAclValidator) -> None:
    route = RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert validator.decide(_signed(route, {"topic": "t"}, None), PEER).outcome is AclOutcome.NO_ACCESS_KEY
    unknown = SessionCredentials(access_key="nobody1", secret_key="12345678")
    assert (
        validator.decide(_signed(route, {"topic": "t"}, unknown), PEER).outcome is AclOutcome.UNKNOWN_ACCOUNT
    )
    wrong = SessionCredentials(access_key="RocketMQ", secret_key="wrong-secret")
    assert validator.decide(_signed(route, {"topic": "t"}, wrong), PEER).outcome is AclOutcome.BAD_SIGNATURE
    tampered = _signed(route, {"topic": "t"}, USER)
    tampered.ext_fields["topic"] = "u"
    assert validator.decide(tampered, PEER).outcome is AclOutcome.BAD_SIGNATURE
    body = _signed(RequestCode.SEND_MESSAGE, {"topic": "topicB"}, USER, b"one")
    body.body = b"two"
    assert validator.decide(body, PEER).outcome is AclOutcome.BAD_SIGNATURE
    # white lists: the global one needs no key, an account's skips the signature
    assert (
        validator.decide(_signed(route, {}, None), "10.10.103.9:1").outcome is AclOutcome.GLOBAL_WHITE_LISTED
    )
    forged = _signed(route, {"topic": "t"}, SessionCredentials(access_key="rocketmq2", secret_key="guessed"))
    assert validator.decide(forged, "192.168.1.5:1").outcome is AclOutcome.ACCOUNT_WHITE_LISTED
    assert validator.decide(forged, PEER).outcome is AclOutcome.BAD_SIGNATURE


def test_rules_reload_when_the_file_changes(validator: PlainAclValidator) -> None:
    cmd = _signed(SEND_V2, {"a": "g", "b": "topicC"}, USER)
    assert validator.decide(cmd, PEER).outcome is AclOutcome.NO_RESOURCE_PERMISSION
    validator.path.write_text(ACL_YML.replace("topicC=SUB", "topicC=PUB"), encoding="utf-8")
    later = time.time() + 5
    os.utime(validator.path, (later, later))
    assert validator.decide(cmd, PEER).outcome is AclOutcome.ACCEPTED
    validator.path.write_text("accounts: [", encoding="utf-8")  # broken: the old rules stay
    os.utime(validator.path, (later + 5, later + 5))
    assert validator.decide(cmd, PEER).outcome is AclOutcome.ACCEPTED


# -- through a real server and client --------------------------------------------------------


def test_remoting_server_refuses_with_no_permission(validator: PlainAclValidator) -> None:
    async def echo(cmd: RemotingCommand, channel: Channel) -> RemotingCommand:
        return cmd.make_response(ResponseCode.SUCCESS, "served")

    async def run() -> list[tuple[int, str | None]]:
        server = RemotingServer(request_check=validator.check)
        server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, echo)
        server.register(RequestCode.DELETE_TOPIC_IN_BROKER, echo)
        await server.start()
        signing = RemotingClient(rpc_hook=lambda cmd: sign_request(cmd, USER))
        plain = RemotingClient()
        results = []
        try:
            for client, code in [
                (signing, RequestCode.GET_ROUTEINFO_BY_TOPIC),
                (plain, RequestCode.GET_ROUTEINFO_BY_TOPIC),
                (signing, RequestCode.DELETE_TOPIC_IN_BROKER),
            ]:
                answer = await client.invoke(
                    server.address, RemotingCommand.request(code, {"topic": "t"}), 3000
                )
                results.append((answer.code, answer.remark))
        finally:
            await signing.close()
            await plain.close()
            await server.stop(0)
        return results

    ok, anonymous, not_admin = asyncio.run(run())
    assert ok == (ResponseCode.SUCCESS, "served")
    assert anonymous[0] == ResponseCode.NO_PERMISSION and "AccessKey" in str(anonymous[1])
    assert not_admin[0] == ResponseCode.NO_PERMISSION and "admin" in str(not_admin[1])
    assert "12345678" not in str(not_admin[1])


# -- edits by the ACL admin requests ---------------------------------------------------------


def test_plain_access_config_round_trips_its_header() -> None:
    config = PlainAccessConfig(
        access_key="newuser1", secret_key="secret99", admin=False, topic_perms=("a=PUB", "b=SUB")
    )
    fields = config.to_ext_fields()
    assert fields == {
        "accessKey": "newuser1",
        "secretKey": "secret99",
        "admin": "false",
        "topicPerms": "a=PUB,b=SUB",
    }
    assert PlainAccessConfig.from_ext_fields(fields) == config
    assert "secret99" not in repr(config)


def test_account_edits_rewrite_the_file_and_bump_the_version(validator: PlainAclValidator) -> None:
    path = validator.path
    assert acl_file_version(path) == (0, 0)
    assert update_account(
        path, PlainAccessConfig(access_key="newuser1", secret_key="secret99", topic_perms=("t=PUB",))
    )
    assert not update_account(path, PlainAccessConfig(access_key="RocketMQ", admin=True))
    assert acl_file_version(path)[0] == 2
    validator.reload_if_changed(force=True)
    assert validator.config.accounts["newuser1"].resource_perms == {"t": AclPerm.PUB}
    assert validator.config.accounts["RocketMQ"].admin
    assert validator.config.accounts["RocketMQ"].secret_key == "12345678"  # untouched fields stay
    update_global_white(path, ["10.1.1.*", " "])
    assert delete_account(path, "newuser1") and not delete_account(path, "newuser1")
    validator.reload_if_changed(force=True)
    assert "newuser1" not in validator.config.accounts
    assert [p.source for p in validator.config.global_white_remote_addresses] == ["10.1.1.*"]


def test_invalid_edits_leave_the_file_alone(validator: PlainAclValidator) -> None:
    before = validator.path.read_text(encoding="utf-8")
    with pytest.raises(AclConfigError, match="at least 6"):
        update_account(validator.path, PlainAccessConfig(access_key="newuser1", secret_key="short"))
    with pytest.raises(AclConfigError, match="needs a secretKey"):
        update_account(validator.path, PlainAccessConfig(access_key="newuser2"))
    with pytest.raises(AclConfigError, match=r"300\.1\.1\.1"):
        update_global_white(validator.path, ["300.1.1.1"])
    assert validator.path.read_text(encoding="utf-8") == before
