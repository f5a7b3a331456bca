"""Test helpers shared by the tests of every component: real servers, bounded waits, topics,
produce/consume and pull helpers.

Integration tests start real ``mqnamesrv`` and ``mqbroker`` processes on port 0 with
:mod:`rocketq.client.launcher` (the supported launcher, also used by ``rocketq dev`` and the
examples), re-exported here so tests keep one import path. :mod:`.wait` holds the bounded waits,
:mod:`.messaging` the topic, produce/consume, send/pull and read helpers over the public client API,
:mod:`.output` the reading of a child process's output lines, :mod:`.chaos` the chaos tests' ledger
and load, :mod:`.ordered` their per-key ordered senders, reading consumer and lost/order check,
:mod:`.dledger` the DLedger group of the DLedger tests, :mod:`.controllers` the start of one
``mqcontroller`` from a given file, :mod:`.cluster` the controller-mode broker group of the failover
tests and benchmark (:class:`ControllerGroup`), :mod:`.commands` the run of ``mqadmin``, :mod:`.pki`
a CA and server certificate, and :mod:`.jvm` the options of the Spark JVMs tests start.
Nothing here imports pytest: tests wrap these helpers in their own fixtures.
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
    broker_store_dir,
    free_port,
    local_cluster,
    spawn_broker,
    spawn_namesrv,
    wait_until_answers,
)
from rocketq.client.testing.cluster import (
    FAST_FAILOVER_BROKER_CONF,
    FAST_FAILOVER_CONTROLLER_CONF,
    ControllerGroup,
)
from rocketq.client.testing.commands import run_mqadmin, start_rocketq_dev
from rocketq.client.testing.controllers import spawn_controller
from rocketq.client.testing.jvm import SHORT_LIVED_JVM_OPTIONS
from rocketq.client.testing.messaging import (
    create_topic,
    drain,
    ha_max_offset,
    has_route,
    heartbeat_consumer,
    produce_and_consume,
    pull_header,
    pull_queue,
    read_topic,
    send_header,
    wait_route,
)
from rocketq.client.testing.output import ProcessOutput
from rocketq.client.testing.pki import has_openssl, make_server_certs
from rocketq.client.testing.wait import WaitTimeout, async_wait_for, async_wait_value, wait_for, wait_value

__all__ = [
    "BROKER_BOOT_RE",
    "DEFAULT_START_TIMEOUT_S",
    "FAST_FAILOVER_BROKER_CONF",
    "FAST_FAILOVER_CONTROLLER_CONF",
    "NAMESRV_BOOT_RE",
    "SHORT_LIVED_JVM_OPTIONS",
    "ControllerGroup",
    "LocalCluster",
    "ProcessOutput",
    "ServerProcess",
    "ServerStartError",
    "WaitTimeout",
    "async_wait_for",
    "async_wait_value",
    "broker_conf_text",
    "broker_store_dir",
    "create_topic",
    "drain",
    "free_port",
    "ha_max_offset",
    "has_openssl",
    "has_route",
    "heartbeat_consumer",
    "local_cluster",
    "make_server_certs",
    "produce_and_consume",
    "pull_header",
    "pull_queue",
    "read_topic",
    "run_mqadmin",
    "send_header",
    "spawn_broker",
    "spawn_controller",
    "spawn_namesrv",
    "start_rocketq_dev",
    "wait_for",
    "wait_route",
    "wait_until_answers",
    "wait_value",
]
