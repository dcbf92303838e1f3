"""The two RocketMQ releases the models follow where they differ, named once.

A scenario's `version` (the brokers) and `client_version` (the clients; null: as `version`) take
one of these values: "5.x" is rocketmq-all-5.3.3, "4.x" is rocketmq-all-4.9.8. `Version` is the
enum the broker models keep (`broker.version is Version.V5`); `V4` and `V5` are its plain strings,
which the client models compare with `==` (a plain `str`, the cheapest comparison on their hot
paths). The scenario schema spells the same two values as a `Literal` (rmqsim/scenario/spec.py:
a Literal takes no names).
"""

from __future__ import annotations

from enum import StrEnum


class Version(StrEnum):
    """The RocketMQ line a scenario follows where 4.x (4.9.8) and 5.x (5.3.3) differ."""

    V5 = "5.x"
    V4 = "4.x"


V4: str = Version.V4.value  # rocketmq-all-4.9.8
V5: str = Version.V5.value  # rocketmq-all-5.3.3
VERSIONS = (V4, V5)  # oldest first


def is_v5(version: str) -> bool:
    """5.x (5.3.3) behaviour, for a version or client version."""
    return version == V5


def is_v4(version: str) -> bool:
    """4.x (4.9.8) behaviour, for a version or client version."""
    return version == V4


def check_version(version: str, what: str = "client_version") -> str:
    """`version` itself if it is one of `VERSIONS`, else ValueError naming `what`."""
    if version not in VERSIONS:
        raise ValueError(f"{what} must be one of {VERSIONS}, not {version!r}")
    return version
