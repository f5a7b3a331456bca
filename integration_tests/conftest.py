"""Shared fixtures of the integration tests: real server processes built on rocketq.client.testing.

Kept small and generic on purpose; component-specific fixtures live in their own test files. The
RocketMQ 5 SDKs every gRPC test file runs are here: ``sdk_python`` (a venv of its own holding the
published Python SDK) and ``node_modules`` (the npm-installed Node.js SDK), each built once under
``ROCKETQ_TEST_CACHE`` (default ``~/.cache/rocketq-tests``) behind a file lock, then reused.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocketq.client.testing import ServerProcess, spawn_namesrv
from rocketq.client.transport.blocking import BlockingRemotingClient

SpawnNamesrv = Callable[..., ServerProcess]


@pytest.fixture
def namesrv_factory(tmp_path: Path) -> Iterator[SpawnNamesrv]:
    """Start NameServer processes (``factory(*extra_args)``); all are stopped after the test."""
    started: list[ServerProcess] = []
    counter = 0

    def factory(*extra_args: str) -> ServerProcess:
        nonlocal counter
        counter += 1
        proc = spawn_namesrv(tmp_path / f"namesrv-{counter}", *extra_args)
        started.append(proc)
        return proc

    yield factory
    for proc in started:
        proc.terminate()
        # shown by pytest only when the test failed
        print(f"--- {proc.name} log tail ({proc.log_path}) ---\n{proc.log_tail()}")


@pytest.fixture
def namesrv(namesrv_factory: SpawnNamesrv) -> ServerProcess:
    """One NameServer process with default settings (port 0, 127.0.0.1)."""
    return namesrv_factory()


@pytest.fixture
def blocking_client() -> Iterator[BlockingRemotingClient]:
    client = BlockingRemotingClient()
    yield client
    client.close()


SDK = "rocketmq-python-client==5.1.2"
#: the SDK's venv gets the gRPC stack rocketq pins (the SDK accepts them: its METADATA says >=)
SDK_PINS = ("grpcio==1.85.3", "protobuf==7.36.2")
NODE_SDK = "rocketmq-client-nodejs@1.0.8"
_OFFLINE_SIGNS = (
    "No matching distribution",
    "Could not fetch",
    "NewConnectionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ConnectionError",
)


def _cache_dir() -> Path:
    return Path(os.environ.get("ROCKETQ_TEST_CACHE", Path.home() / ".cache" / "rocketq-tests"))


@pytest.fixture(scope="session")
def sdk_python() -> Path:
    """The interpreter of a venv holding the Python SDK; built once (under a file lock), then reused."""
    root = _cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    venv = root / "sdk-venv-5.1.2"
    python = venv / "bin" / "python"
    with open(root / "sdk-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel streams build it once
        if (venv / "ready").exists():
            return python
        building = root / f"sdk-venv-building-{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(building)], check=True, timeout=300)
        pip = subprocess.run(
            [str(building / "bin" / "python"), "-m", "pip", "install", "-q", SDK, *SDK_PINS],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if pip.returncode != 0:
            shutil.rmtree(building, ignore_errors=True)
            tail = (pip.stdout + pip.stderr)[-2000:]
            if any(sign in tail for sign in _OFFLINE_SIGNS):
                pytest.skip(f"PyPI is unreachable, cannot install {SDK}: {tail}")
            pytest.fail(f"pip could not install {SDK}:\n{tail}")
        (building / "ready").write_text(SDK)
        shutil.rmtree(venv, ignore_errors=True)
        building.rename(venv)  # a venv's scripts name their folder; python -m pip still works
    return python


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """A node_modules folder holding the Node.js SDK; npm-installed once (under a file lock), then reused."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed: the Node.js SDK test needs them")
    root = _cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    folder = root / "node-sdk-1.0.8"
    with open(root / "node-sdk.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / "ready").exists():
            return folder / "node_modules"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        npm = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), NODE_SDK],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if npm.returncode != 0:
            tail = (npm.stdout + npm.stderr)[-2000:]
            if any(
                sign in tail
                for sign in ("ENOTFOUND", "ECONNREFUSED", "ETIMEDOUT", "EAI_AGAIN", "ENETUNREACH")
            ):
                pytest.skip(f"the npm registry is unreachable, cannot install {NODE_SDK}: {tail}")
            pytest.fail(f"npm could not install {NODE_SDK}:\n{tail}")
        (folder / "ready").write_text(NODE_SDK)
    return folder / "node_modules"
