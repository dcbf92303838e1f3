"""The rare records behind an outage, kept for the `why` lines of the summary's availability section.

A Ledger rare observer (analysis/checkers/ledger.py `rare_observers`): it is handed the chunks that
hold a kind of the ledger's `_RARE_CODES` and keeps, in emission order, the records of the kinds that
explain why writes or reads came back when they did (analysis/checkers/availability.py):

- `producer.route_updated`: a producer installed a changed route of a topic (MQClientInstance
  updateTopicRouteInfoFromNameServer: the 30 s poll, `pollNameServerInterval`, or a send that
  found no route);
- `controller.elected`, `broker.role`: the controller's elections and each broker's role changes
  (5.x controller mode);
- `node.crashed`, `node.restarted`: a process or host going down and coming back;
- `namesrv.broker_unregistered`: a NameServer dropping a broker (channel closed, or no heartbeat for
  120 s: BrokerHousekeepingService / RouteInfoManager.scanNotActiveBroker);
- `consumer.pull_failed`: a consumer's pull that failed (a stranded pull reset by its peer's host,
  a timeout, a broker answering it cannot serve).

Each kind keeps at most `MAX_PER_KIND` records (the first ones; `truncated` names the kinds cut),
so a pathological run cannot grow it without bound.
"""

from __future__ import annotations

from models.records import (
    BROKER_ROLE,
    CONSUMER_PULL_FAILED,
    CONTROLLER_ELECTED,
    NAMESRV_BROKER_UNREGISTERED,
    PRODUCER_ROUTE_UPDATED,
)
from sim.trace import NODE_CRASHED, NODE_RESTARTED

MAX_PER_KIND = 100_000
KINDS = (PRODUCER_ROUTE_UPDATED, CONTROLLER_ELECTED, BROKER_ROLE, NODE_CRASHED, NODE_RESTARTED,
         NAMESRV_BROKER_UNREGISTERED, CONSUMER_PULL_FAILED)


class AvailabilityWitness:
    """The records of `KINDS`, by kind, in emission order (module docstring)."""

    def __init__(self) -> None:
        self.records: dict[str, list[tuple]] = {kind: [] for kind in KINDS}
        self.truncated: list[str] = []

    def feed(self, chunk: list[tuple]) -> None:
        records = self.records
        for r in chunk:
            kept = records.get(r[2])
            if kept is None:
                continue
            if len(kept) < MAX_PER_KIND:
                kept.append(r)
            elif r[2] not in self.truncated:
                self.truncated.append(r[2])

    def of(self, kind: str) -> list[tuple]:
        return self.records[kind]
