"""Delay levels: the SCHEDULE_TOPIC_XXXX rewrite and the service that redelivers due messages."""
