"""README.md's quick start, run as written: a stale command in it fails this test.

The test takes the first ```bash block of the "Quick start" section, starts ``rocketq dev`` in the
background (instead of the block's ``rocketq dev`` line) with the venv's ``bin`` first on
``PATH``, reads ``NAMESRV_ADDR=host:port`` from what it prints, and runs every other command of
the block (``source .venv/bin/activate`` aside) with bash, ``NAMESRV_ADDR`` exported.  Every
command must exit 0 and ``consumeMessage`` must show the body that ``sendMessage`` sent.  Then the
README's Python client snippet runs against the same servers, its ``127.0.0.1:9876`` replaced by
the real address, and must print the message it produced.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BIN = Path(sys.executable).parent
ADDR_RE = re.compile(r"NAMESRV_ADDR=(\S+:\d+)")
SNIPPET_NAMESRV = "127.0.0.1:9876"
START_TIMEOUT_S = 60.0


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def quickstart_commands(text: str) -> list[str]:
    """The commands of the quick start's bash block, without comments, venv activation and
    ``rocketq dev`` (continuation lines joined)."""
    block = _blocks(_section(text, "Quick start"), "bash")[0]
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        command = line.split(" #", 1)[0].strip()
        if not command or command.startswith("#") or command.startswith("source "):
            continue
        if command.split()[:2] == ["rocketq", "dev"]:
            continue
        commands.append(command)
    return commands


def python_snippet(text: str) -> str:
    """The README's first Python block that uses the client (not Spark)."""
    for block in _blocks(_section(text, "Quick start"), "python"):
        if "rocketq.client" in block:
            return block
    raise AssertionError("README.md's quick start has no Python client snippet")


def _env(namesrv_addr: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    if namesrv_addr is not None:
        env["NAMESRV_ADDR"] = namesrv_addr
    return env


@pytest.fixture(scope="module")
def dev_namesrv() -> Iterator[str]:
    """``rocketq dev`` in the background; its NameServer address."""
    proc = subprocess.Popen(
        [str(BIN / "rocketq"), "dev"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
        start_new_session=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    found = threading.Event()
    addr: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            match = ADDR_RE.search(line)
            if match and not addr:
                addr.append(match.group(1))
                found.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not found.wait(START_TIMEOUT_S):
            raise AssertionError(f"rocketq dev printed no NAMESRV_ADDR line:\n{''.join(lines)}")
        yield addr[0]
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)  # rocketq dev stops its servers and cleans up
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        reader.join(5)
        print(f"--- rocketq dev output ---\n{''.join(lines)}")


def test_readme_blocks_are_found() -> None:
    text = README.read_text()
    commands = quickstart_commands(text)
    assert commands and all(c.startswith("mqadmin ") for c in commands), commands
    assert any(shlex.split(c)[1] == "sendMessage" for c in commands)
    assert SNIPPET_NAMESRV in python_snippet(text)


def test_quickstart_commands_run_as_written(dev_namesrv: str, tmp_path: Path) -> None:
    commands = quickstart_commands(README.read_text())
    sent_body = None
    for command in commands:
        r = subprocess.run(
            ["bash", "-c", command],
            capture_output=True,
            text=True,
            env=_env(dev_namesrv),
            cwd=tmp_path,
            timeout=120,
        )
        assert r.returncode == 0, f"{command!r} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
        argv = shlex.split(command)
        if argv[1] == "sendMessage":
            sent_body = argv[argv.index("-p") + 1]
            assert "SEND_OK" in r.stdout, r.stdout
        if argv[1] == "consumeMessage":
            assert sent_body is not None, "the quick start consumes before it sends"
            assert f"Message Body: {sent_body}" in r.stdout, r.stdout


def test_readme_python_client_snippet_runs(dev_namesrv: str, tmp_path: Path) -> None:
    code = python_snippet(README.read_text()).replace(SNIPPET_NAMESRV, dev_namesrv)
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=120
    )
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "b'created'" in r.stdout, r.stdout
