"""Registration of this broker with every NameServer (REGISTER_BROKER / UNREGISTER_BROKER).

The broker sends its whole topic table (a RegisterBrokerBody, B.10, uncompressed JSON with a
``bodyCrc32`` header) to *every* NameServer in ``namesrvAddr``, in parallel: at start, every
``registerNameServerPeriod`` (30 s, clamped to 10–60 s), and at once when a topic is created,
changed or deleted.  Change-triggered registrations are coalesced: a burst of auto-created topics
causes one registration in flight plus at most one queued behind it.  A NameServer that does not
answer is logged and retried at the next period; it never blocks the others.  On a clean shutdown
the broker unregisters from every NameServer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from rocketq.client.errors import RocketQError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)

__all__ = ["NamesrvRegistrar", "register_broker_body"]

log = logging.getLogger(__name__)


def register_broker_body(topic_config_wrapper: dict[str, Any]) -> bytes:
    """The uncompressed RegisterBrokerBody JSON for a TopicConfigSerializeWrapper document."""
    doc = {"filterServerList": [], "topicConfigSerializeWrapper": topic_config_wrapper}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8")


class NamesrvRegistrar:
    """Registers one broker with a list of NameServers over a shared ``RemotingClient``."""

    def __init__(
        self,
        client: Any,
        namesrv_addrs: Sequence[str],
        *,
        identity: Callable[[], tuple[str, str, str, int, str]],
        topic_wrapper: Callable[[], dict[str, Any]],
        timeout_ms: int = 24_000,
    ) -> None:
        """``identity()`` returns ``(cluster, broker_name, broker_addr, broker_id, ha_addr)``."""
        self._client = client
        self.namesrv_addrs = list(namesrv_addrs)
        self._identity = identity
        self._topic_wrapper = topic_wrapper
        self._timeout_ms = timeout_ms
        self._running: asyncio.Task[None] | None = None
        self._again = False
        self.last_results: dict[str, int | str] = {}
        #: the group's master and its HA address from the last REGISTER_BROKER answer (None on a
        #: master, or while the NameServer knows no master): how a slave learns them, as in RocketMQ
        self.master_addr: str | None = None
        self.ha_server_addr: str | None = None
        #: called with ``(master_addr, ha_server_addr)`` on the loop whenever an answer changes them
        self.master_listeners: list[Callable[[str | None, str | None], None]] = []

    async def register_all(self) -> dict[str, int | str]:
        """Register with every NameServer now; returns ``{addr: response code or error text}``."""
        if not self.namesrv_addrs:
            return {}
        cluster, name, addr, broker_id, ha_addr = self._identity()
        body = register_broker_body(self._topic_wrapper())
        ext = RegisterBrokerRequestHeader(
            broker_name=name,
            broker_addr=addr,
            cluster_name=cluster,
            ha_server_addr=ha_addr,
            broker_id=broker_id,
            compressed=False,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        ).to_ext_fields()

        async def one(ns: str) -> int | str:
            cmd = RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)
            try:
                response = await self._client.invoke(ns, cmd, self._timeout_ms)
            except (RocketQError, OSError) as exc:
                log.warning("register broker %s to name server %s failed: %s", name, ns, exc)
                return str(exc)
            if response.code != ResponseCode.SUCCESS:
                log.warning(
                    "name server %s refused the registration of %s: code %s %s",
                    ns,
                    name,
                    response.code,
                    response.remark,
                )
            else:
                answers[ns] = response
            return int(response.code)

        answers: dict[str, RemotingCommand] = {}
        results = await asyncio.gather(*(one(ns) for ns in self.namesrv_addrs))
        self.last_results = dict(zip(self.namesrv_addrs, results, strict=True))
        first = next((answers[ns] for ns in self.namesrv_addrs if ns in answers), None)
        if first is not None:
            self._note_master(first)
        return self.last_results

    def _note_master(self, response: RemotingCommand) -> None:
        """Take the master's addresses from the first NameServer that answered (RocketMQ's rule)."""
        try:
            header = RegisterBrokerResponseHeader.from_ext_fields(response.ext_fields)
        except RocketQError as exc:
            log.warning("cannot read the REGISTER_BROKER answer: %s", exc)
            return
        master, ha = header.master_addr or None, header.ha_server_addr or None
        if (master, ha) == (self.master_addr, self.ha_server_addr):
            return
        log.info("master of this broker group: %s (HA %s)", master, ha)
        self.master_addr, self.ha_server_addr = master, ha
        for listener in list(self.master_listeners):
            try:
                listener(master, ha)
            except Exception:  # one listener's bug must not stop the registration or the others
                log.exception("master listener %r failed", listener)

    def trigger(self) -> None:
        """Ask for a registration soon (topic change); coalesces bursts.  Loop thread only."""
        if not self.namesrv_addrs:
            return
        if self._running is not None and not self._running.done():
            self._again = True
            return
        self._running = asyncio.get_running_loop().create_task(self._run_triggered())

    async def _run_triggered(self) -> None:
        while True:
            self._again = False
            try:
                await self.register_all()
            except Exception:  # never let a background registration kill the loop
                log.exception("registration failed")
            if not self._again:
                return

    async def wait_idle(self) -> None:
        """Wait for a triggered registration in flight (tests, shutdown)."""
        while self._running is not None and not self._running.done():
            await asyncio.shield(self._running)

    async def unregister_all(self) -> None:
        if not self.namesrv_addrs:
            return
        cluster, name, addr, broker_id, _ = self._identity()
        ext = UnRegisterBrokerRequestHeader(
            broker_name=name, broker_addr=addr, cluster_name=cluster, broker_id=broker_id
        ).to_ext_fields()

        async def one(ns: str) -> None:
            try:
                await self._client.invoke(
                    ns, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, ext), 3_000
                )
            except (RocketQError, OSError) as exc:
                log.warning("unregister broker %s from name server %s failed: %s", name, ns, exc)

        await asyncio.gather(*(one(ns) for ns in self.namesrv_addrs))
