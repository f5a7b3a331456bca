"""mqadmin against an ACL-enabled NameServer and broker with the credentials of ``conf/tools.yml``,
as Java's mqadmin reads them: from ``$ROCKETMQ_HOME/conf/tools.yml`` or ``--tools-yml PATH``.
Without credentials the broker refuses (NO_PERMISSION); with the file the same commands pass;
keys on the command line win over the file; a broken file is a usage error naming it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketq.client.testing import ServerProcess, run_mqadmin, spawn_broker, spawn_namesrv

PLAIN_ACL_YML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: tools-admin
    secretKey: tools-secret-1
    admin: true
  - accessKey: tools-reader
    secretKey: reader-secret-1
    admin: false
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""


@dataclass(frozen=True)
class AclCluster:
    ns: ServerProcess
    broker: ServerProcess
    home: Path  # a ROCKETMQ_HOME whose conf/tools.yml holds the admin account


@pytest.fixture(scope="module")
def acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    tmp = tmp_path_factory.mktemp("tools-yml")
    acl_file = tmp / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL_YML, encoding="utf-8")
    home = tmp / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "tools.yml").write_text("accessKey: tools-admin\nsecretKey: tools-secret-1\n", "utf-8")
    with (
        spawn_namesrv(tmp / "ns", "-o", "aclEnable=true", "-o", f"aclFilePath={acl_file}") as ns,
        spawn_broker(tmp, ns.addr, aclEnable="true", aclFilePath=str(acl_file), accessKey="tools-admin",
                     secretKey="tools-secret-1") as broker,
    ):  # fmt: skip
        yield AclCluster(ns, broker, home)


def update_topic(
    acl: AclCluster, topic: str, *extra: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    args = ("updateTopic", "-n", acl.ns.addr, "-b", acl.broker.addr, "-t", topic, "-r", "2", "-w", "2")
    done = run_mqadmin(*args, *extra, env={"ROCKETMQ_HOME": "", **(env or {})})
    return done.returncode, done.stdout + done.stderr


def test_mqadmin_signs_with_the_tools_yml_of_rocketmq_home(acl: AclCluster) -> None:
    code, text = update_topic(acl, "ToolsYmlNone")
    assert code == 1 and "CODE: 16" in text, text  # NO_PERMISSION without credentials
    code, text = update_topic(acl, "ToolsYmlHome", env={"ROCKETMQ_HOME": str(acl.home)})
    assert code == 0, text
    listed = run_mqadmin("topicList", "-n", acl.ns.addr, env={"ROCKETMQ_HOME": str(acl.home)})
    assert listed.returncode == 0 and "ToolsYmlHome" in listed.stdout.split(), listed.stderr


def test_tools_yml_option_and_command_line_keys(acl: AclCluster, tmp_path: Path) -> None:
    reader = tmp_path / "reader.yml"
    reader.write_text("accessKey: tools-reader\nsecretKey: reader-secret-1\n", encoding="utf-8")
    code, text = update_topic(acl, "ToolsYmlReader", "--tools-yml", str(reader))
    assert code == 1 and "CODE: 16" in text, text  # the reader account may not create topics
    code, text = update_topic(acl, "ToolsYmlOption", "--tools-yml", str(acl.home / "conf" / "tools.yml"))
    assert code == 0, text
    # keys given on the command line win over the file of ROCKETMQ_HOME
    keys = ("--access-key", "tools-reader", "--secret-key", "reader-secret-1")
    code, text = update_topic(acl, "ToolsYmlKeys", *keys, env={"ROCKETMQ_HOME": str(acl.home)})
    assert code == 1 and "CODE: 16" in text, text


def test_broken_tools_yml_is_a_usage_error(acl: AclCluster, tmp_path: Path) -> None:
    half = tmp_path / "half.yml"
    half.write_text("accessKey: tools-admin\n", encoding="utf-8")
    code, text = update_topic(acl, "ToolsYmlHalf", "--tools-yml", str(half))
    assert code == 2 and f"{half}: secretKey is missing or blank" in text, text
    code, text = update_topic(acl, "ToolsYmlGone", "--tools-yml", str(tmp_path / "gone.yml"))
    assert code == 2 and "gone.yml: no such file" in text, text
    bad = tmp_path / "bad.yml"
    bad.write_text("accessKey: [unclosed\n", encoding="utf-8")
    code, text = update_topic(acl, "ToolsYmlBad", "--tools-yml", str(bad))
    assert code == 2 and "cannot read it as YAML" in text, text
