"""``mqshutdown``'s choice of processes: rocketq servers of the asked kind, found by command line."""

from __future__ import annotations

import os

import pytest

from rocketq.tools.shutdown import find_processes, main

TABLE = [
    (101, "/venv/bin/python -m rocketq.broker -c /srv/a/broker.conf"),
    (102, "/venv/bin/python /venv/bin/mqbroker -c /srv/b/broker.conf"),
    (103, "mqbroker -c /srv/c/broker.conf"),
    (104, "/venv/bin/python /venv/bin/mqshutdown broker"),
    (105, "/venv/bin/python -m rocketq.broker_tools report"),
    (106, "/venv/bin/python -m rocketq.proxy -n 127.0.0.1:9876"),
    (107, "/venv/bin/python -m rocketq.namesrv --listen-port 9876"),
    (108, "/venv/bin/python /venv/bin/mqnamesrv -c namesrv.properties"),
    (109, "vi /srv/a/broker.conf"),
    (os.getpid(), "/venv/bin/python -m rocketq.broker -c mine.conf"),
]


def test_finds_each_kind_by_module_or_console_script() -> None:
    assert find_processes("broker", table=TABLE) == [101, 102, 103]
    assert find_processes("namesrv", table=TABLE) == [107, 108]
    assert find_processes("proxy", table=TABLE) == [106]
    assert find_processes("controller", table=TABLE) == []


def test_match_narrows_to_command_lines_containing_it() -> None:
    assert find_processes("broker", "/srv/b/", table=TABLE) == [102]
    assert find_processes("broker", "/nowhere/", table=TABLE) == []


def test_unknown_kind_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["brokers"]) == 2
    assert "usage: mqshutdown" in capsys.readouterr().err
