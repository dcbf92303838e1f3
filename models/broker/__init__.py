"""Broker models: the store (CommitLog, ConsumeQueue, flush, dispatch, retention), the request
processors (send, pull, POP and ack, end transaction, offsets, locks, admin), HA replication and
controller mode's broker side, delay and timer messages, transaction checks, and the settings
(config.py).

Java-checked entry points (pure functions the models use, exported here so that moves do not
break them): `find_consistent_point`, `truncate_epochs`, `shrink_sync_state_set`
(auto_switch_ha.py), `pop_init_offset` (pop_message_processor.py), `timer_slot_ms` and
`TimerMessageIllegal` (timer_store.py)."""

from models.broker.auto_switch_ha import find_consistent_point, shrink_sync_state_set, truncate_epochs
from models.broker.pop_message_processor import pop_init_offset
from models.broker.timer_store import TimerMessageIllegal, timer_slot_ms

__all__ = ["TimerMessageIllegal", "find_consistent_point", "pop_init_offset", "shrink_sync_state_set",
           "timer_slot_ms", "truncate_epochs"]
