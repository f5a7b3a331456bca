"""rocketq.server — the server side of the remoting transport, shared by the NameServer and broker.

It lives in the remoting foundation folder (``client/src``) beside :mod:`rocketq.client` and
builds on its sans-IO codec and asyncio channel; :mod:`rocketq.client` never imports it, and it
imports nothing of namesrv, broker or connector (see docs/architecture.md).  ``Channel``,
``Processor`` and ``ChannelListener`` are re-exported so server code imports from one place.
"""

from rocketq.client.transport.channel import Channel, ChannelListener, Processor
from rocketq.server.remoting_server import RemotingServer

__all__ = ["Channel", "ChannelListener", "Processor", "RemotingServer"]
