"""Spark deployment helpers of the integration tests: Spark daemons, bare venvs, topic reads.

Used by test_spark_standalone.py and test_spark_connect.py (loaded by path, like eos_etl_job.py).
A :class:`Daemon` is a Spark process (master, worker, Connect server, spark-submit driver) in its
own process group, so that killing it also kills what it started (executors, Python workers).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from rocketq.client.testing import SHORT_LIVED_JVM_OPTIONS
from rocketq.client.testing import read_topic as read_messages
from rocketq.connector.testing import Cluster

BOOT_TIMEOUT_S = 150.0  # a JVM boot on two cores shared with other test runs


class Daemon:
    """A Spark daemon (or driver) in its own process group, logging to a file."""

    def __init__(self, name: str, args: list[str], env: Mapping[str, str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("wb")
        self.popen = subprocess.Popen(
            args, env=dict(env), stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def relevant_log(self, chars: int = 8000) -> str:
        """The log without Spark's INFO lines, last ``chars`` characters."""
        return "\n".join(ln for ln in self.log_text().splitlines() if " INFO " not in ln)[-chars:]

    def wait_for(self, pattern: str, timeout_s: float = BOOT_TIMEOUT_S) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while True:
            match = re.search(pattern, self.log_text())
            if match:
                return match
            if self.popen.poll() is not None or time.monotonic() > deadline:
                state = "exited" if self.popen.poll() is not None else f"printed nothing in {timeout_s} s"
                raise AssertionError(
                    f"{self.name} {state} while waiting for /{pattern}/; log {self.log_path}:\n"
                    f"{self.relevant_log(3000)}"
                )
            time.sleep(0.3)

    def kill(self) -> None:
        """SIGTERM the whole group (executors and Python workers included), SIGKILL after 10 s."""
        for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            if self.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(wait_s)
        # children of an exited leader may still live in the group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self._log.close()


def spark_home() -> Path:
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.origin is not None, "pyspark is not installed in this environment"
    return Path(spec.origin).parent


def spark_env(work: Path, **extra: str) -> dict[str, str]:
    """The environment of every Spark process: local addresses, small daemons, scratch in ``work``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPARK_CONF_DIR")}
    conf_dir = work / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    scratch = work / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_CONF_DIR=str(conf_dir),  # an empty one: no site configuration leaks in
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=str(scratch),
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS=SHORT_LIVED_JVM_OPTIONS,
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        TMPDIR=str(scratch),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def deps_only_venv(path: Path) -> Path:
    """A venv without rocketq that reaches pyspark & co through a plain path line to our site-packages.

    Python does not process the ``.pth`` files of a directory named by a plain ``.pth`` line, so
    the main environment's editable rocketq (itself a ``.pth``) stays invisible there.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    Path(site, "_spark_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return python


def read_topic(cluster: Cluster, topic: str) -> list[tuple[str, str | None]]:
    """Every (body, KEYS) stored in ``topic``, sorted."""
    messages = read_messages(cluster.namesrv_addr, topic, group="deploy-check")
    return sorted((m.body.decode(), m.properties.get("KEYS")) for m in messages)
