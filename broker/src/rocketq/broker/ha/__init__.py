"""Master/slave replication of the CommitLog (RocketMQ 4.x's HA service), see docs/replication.md.

``protocol`` is the sans-IO codec of the HA wire protocol, ``aligner`` keeps a slave's appends on
record boundaries, ``master`` is the master's HA server (``HAService``), ``slave`` the slave's
client (``HAClient``) and ``replication`` the per-broker facade (role, SYNC_MASTER waits, status).
"""
