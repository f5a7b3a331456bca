"""DLedger mode: a group of brokers (``enableDLegerCommitLog=true``) that elects its own master.

RocketMQ 4.5's DLedger CommitLog keys make three or more brokers one Raft group.  rocketq keeps
the CommitLog format and reuses controller mode's replication: an embedded Raft (pysyncobj) on
the ``dLegerPeers`` ports elects the master through its log (:mod:`.state`), the HA transfer and
the epoch-based truncation of ``controller_mode`` move the data, and a write is acknowledged once
a majority of the group holds it (:mod:`.manager`).  See docs/dledger.md.
"""
