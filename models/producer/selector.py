"""client.producer.MessageQueueSelector implementations used by selector (ordered) sends.

- `hash` = SelectMessageQueueByHash: `mqs[abs(arg.hashCode() % mqs.size())]` with `arg` the
  sharding key string (`k<i>`, its java.lang.String hashCode); the same key maps to the same
  queue as long as the publish list does not change.
- `random` = SelectMessageQueueByRandom: `mqs[random.nextInt(mqs.size())]` (its own Random,
  here a stream of the producer).

The list is the TopicPublishInfo's (masters with write permission, sorted by broker name). A
selector send (`DefaultMQProducerImpl.sendSelectImpl`) is never retried on another queue.
"""

# compiled with Cython: the C declarations of this module's classes are in selector.pxd beside it

from __future__ import annotations

import random
from collections.abc import Callable

from models.java import java_rem
from models.message import Message, MessageQueue, java_string_hash, shard_key

Selector = Callable[[list[MessageQueue], Message], MessageQueue]


def select_by_hash(mqs: list[MessageQueue], msg: Message) -> MessageQueue:
    value = java_rem(java_string_hash(shard_key(msg.shard)), len(mqs))
    return mqs[-value if value < 0 else value]


def make_selector(kind: str | None, stream: random.Random) -> Selector | None:
    """The selector of a producer entry (`selector:`), or None for sendDefaultImpl."""
    if kind is None:
        return None
    if kind == "hash":
        return select_by_hash
    if kind == "random":
        return lambda mqs, msg: mqs[stream.randrange(len(mqs))]
    raise ValueError(f"unknown selector {kind!r}")
