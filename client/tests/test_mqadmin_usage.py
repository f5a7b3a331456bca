"""mqadmin's command line without servers: ``--help`` lists every subcommand, an unknown
subcommand or a bad option exits 2 with the usage, and the subcommand groups' option letters
are RocketMQ's."""

from __future__ import annotations

import pytest

from rocketq.client.cli.mqadmin import LISTING, main

NEW = (
    "updateSubGroup", "deleteSubGroup", "getBrokerConfig", "updateBrokerConfig", "getNamesrvConfig",
    "updateNamesrvConfig", "brokerStatus", "wipeWritePerm", "addWritePerm", "topicClusterList",
    "consumerConnection", "producerConnection",
)  # fmt: skip


def exit_code(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return int(exited.value.code or 0)


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(["--help"]) == 0
    text = capsys.readouterr().out
    assert set(NEW) <= set(LISTING)
    for name in LISTING:
        assert f"    {name}" in text, name


@pytest.mark.parametrize(
    "argv",
    [
        ["noSuchCommand", "-n", "127.0.0.1:1"],
        [],
        ["updateSubGroup", "-n", "127.0.0.1:1", "-c", "C", "-g", "g", "--noSuchOption"],
        ["updateSubGroup", "-n", "127.0.0.1:1", "-c", "C", "-g", "g", "-r", "many"],
        ["updateBrokerConfig", "-n", "127.0.0.1:1", "-b", "127.0.0.1:2", "-k", "k"],  # -v missing
        ["wipeWritePerm", "-n", "127.0.0.1:1"],  # -b brokerName missing
        ["producerConnection", "-n", "127.0.0.1:1", "-g", "pg"],  # -t missing
    ],
)
def test_bad_command_lines_exit_2_with_the_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(argv) == 2
    assert "usage: mqadmin" in capsys.readouterr().err


def test_update_sub_group_takes_javas_letters(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(["updateSubGroup", "--help"]) == 0
    text = capsys.readouterr().out
    for short, long in (("-q", "--retryQueueNums"), ("-r", "--retryMaxTimes"), ("-s", "--consumeEnable"),
                        ("-i", "--brokerId"), ("-w", "--whichBrokerWhenConsumeSlowly")):  # fmt: skip
        assert short in text and long in text
