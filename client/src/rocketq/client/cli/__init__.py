"""The ``mqadmin`` command line, assembled from command groups.

One module per group of subcommands: :mod:`.topic`, :mod:`.cluster` (clusterList, haStatus),
:mod:`.consumer` (consumerProgress, resetOffsetByTime), :mod:`.message` (queries, send,
consume), :mod:`.controller` (the controller's metadata, sync state sets, elections, epochs),
:mod:`.acl`, :mod:`.trace` (queryMsgTraceById) and :mod:`.kvconfig` (the NameServer's KV
store).  Each exports a :class:`~rocketq.client.cli.common.CommandGroup`; :mod:`.common` holds
what the groups share (output tables, RocketMQ's timestamps, ``parse_timestamp``) and
:mod:`.mqadmin` builds the parser and runs a command (``mqadmin`` is
:func:`rocketq.client.cli.mqadmin.main`; ``python -m rocketq.client.cli`` runs it too).  The
groups use only the public admin and client APIs.
"""
