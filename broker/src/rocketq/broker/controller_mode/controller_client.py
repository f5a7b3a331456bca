"""Requests from a broker to the controller leader, wherever it is.

``controllerAddr`` lists every controller.  Requests go to the leader last seen; a controller that
is not the leader answers CONTROLLER_NOT_LEADER with the leader's address in its
``GetMetaDataResponseHeader`` fields, which is then followed once; an unreachable controller
makes the next one in the list be tried.  The answer is returned whatever its code: deciding what
a code means is the caller's business.  :class:`ControllerUnavailable` is raised only when no
controller answered at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from rocketq.broker.errors import BrokerError
from rocketq.client.errors import RocketQError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.controller import GetMetaDataResponseHeader
from rocketq.client.transport.aio import RemotingClient

__all__ = ["ControllerClient", "ControllerUnavailable"]

log = logging.getLogger(__name__)


class ControllerUnavailable(BrokerError):
    """No controller in ``controllerAddr`` answered."""


class ControllerClient:
    """Sends requests to the controller leader; all methods run on the broker's event loop."""

    def __init__(self, client: RemotingClient, addrs: Sequence[str], *, timeout_ms: int) -> None:
        self._client = client
        self.addrs = list(addrs)
        self.timeout_ms = timeout_ms
        self.leader: str | None = None

    def _candidates(self) -> list[str]:
        first = [self.leader] if self.leader else []
        return first + [a for a in self.addrs if a != self.leader]

    async def invoke(
        self, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """The leader's answer to one request (any code except CONTROLLER_NOT_LEADER)."""
        errors: list[str] = []
        tried: set[str] = set()
        queue = self._candidates()
        while queue:
            addr = queue.pop(0)
            if addr in tried:
                continue
            tried.add(addr)
            cmd = RemotingCommand.request(code, dict(ext_fields or {}), body)
            try:
                answer = await self._client.invoke(addr, cmd, self.timeout_ms)
            except (RocketQError, OSError, TimeoutError) as exc:
                errors.append(f"{addr}: {exc}")
                if addr == self.leader:
                    self.leader = None
                continue
            if answer.code != ResponseCode.CONTROLLER_NOT_LEADER:
                self.leader = addr
                return answer
            hint = _leader_hint(answer)
            errors.append(f"{addr}: not the leader (leader: {hint or 'unknown'})")
            if hint and hint not in tried:
                queue.insert(0, hint)
        raise ControllerUnavailable(f"no controller leader answered request {code}: {'; '.join(errors)}")

    async def broadcast(self, code: int, ext_fields: Mapping[str, str]) -> dict[str, RemotingCommand]:
        """Send one request to every controller at once (heartbeats: liveness is kept per
        controller, as in RocketMQ); the answers by address, unreachable ones left out."""

        async def one(addr: str) -> RemotingCommand | None:
            cmd = RemotingCommand.request(code, dict(ext_fields))
            try:
                return await self._client.invoke(addr, cmd, self.timeout_ms)
            except (RocketQError, OSError, TimeoutError) as exc:
                log.debug("request %s to controller %s failed: %s", code, addr, exc)
                return None

        answers = await asyncio.gather(*(one(a) for a in self.addrs))
        return {a: r for a, r in zip(self.addrs, answers, strict=True) if r is not None}


def _leader_hint(answer: RemotingCommand) -> str | None:
    try:
        header = GetMetaDataResponseHeader.from_ext_fields(answer.ext_fields)
    except RocketQError:
        return None
    return header.controller_leader_address or None
