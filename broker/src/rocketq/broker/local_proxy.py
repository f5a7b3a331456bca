"""The gRPC proxy started with the broker (``enableProxy=true``, ``mqbroker --enable-proxy``).

RocketMQ 5 runs its proxy inside the broker process in *local mode*.  rocketq starts ``mqproxy``
as a child process of ``mqbroker`` once the broker is up, listening on ``grpcServerPort`` and
pointed at the broker's NameServers (its other settings from the ``rmq-proxy.json`` given to
``mqbroker -pc``, ``grpcServerPort`` winning), and stops it (SIGTERM, then SIGKILL after a grace time)
before the broker shuts down; on Linux the child also gets SIGTERM when the broker dies without
stopping it.  The child is the cluster-mode proxy: it reaches the brokers through the NameServers
over remoting, so it serves every broker of the cluster, not only its parent.  Its boot line and
log go to the broker's stdout and stderr.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
import sys

from rocketq.broker.config import BrokerConfig
from rocketq.broker.errors import BrokerConfigError

__all__ = ["LocalProxy"]

log = logging.getLogger("rocketq.broker")

#: how long the proxy may take to stop on SIGTERM before it is killed
STOP_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the broker process goes away (Linux only)."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class LocalProxy:
    """``await start()`` spawns ``python -m rocketq.proxy``; ``await stop()`` ends it."""

    def __init__(self, config: BrokerConfig, proxy_config_path: str | None = None) -> None:
        """``proxy_config_path``: an ``rmq-proxy.json`` for the proxy's other settings (``-pc``)."""
        if not config.namesrv_addr:
            raise BrokerConfigError(
                "enableProxy",
                "the proxy reaches the brokers through the NameServers: set namesrvAddr (or -n)",
            )
        self.args = [
            "-m",
            "rocketq.proxy",
            "-n",
            ";".join(config.namesrv_addr),
            "--grpcServerPort",
            str(config.grpc_server_port),
        ]
        if proxy_config_path:
            self.args += ["-pc", os.path.abspath(proxy_config_path)]
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, *self.args, preexec_fn=_die_with_parent
        )
        log.info("gRPC proxy started (pid %d): %s", self.process.pid, " ".join(self.args))

    async def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.returncode is not None:
            return
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
