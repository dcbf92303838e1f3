"""Broker models: the store (CommitLog, ConsumeQueue, flush, dispatch, retention), the request
processors (send, pull, POP and ack, end transaction, offsets, locks, admin), HA replication and
controller mode's broker side, delay and timer messages, transaction checks, and the settings
(config.py)."""
