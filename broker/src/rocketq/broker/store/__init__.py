"""Broker storage engine: CommitLog, ConsumeQueue, IndexFile, checkpoint, flush, recovery, retention."""
