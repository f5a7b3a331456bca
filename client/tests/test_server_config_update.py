"""rocketq.server.config_update: the update*Config body, refusals by key, and the file writes."""

from __future__ import annotations

from pathlib import Path

from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.server.config_update import merge_properties_file, persist_update, read_update

RUNTIME = frozenset({"a", "b"})


def _request(body: bytes) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_CONTROLLER_CONFIG, body=body)


def test_read_update_returns_runtime_keys() -> None:
    assert read_update(_request(b"a=1\nb = two\n"), RUNTIME, "hint") == {"a": "1", "b": "two"}


def test_read_update_refuses_other_keys_by_name() -> None:
    answer = read_update(_request(b"a=1\nzeta=2\nalpha=3\n"), RUNTIME, "set it in x.conf")
    assert isinstance(answer, RemotingCommand) and answer.code == ResponseCode.NO_PERMISSION
    assert answer.remark is not None
    assert "alpha, zeta cannot change at runtime (set it in x.conf)" in answer.remark
    assert answer.remark.endswith("runtime-updatable keys: a, b")


def test_read_update_refuses_an_empty_or_undecodable_body() -> None:
    for body in (b"", b"# only a comment\n", b"\xff=1"):
        answer = read_update(_request(body), RUNTIME, "hint")
        assert isinstance(answer, RemotingCommand) and answer.code == ResponseCode.SYSTEM_ERROR, body


def test_merge_keeps_other_lines_and_appends_new_keys(tmp_path: Path) -> None:
    conf = tmp_path / "x.conf"
    conf.write_text("# comment\na=1\nc=3\n", encoding="utf-8")
    merge_properties_file(conf, {"a": "9", "b": "2"})
    assert conf.read_text(encoding="utf-8") == "# comment\na=9\nc=3\nb=2\n"
    assert not (tmp_path / "x.conf.tmp").exists()


def test_persist_update_names_the_file_it_cannot_write(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    answer = persist_update(_request(b"a=1"), {"a": "1"}, str(blocker / "x.conf"))
    assert answer.code == ResponseCode.SYSTEM_ERROR and str(blocker / "x.conf") in (answer.remark or "")
    assert persist_update(_request(b"a=1"), {"a": "1"}, None).code == ResponseCode.SUCCESS
