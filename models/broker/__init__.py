"""Broker models: store (CommitLog, ConsumeQueue, flush, dispatch), processors, services."""
