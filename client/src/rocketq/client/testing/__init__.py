"""Test helpers: the process launcher under the name the tests import it by.

Integration tests of every component start real ``mqnamesrv`` and ``mqbroker`` processes on port
0 with :mod:`rocketq.client.launcher` (the supported launcher, also used by ``rocketq dev`` and
the examples); this module re-exports it so tests keep one import path, and is the place for
helpers that only tests need.  It does not import pytest: tests wrap it in their own fixtures.
"""

from __future__ import annotations

from rocketq.client.launcher import (
    BROKER_BOOT_RE,
    DEFAULT_START_TIMEOUT_S,
    NAMESRV_BOOT_RE,
    LocalCluster,
    ServerProcess,
    ServerStartError,
    broker_conf_text,
    free_port,
    local_cluster,
    spawn_broker,
    spawn_namesrv,
    wait_until_answers,
)

__all__ = [
    "BROKER_BOOT_RE",
    "DEFAULT_START_TIMEOUT_S",
    "NAMESRV_BOOT_RE",
    "LocalCluster",
    "ServerProcess",
    "ServerStartError",
    "broker_conf_text",
    "free_port",
    "local_cluster",
    "spawn_broker",
    "spawn_namesrv",
    "wait_until_answers",
]
