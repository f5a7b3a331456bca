"""Sans-IO implementation of Apache RocketMQ's 4.x remoting protocol.

Nothing in this package imports ``socket``, ``asyncio`` or ``threading``: the codecs turn bytes
into commands and messages and back, and :mod:`rocketq.client.remoting.connection` tracks request
opaques.  Transports (:mod:`rocketq.client.transport`) are thin adapters around it.
"""
