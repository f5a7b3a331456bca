"""RocketMQ 5 POP consumption on the broker: pop, ack, change invisible time, revive (docs/rocketmq5.md)."""
