"""Shared fixtures of the integration tests: real server processes built on rocketq.client.testing.

Kept small and generic on purpose; component-specific fixtures live in their own test files.
"""

from __future__ import annotations

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
