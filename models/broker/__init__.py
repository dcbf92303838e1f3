"""Broker models: the store (CommitLog, ConsumeQueue, flush, dispatch, retention), the request
processors (send, pull, POP and ack, end transaction, offsets, locks, admin), HA replication and
controller mode's broker side, delay and timer messages, transaction checks, and the settings
(config.py).

Java-checked entry points (pure functions the models use, exported here so that moves do not
break them): `find_consistent_point`, `truncate_epochs`, `shrink_sync_state_set`
(auto_switch_ha.py), `pop_init_offset` (pop_message_processor.py), `timer_slot_ms` and
`TimerMessageIllegal` (timer_store.py).

They are re-exported lazily (PEP 562's module `__getattr__`): `from models.broker import
find_consistent_point` imports auto_switch_ha.py then, while importing one submodule (the
settings, config.py, which validating a scenario needs) loads none of the others."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from models.broker.auto_switch_ha import find_consistent_point, shrink_sync_state_set, truncate_epochs
    from models.broker.pop_message_processor import pop_init_offset
    from models.broker.timer_store import TimerMessageIllegal, timer_slot_ms

_HOME = {"find_consistent_point": "auto_switch_ha", "shrink_sync_state_set": "auto_switch_ha",
         "truncate_epochs": "auto_switch_ha", "pop_init_offset": "pop_message_processor",
         "TimerMessageIllegal": "timer_store", "timer_slot_ms": "timer_store"}

__all__ = ["TimerMessageIllegal", "find_consistent_point", "pop_init_offset", "shrink_sync_state_set",
           "timer_slot_ms", "truncate_epochs"]


def __getattr__(name: str) -> Any:
    """An entry point, imported from its module on first use (and cached in this package)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
