"""The names a scenario gives RocketMQ's resources, checked by RocketMQ's rules, and the other
value types the client entries of a scenario share.

- `TopicName`: TopicValidator's character set (letters, digits, `_`, `-`), 1 to 127 characters;
  names that start like RocketMQ's system topics (`SCHEDULE_`, `RMQ_SYS_`, `%`) are refused;
- `GroupName`: a producer or consumer group, the same character set, 1 to 255 characters;
- `Zone`: the zone (machine room) of a host, a node name (sim/config.py: NodeName);
- `Count`: the instances of one producer or consumer entry (at most sim/limits.py's
  `HARD_MAX_INSTANCES`).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from sim.config import Int, NodeName
from sim.limits import HARD_MAX_INSTANCES

RESERVED_TOPIC_PREFIXES = ("SCHEDULE_", "RMQ_SYS_", "%")  # TopicValidator's system topics
_ROCKETMQ_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")


def _topic_name(value: str) -> str:
    if not (_ROCKETMQ_NAME_RE.fullmatch(value) and len(value) <= 127):
        raise ValueError("a topic name is 1 to 127 letters, digits, '_' or '-'")
    if value.startswith(RESERVED_TOPIC_PREFIXES):
        raise ValueError(f"topic names starting with {' or '.join(RESERVED_TOPIC_PREFIXES[:2])} are "
                         "RocketMQ's system topics")
    return value


def _group_name(value: str) -> str:
    if not (_ROCKETMQ_NAME_RE.fullmatch(value) and len(value) <= 255):
        raise ValueError("a group name is 1 to 255 letters, digits, '_' or '-'")
    return value


TopicName = Annotated[str, AfterValidator(_topic_name)]
GroupName = Annotated[str, AfterValidator(_group_name)]
Zone = NodeName
Count = Annotated[Int, Field(gt=0, le=HARD_MAX_INSTANCES)]  # instances of one producer/consumer entry
