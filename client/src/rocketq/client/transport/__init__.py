"""Transports over the sans-IO remoting codec: the shared asyncio channel, asyncio and blocking clients.

The server side (``RemotingServer``) lives in :mod:`rocketq.server`, which builds on
:mod:`rocketq.client.transport.channel`; nothing here imports it.
"""
