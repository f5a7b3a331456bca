"""Timer messages (RocketMQ 5): the send-path rewrite, the timer wheel, its log and checkpoint, delivery."""
