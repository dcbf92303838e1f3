"""client.impl.consumer.PullAPIWrapper's choice of node, and MQClientInstance.findBrokerAddressInSubscribe.

Each queue is pulled from the broker id the last pull response suggested
(`suggestWhichBrokerId`, kept per queue in `pullFromWhichNodeTable`; the master, 0, at first).
The address: that id's; for a slave id missing from the route, the next id; else — unless only
that broker will do — the first address the route lists for the group (ids in ascending order,
as the client's HashMap<Long, String> iterates small ids), so with the master gone from the
route, reads go to a slave. A pull sent to a slave has its commit-offset flag cleared.

Only consumers whose routes list a slave use this (push_consumer.py); with masters only, the
master's address is the answer and nothing here runs.
"""

from __future__ import annotations

from typing import Any

from models.message import MessageQueue

MASTER_ID = 0  # MixAll.MASTER_ID


def find_broker_address_in_subscribe(addrs: dict[int, str], broker_id: int,
                                     only_this_broker: bool = False) -> tuple[str, bool] | None:
    """(address, is a slave) for `broker_id` of a group whose route lists `addrs` (id → node)."""
    if not addrs:
        return None
    slave = broker_id != MASTER_ID
    addr = addrs.get(broker_id)
    if addr is None and slave:
        addr = addrs.get(broker_id + 1)
    if addr is None and not only_this_broker:
        first = min(addrs)
        addr, slave = addrs[first], first != MASTER_ID
    return None if addr is None else (addr, slave)


class PullAPIWrapper:
    def __init__(self, broker_addrs: Any) -> None:
        self.broker_addrs = broker_addrs  # broker name → {broker id: address} from the routes
        self.pull_from: dict[MessageQueue, int] = {}  # pullFromWhichNodeTable (non-master entries)

    def update(self, mq: MessageQueue, broker_id: int) -> None:
        """updatePullFromWhichNode, from a processed pull result."""
        if broker_id == MASTER_ID:
            self.pull_from.pop(mq, None)
        else:
            self.pull_from[mq] = broker_id

    def target(self, mq: MessageQueue) -> tuple[str, bool] | None:
        """(address, is a slave) to pull `mq` from now (recalculatePullFromWhichNode + find)."""
        return find_broker_address_in_subscribe(self.broker_addrs(mq.broker_name), self.pull_from.get(mq, MASTER_ID))
