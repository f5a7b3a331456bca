"""rocketq.client — the client half of rocketq's remoting library, and the client APIs built on it.

The ``client/`` folder is rocketq's remoting library for both sides, as RocketMQ's ``remoting``
module is: it ships :mod:`rocketq.client` (this package), :mod:`rocketq.server` (the server half:
the listening transport, ACL checks, the ``.properties`` reader and the metrics vocabulary that
every server shares) and :mod:`rocketq.tools` (the dashboard and ``rocketq dev``, programs over
the public client API).  Here: :mod:`rocketq.client.remoting` is the sans-IO protocol (frames,
commands, codes, headers, record layouts, message codecs) that both sides speak,
:mod:`rocketq.client.transport` the asyncio and blocking adapters that host it, and on top the
producers, consumers, admin API, ``mqadmin``, message traces and the process launcher.  This
package imports no other rocketq package; the NameServer, controller and broker build only on
``remoting``, ``transport``, ``errors`` and :mod:`rocketq.server` (docs/architecture.md).
"""
