"""Controller mode (RocketMQ 5, RIP-44): a broker whose role, id and epoch a controller decides.

``epoch_file`` keeps which master epoch wrote which CommitLog range; ``handshake`` is the HA
connection's opening in controller mode (the slave's id and the epoch it follows); ``acks`` holds
the SyncStateSet ack rule and the set's expand/shrink decisions; ``controller_client`` talks to
the controller leader; ``controller_requests`` builds each controller request and types its
answer; ``replicas_manager`` registers, heartbeats and changes the broker's role at runtime
(docs/failover.md, "Brokers in controller mode").
"""
