"""rocketq.server — the server half of rocketq's remoting library, shared by every server process.

It lives beside :mod:`rocketq.client` in ``client/`` because that folder is the remoting library
for both sides, as RocketMQ's ``remoting`` module is.  The NameServer, the controller and the
broker each build on it and on :mod:`rocketq.client.remoting`: :mod:`~rocketq.server.remoting_server`
(listening, processors by request code, graceful stop), :mod:`~rocketq.server.tls` (the TLS
accept modes), :mod:`~rocketq.server.acl` (plain-ACL checks), :mod:`~rocketq.server.properties`
(the one reader of ``.properties`` files: ``broker.conf``, ``namesrv.properties``,
``controller.conf``), :mod:`~rocketq.server.metrics` (the one metrics-exporter vocabulary),
:mod:`~rocketq.server.memory` and :mod:`~rocketq.server.diagnostics`.  It imports only
``rocketq.client.remoting``, ``rocketq.client.transport`` and ``rocketq.client.errors`` — never a
server component or the client APIs — and :mod:`rocketq.client` never imports it.
``Channel``, ``Processor`` and ``ChannelListener`` are re-exported so server code imports from one
place.
"""

from rocketq.client.transport.channel import Channel, ChannelListener, Processor
from rocketq.server.remoting_server import RemotingServer

__all__ = ["Channel", "ChannelListener", "Processor", "RemotingServer"]
