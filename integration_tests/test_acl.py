"""Plain ACL (RocketMQ 4.x AccessKey/SecretKey signing) with real mqnamesrv/mqbroker processes.

One NameServer and one broker per module, both with ``aclEnable=true`` and the same
``plain_acl.yml``; the broker signs its own registrations with an admin account.  Checked: every
admin and data request is refused (NO_PERMISSION, with a remark naming what is missing) without
credentials, with a wrong signature, with an unknown account, and without the needed permission,
and accepted with the right account; a forged REGISTER_BROKER cannot change a route; producer,
lite-pull consumer, mqadmin, the Spark connector and a third-party client (npm ``ali-ons``) work
with credentials; the rules reload when the file changes.  The scheme carries no timestamp, so a
replayed request is accepted (docs/security.md says so); there is no replay test to pass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from rocketq.client.admin import Admin
from rocketq.client.config import ClientConfig
from rocketq.client.errors import MQBrokerError, RocketQError
from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.remoting.acl import SessionCredentials, sign_request
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import RegisterBrokerRequestHeader
from rocketq.client.remoting.route import RegisterBrokerBody, TopicConfigSerializeWrapper
from rocketq.client.remoting.vocabulary import TopicConfig
from rocketq.client.testing import (
    ServerProcess,
    produce_and_consume,
    read_topic,
    run_mqadmin,
    spawn_broker,
    spawn_namesrv,
    wait_for,
    wait_route,
)
from rocketq.client.transport.blocking import BlockingRemotingClient

# Answers come at once; the bound only turns a regression into a failure instead of a hang.
ANSWER_BOUND_MS = 5_000
ALI_ONS_VERSION = "3.12.0"

ADMIN = SessionCredentials(access_key="rocketq-admin", secret_key="admin-secret-1")
APP = SessionCredentials(access_key="rocketq-app", secret_key="app-secret-1")
OPEN = SessionCredentials(access_key="rocketq-open", secret_key="open-secret-1")
WRONG_SECRET = SessionCredentials(access_key="rocketq-app", secret_key="not-the-secret")
UNKNOWN = SessionCredentials(access_key="nobody-here", secret_key="whatever-1")
# exactly-once sink: the target topics, and the commit-log topics an admin creates beforehand for
# the sinks of the non-admin account (docs/security.md "ACL and the exactly-once sink")
EOS_TOPICS = (
    "AclEos",
    "AclEosSubOnly",
    "AclEosCheck",
    "RQ_SINK_COMMITS_acl-eos",
    "RQ_SINK_COMMITS_acl-eos-check",
)
ALL_TOPICS = ("AclTopic", "AclSubOnly", "AclDenied", "AclOpen", "AclSpark", "AclOns", *EOS_TOPICS)

PLAIN_ACL_YML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: rocketq-admin
    secretKey: admin-secret-1
    admin: true
  - accessKey: rocketq-app
    secretKey: app-secret-1
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - AclTopic=PUB|SUB
      - AclSubOnly=SUB
      - AclDenied=DENY
      - AclOns=PUB|SUB
    groupPerms:
      - acl-cg=SUB
      - acl-ons=SUB
  - accessKey: rocketq-open
    secretKey: open-secret-1
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - AclEosSubOnly=SUB
"""


@dataclass(frozen=True)
class AclCluster:
    ns: ServerProcess
    broker: ServerProcess
    acl_file: Path


def config_of(creds: SessionCredentials) -> ClientConfig:
    return ClientConfig(access_key=creds.access_key, secret_key=creds.secret_key)


@pytest.fixture(scope="module")
def acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    tmp = tmp_path_factory.mktemp("acl")
    acl_file = tmp / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL_YML, encoding="utf-8")
    ns_dir = tmp / "ns"
    with spawn_namesrv(ns_dir, "-o", "aclEnable=true", "-o", f"aclFilePath={acl_file}") as ns:
        # the broker checks requests with the same rules and signs its own with the admin account
        with spawn_broker(
            tmp,
            ns.addr,
            aclEnable="true",
            aclFilePath=str(acl_file),
            accessKey=ADMIN.access_key,
            secretKey=ADMIN.secret_key,
            # the exactly-once sink's check-backs come after 1 s (test_exactly_once_check_back_...)
            transactionTimeOut=1000,
            transactionCheckInterval=500,
            flushDiskType="SYNC_FLUSH",
        ) as broker:
            with Admin(ns.addr, config=config_of(ADMIN)) as admin:
                for topic in ALL_TOPICS:
                    admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
                for topic in ALL_TOPICS:
                    wait_route(admin, topic)
            yield AclCluster(ns, broker, acl_file)
            print(f"--- broker log ---\n{broker.log_tail()}")
        print(f"--- namesrv log ---\n{ns.log_tail()}")


def invoke(addr: str, code: int, fields: dict[str, str], creds: SessionCredentials | None) -> RemotingCommand:
    cmd = RemotingCommand.request(code, fields)
    if creds is not None:
        sign_request(cmd, creds)
    with BlockingRemotingClient() as client:
        return client.invoke(addr, cmd, ANSWER_BOUND_MS)


REFUSALS = [
    pytest.param(None, "needs an AccessKey", id="no-credentials"),
    pytest.param(WRONG_SECRET, "check signature failed", id="wrong-signature"),
    pytest.param(UNKNOWN, "no ACL account", id="unknown-account"),
]

# (server, code, fields): harmless targets, so that the admin account's success changes nothing
ADMIN_REQUESTS = [
    ("broker", RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "AclScratch", "readQueueNums": "1",
     "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG", "defaultTopic": "TBW102"}),
    ("broker", RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "AclScratchNone"}),
    ("broker", RequestCode.GET_BROKER_CONFIG, {}),
    ("broker", RequestCode.GET_ALL_TOPIC_CONFIG, {}),
    ("broker", RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "acl-no-such-group"}),
    ("broker", RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
     {"topic": "AclTopic", "group": "acl-no-such-group", "timestamp": "0", "isForce": "true"}),
    ("namesrv", RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "AclScratchNone"}),
    ("namesrv", RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "no-such-broker"}),
    ("namesrv", RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "no-such-broker"}),
    ("namesrv", RequestCode.PUT_KV_CONFIG, {"namespace": "acl-test", "key": "k", "value": "v"}),
    ("namesrv", RequestCode.DELETE_KV_CONFIG, {"namespace": "acl-test", "key": "k"}),
    ("namesrv", RequestCode.GET_NAMESRV_CONFIG, {}),
]  # fmt: skip


def _server(acl: AclCluster, which: str) -> str:
    return acl.broker.addr if which == "broker" else acl.ns.addr


@pytest.mark.parametrize(("creds", "remark"), REFUSALS)
@pytest.mark.parametrize(("which", "code", "fields"), ADMIN_REQUESTS)
def test_admin_request_refused(
    acl: AclCluster,
    which: str,
    code: int,
    fields: dict[str, str],
    creds: SessionCredentials | None,
    remark: str,
) -> None:
    answer = invoke(_server(acl, which), code, fields, creds)
    assert answer.code == ResponseCode.NO_PERMISSION, answer
    assert remark in (answer.remark or "")


@pytest.mark.parametrize(("which", "code", "fields"), ADMIN_REQUESTS)
def test_admin_request_needs_an_admin_account(
    acl: AclCluster, which: str, code: int, fields: dict[str, str]
) -> None:
    refused = invoke(_server(acl, which), code, fields, APP)
    assert refused.code == ResponseCode.NO_PERMISSION
    assert "needs admin permission" in (refused.remark or "") and "rocketq-app" in (refused.remark or "")
    accepted = invoke(_server(acl, which), code, fields, ADMIN)
    assert accepted.code != ResponseCode.NO_PERMISSION, accepted
    if code in (RequestCode.GET_BROKER_CONFIG, RequestCode.PUT_KV_CONFIG, RequestCode.GET_ALL_TOPIC_CONFIG):
        assert accepted.code == ResponseCode.SUCCESS


def test_broker_config_never_shows_the_secret(acl: AclCluster) -> None:
    answer = invoke(acl.broker.addr, RequestCode.GET_BROKER_CONFIG, {}, ADMIN)
    assert answer.code == ResponseCode.SUCCESS
    assert ADMIN.secret_key.encode() not in answer.body
    assert ADMIN.secret_key not in acl.broker.log_text() + acl.ns.log_text()


DATA_REQUESTS = [
    ("broker", RequestCode.SEND_MESSAGE_V2, {"a": "acl-pg", "b": "AclTopic"}),
    ("broker", RequestCode.PULL_MESSAGE, {"topic": "AclTopic", "consumerGroup": "acl-cg"}),
    ("broker", RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": "AclTopic", "consumerGroup": "acl-cg"}),
    ("namesrv", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "AclTopic"}),
]


@pytest.mark.parametrize(("creds", "remark"), REFUSALS)
@pytest.mark.parametrize(("which", "code", "fields"), DATA_REQUESTS)
def test_data_request_refused(
    acl: AclCluster,
    which: str,
    code: int,
    fields: dict[str, str],
    creds: SessionCredentials | None,
    remark: str,
) -> None:
    answer = invoke(_server(acl, which), code, fields, creds)
    assert answer.code == ResponseCode.NO_PERMISSION, answer
    assert remark in (answer.remark or "")


@pytest.mark.parametrize(
    ("code", "fields", "missing"),
    [
        (
            RequestCode.SEND_MESSAGE_V2,
            {"a": "acl-pg", "b": "AclSubOnly"},
            "no PUB permission on topic AclSubOnly",
        ),
        (
            RequestCode.SEND_MESSAGE_V2,
            {"a": "acl-pg", "b": "AclDenied"},
            "no PUB permission on topic AclDenied",
        ),
        (RequestCode.SEND_MESSAGE_V2, {"a": "acl-pg", "b": "AclOpen"}, "no PUB permission on topic AclOpen"),
        (
            RequestCode.PULL_MESSAGE,
            {"topic": "AclDenied", "consumerGroup": "acl-cg"},
            "no SUB permission on topic",
        ),
        (RequestCode.PULL_MESSAGE, {"topic": "AclTopic", "consumerGroup": "other-cg"}, "on group other-cg"),
    ],
)
def test_missing_resource_permission(
    acl: AclCluster, code: int, fields: dict[str, str], missing: str
) -> None:
    answer = invoke(acl.broker.addr, code, fields, APP)
    assert answer.code == ResponseCode.NO_PERMISSION
    assert missing in (answer.remark or "")


def test_producer_and_consumer_with_credentials(acl: AclCluster) -> None:
    produce_and_consume(acl.ns.addr, "AclTopic", group="acl-cg", client=config_of(APP))
    produce_and_consume(acl.ns.addr, "AclOpen", group="open-cg", client=config_of(OPEN))


def test_producer_without_the_permission_gets_no_permission(acl: AclCluster) -> None:
    with Producer(acl.ns.addr, producer_group="pg-denied", client=config_of(APP)) as producer:
        with pytest.raises(MQBrokerError) as info:
            producer.send(Message("AclSubOnly", b"x"))
    assert info.value.code == ResponseCode.NO_PERMISSION
    assert "AclSubOnly" in (info.value.remark or "")


def test_unsigned_client_cannot_even_route(acl: AclCluster) -> None:
    with Admin(acl.ns.addr) as admin, pytest.raises(RocketQError, match="AccessKey"):
        admin.topic_route("AclTopic")


def _forged_registration(creds: SessionCredentials | None) -> RemotingCommand:
    wrapper = TopicConfigSerializeWrapper(topic_config_table={"AclTopic": TopicConfig(topic_name="AclTopic")})
    body = RegisterBrokerBody(topic_config_serialize_wrapper=wrapper).to_json()
    header = RegisterBrokerRequestHeader(
        broker_name="broker-a",
        broker_addr="127.0.0.1:1",
        cluster_name="DefaultCluster",
        ha_server_addr="127.0.0.1:2",
        broker_id=0,
        compressed=False,
        body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
    )
    cmd = RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)
    if creds is not None:
        sign_request(cmd, creds)
    return cmd


def test_forged_register_broker_cannot_change_a_route(acl: AclCluster) -> None:
    for creds in (None, APP, OPEN, WRONG_SECRET):
        with BlockingRemotingClient() as forger:
            answer = forger.invoke(acl.ns.addr, _forged_registration(creds), ANSWER_BOUND_MS)
            assert answer.code == ResponseCode.NO_PERMISSION
            unregister = RemotingCommand.request(
                RequestCode.UNREGISTER_BROKER,
                {"brokerName": "broker-a", "brokerAddr": acl.broker.addr, "clusterName": "DefaultCluster",
                 "brokerId": "0"},
            )  # fmt: skip
            if creds is not None:
                sign_request(unregister, creds)
            assert forger.invoke(acl.ns.addr, unregister, ANSWER_BOUND_MS).code == ResponseCode.NO_PERMISSION
        # the forger's connection is closed now: the real broker must still own the route
        with Admin(acl.ns.addr, config=config_of(APP)) as admin:
            route = admin.topic_route("AclTopic")
        addrs = {a for bd in route.broker_datas for a in bd.broker_addrs.values()}
        assert addrs == {acl.broker.addr}


def test_mqadmin_with_and_without_credentials(acl: AclCluster) -> None:
    create = ["updateTopic", "-n", acl.ns.addr, "-c", "DefaultCluster", "-t", "AclByMqadmin"]
    refused = run_mqadmin(*create)
    assert refused.returncode == 1
    assert "CODE: 16" in refused.stderr and "AccessKey" in refused.stderr
    not_admin = run_mqadmin(*create, "--access-key", APP.access_key, "--secret-key", APP.secret_key)
    assert not_admin.returncode == 1 and "needs admin permission" in not_admin.stderr
    ok = run_mqadmin(*create, "--access-key", ADMIN.access_key, "--secret-key", ADMIN.secret_key)
    assert ok.returncode == 0, ok.stderr
    env = {"ROCKETMQ_ACCESS_KEY": ADMIN.access_key, "ROCKETMQ_SECRET_KEY": ADMIN.secret_key}
    listed = run_mqadmin("topicList", "-n", acl.ns.addr, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "AclByMqadmin" in listed.stdout


def test_rules_reload_when_the_file_changes(acl: AclCluster) -> None:
    fields = {"a": "acl-pg", "b": "AclLater"}
    assert (
        invoke(acl.broker.addr, RequestCode.SEND_MESSAGE_V2, fields, APP).code == ResponseCode.NO_PERMISSION
    )
    rules = yaml.safe_load(acl.acl_file.read_text(encoding="utf-8"))
    app = next(a for a in rules["accounts"] if a["accessKey"] == APP.access_key)
    app["topicPerms"].append("AclLater=PUB")
    acl.acl_file.write_text(yaml.safe_dump(rules), encoding="utf-8")
    # the file is polled about once a second; past the ACL check, the processor then finds the
    # header incomplete
    wait_for(
        lambda: (
            invoke(acl.broker.addr, RequestCode.SEND_MESSAGE_V2, fields, APP).code
            != ResponseCode.NO_PERMISSION
        ),
        "the changed plain_acl.yml to be picked up",
        interval_s=0.2,
    )


def test_mqadmin_acl_subcommands(acl: AclCluster) -> None:
    admin_keys = ["--access-key", ADMIN.access_key, "--secret-key", ADMIN.secret_key]
    ns, broker = ["-n", acl.ns.addr], ["-b", acl.broker.addr]
    user = SessionCredentials(access_key="made-by-mqadmin", secret_key="mqadmin-secret-1")
    send = {"a": "acl-pg", "b": "AclTopic"}
    assert "no ACL account" in (invoke(acl.broker.addr, RequestCode.SEND_MESSAGE_V2, send, user).remark or "")

    create = ["updateAclConfig", *broker, "-a", user.access_key, "-s", user.secret_key, "-t", "AclTopic=PUB"]
    refused = run_mqadmin(*create, "--access-key", APP.access_key, "--secret-key", APP.secret_key)
    assert refused.returncode == 1 and "CODE: 16" in refused.stderr
    created = run_mqadmin(*create, *admin_keys)
    assert created.returncode == 0, created.stderr
    assert f"create or update plain access config to {acl.broker.addr} success." in created.stdout
    assert user.secret_key not in acl.broker.log_text()
    # the broker reloads at once: the new account passes the ACL check (the bare header then fails)
    assert invoke(acl.broker.addr, RequestCode.SEND_MESSAGE_V2, send, user).code != ResponseCode.NO_PERMISSION

    versions = run_mqadmin("clusterAclConfigVersion", *ns, "-c", "DefaultCluster", *admin_keys)
    assert versions.returncode == 0, versions.stderr
    assert "#AclConfigVersionNum" in versions.stdout
    assert "broker-a" in versions.stdout and str(acl.acl_file) in versions.stdout

    white = run_mqadmin("updateGlobalWhiteAddr", *broker, "-g", "10.99.0.*", *admin_keys)
    assert white.returncode == 0, white.stderr
    assert yaml.safe_load(acl.acl_file.read_text(encoding="utf-8"))["globalWhiteRemoteAddresses"] == [
        "10.99.0.*"
    ]
    bad = run_mqadmin("updateGlobalWhiteAddr", *broker, "-g", "300.1.1.1", *admin_keys)
    assert bad.returncode == 1 and "CODE: 211" in bad.stderr

    deleted = run_mqadmin("deleteAclConfig", *broker, "-a", user.access_key, *admin_keys)
    assert deleted.returncode == 0, deleted.stderr
    assert "no ACL account" in (invoke(acl.broker.addr, RequestCode.SEND_MESSAGE_V2, send, user).remark or "")
    again = run_mqadmin("deleteAclConfig", *broker, "-a", user.access_key, *admin_keys)
    assert again.returncode == 1 and "CODE: 210" in again.stderr


@pytest.mark.spark
def test_spark_connector_with_credentials(spark_session: Any, acl: AclCluster) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    options = {"nameServer": acl.ns.addr, "topic": "AclSpark", "accessKey": OPEN.access_key,
               "secretKey": OPEN.secret_key}  # fmt: skip
    df = spark_session.createDataFrame([(f"s{i}",) for i in range(50)], "body string")
    df.write.format("rocketmq").options(**options).mode("append").save()
    rows = spark_session.read.format("rocketmq").options(**options).load().collect()
    assert sorted(r.body for r in rows) == sorted(f"s{i}".encode() for i in range(50))
    unsigned = {k: v for k, v in options.items() if k not in ("accessKey", "secretKey")}
    with pytest.raises(Exception, match="AccessKey"):  # Spark wraps the client's error in its own
        spark_session.read.format("rocketmq").options(**unsigned).load().collect()


def _eos_options(acl: AclCluster, topic: str, sink: str, creds: SessionCredentials) -> dict[str, str]:
    return {
        "nameServer": acl.ns.addr,
        "topic": topic,
        "accessKey": creds.access_key,
        "secretKey": creds.secret_key,
        "deliveryGuarantee": "exactlyOnce",
        "transactionalId": sink,
    }


@pytest.mark.spark
def test_spark_exactly_once_sink_with_credentials(spark_session: Any, acl: AclCluster) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    options = _eos_options(acl, "AclEos", "acl-eos", OPEN)
    df = spark_session.createDataFrame([(f"e{i}",) for i in range(60)], "body string").repartition(2)
    df.write.format("rocketmq").options(**options).mode("append").save()
    read = {k: options[k] for k in ("nameServer", "topic", "accessKey", "secretKey")}
    rows = spark_session.read.format("rocketmq").options(**read).load().collect()
    assert sorted(r.body for r in rows) == sorted(f"e{i}".encode() for i in range(60))
    # without PUB on the topic the half sends are refused: the job fails naming the permission
    denied = _eos_options(acl, "AclEosSubOnly", "acl-eos", OPEN)
    with pytest.raises(Exception, match="no PUB permission on topic AclEosSubOnly"):
        df.write.format("rocketmq").options(**denied).option("sendRetries", "0").mode("append").save()
    assert _read_bodies(acl, "AclEosSubOnly", OPEN) == []


def test_exactly_once_commit_topic_needs_an_admin_or_to_exist(acl: AclCluster) -> None:
    from rocketq.connector.access import BrokerAccess
    from rocketq.connector.commit_log import CommitLog
    from rocketq.connector.errors import SinkError

    access = BrokerAccess(acl.ns.addr, timeout_ms=3000, client=config_of(OPEN))
    try:
        log = CommitLog(access, "acl-eos-new", timeout_ms=3000, client=config_of(OPEN))
        with pytest.raises(SinkError, match=r"RQ_SINK_COMMITS_acl-eos-new.*mqadmin updateTopic"):
            log.prepare()
        CommitLog(access, "acl-eos", timeout_ms=3000, client=config_of(OPEN)).prepare()  # exists: fine
    finally:
        access.close()


def _read_bodies(acl: AclCluster, topic: str, creds: SessionCredentials) -> list[str]:
    return sorted(m.body.decode() for m in read_topic(acl.ns.addr, topic, client=config_of(creds)))


def test_exactly_once_check_back_with_credentials(acl: AclCluster) -> None:
    """The driver stored the commit record and died before ending the transactions: the broker's
    check-backs reach the sink's producer (signed connection) and its resolver commits the listed
    halves and rolls back the unlisted ones with the sink's credentials."""
    import pyarrow as pa

    from rocketq.connector.commit_log import CommitRecord, HalfBatch
    from rocketq.connector.options import parse_sink_options
    from rocketq.connector.transactional import ExactlyOnceStrategy, WriteIdentity, driver_commit_log
    from rocketq.connector.writer import write_batches

    sink = "acl-eos-check"
    opts = parse_sink_options({**_eos_options(acl, "AclEosCheck", sink, OPEN), "batchMaxMessages": "4"})

    def attempt(rows: list[str]) -> list[HalfBatch]:
        strategy = ExactlyOnceStrategy(opts, WriteIdentity(sink, "0", os.urandom(8).hex(), 0, 0))
        write_batches(opts, iter([pa.record_batch({"body": pa.array(rows)})]), strategy)
        return list(strategy.handles)

    failed = attempt(["lost-1", "lost-2"])  # an attempt Spark never accepted
    accepted = attempt([f"c{i}" for i in range(10)])
    assert failed and accepted and _read_bodies(acl, "AclEosCheck", OPEN) == []
    driver_commit_log(opts, sink).append(CommitRecord.of(sink, "0", accepted))  # ... then the driver died
    expected = sorted(f"c{i}" for i in range(10))
    wait_for(
        lambda: _read_bodies(acl, "AclEosCheck", OPEN) == expected,
        "the check-backs' commit",
        30,
        interval_s=0.5,
    )
    assert _read_bodies(acl, "AclEosCheck", OPEN) == expected, "the check-backs did not commit the batch"


@pytest.fixture(scope="module")
def ali_ons(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed")
    directory = tmp_path_factory.mktemp("ali-ons")
    (directory / "package.json").write_text('{"name": "acl-test", "private": true}', encoding="utf-8")
    install = subprocess.run(
        ["npm", "install", "--no-save", "--no-audit", "--no-fund", f"ali-ons@{ALI_ONS_VERSION}"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if install.returncode != 0:
        pytest.skip(f"npm could not install ali-ons@{ALI_ONS_VERSION}: {install.stderr.strip()[-500:]}")
    script = directory / "ali_ons_acl.js"
    shutil.copy(Path(__file__).with_name("ali_ons_acl.js"), script)
    return script


def test_ali_ons_produces_and_consumes_with_credentials(acl: AclCluster, ali_ons: Path) -> None:
    n = 10
    run = subprocess.run(
        ["node", str(ali_ons), acl.ns.addr, "AclOns", "acl-ons", APP.access_key, APP.secret_key, str(n)],
        cwd=ali_ons.parent,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["sent"] == n
    assert sorted(result["received"]) == sorted(f"ons-{i}" for i in range(n))
