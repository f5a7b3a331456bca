"""rocketq.controller — the RocketMQ 5 controller (RIP-44): elected masters, epochs, Raft.

See docs/failover.md.
"""
