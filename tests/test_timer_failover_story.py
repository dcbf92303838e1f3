"""Timer messages across a controller failover (5.3.3: ReplicasManager.handleSlaveSynchronize →
SlaveSynchronize.syncTimerCheckPoint every 3 s; a promoted slave's TimerMessageStore reads from
the last copied `lastReadTimeMs`; models/broker/timer_store.py, replicas_manager.py).

controller_master_power_loss with a producer of timer messages (2–15 s ahead): the master's power
goes at ~20 s and a slave is elected ~12 s later. Over three seeds:
- the new master delivers what the old master parked and had not delivered (nothing parked and
  replicated is left undelivered; what stays undelivered had its timer-topic copy destroyed);
- it reads again exactly the slots from the copied checkpoint on: every message delivered twice
  was first delivered by the old master from a slot at most one sync period (3 s) + one
  checkpoint period (1 s) + one slot before the power loss, and every message the old master
  delivered from those slots, parked well before the loss, is delivered again (an empty
  checkpoint would read every slot since the start again);
- the mechanism happens: on each seed some messages parked on the old master are delivered by the
  new one, and some are read again.
"""

from __future__ import annotations

import functools
from collections import Counter

import pytest

import rmqsim
from tests.conftest import ROOT

SEEDS = (1, 2, 3)
S = 1_000_000
SYNC_US, FLUSH_US, PRECISION_US, POLL_US = 3 * S, 1 * S, 1 * S, 100_000
OLD = "broker-a"
TIMER = ("producers[0].deliver_time_ms={dist: uniform, low: 2000, high: 15000}", "producers[0].rate_per_s=50")


@functools.cache
def run(seed: int):
    return rmqsim.run(str(ROOT / "scenarios" / "controller_master_power_loss.yaml"), seed=seed,
                      overrides=list(TIMER), keep_records=True)


def kind(r, name: str) -> list[tuple]:
    return [x for x in r.records if x[2] == name]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_promoted_slave_reads_the_timer_from_the_copied_checkpoint(seed: int) -> None:
    r = run(seed)
    fault_us = next(x[0] for x in kind(r, "fault.injected") if x[4] == OLD)
    (new,) = {x[4] for x in kind(r, "controller.elected") if x[4] and x[4] != OLD}
    parked = {x[3]: (x[0], x[6]) for x in kind(r, "timer.enqueued")}  # msg → (parked at, slot)
    deliveries: dict[int, list[tuple[int, str, int]]] = {}
    for x in kind(r, "timer.delivered"):
        deliveries.setdefault(x[3], []).append((x[0], x[1], x[5]))
    # the new master delivers what the old master parked and had not delivered
    handed_over = [m for m, ds in deliveries.items() if parked[m][0] < fault_us and ds[0][1] == new]
    assert handed_over, "no timer message crossed the failover"
    destroyed = {x[3] for x in kind(r, "commit_log.destroyed")}
    assert set(parked) - set(deliveries) <= destroyed
    # read again: exactly the old master's deliveries from the slots since the copied checkpoint
    twice = {m for m, ds in deliveries.items() if len(ds) > 1}
    assert twice, "no slot was read again"
    oldest = fault_us - SYNC_US - FLUSH_US - POLL_US - PRECISION_US  # the checkpoint copied last
    for m in twice:
        (t1, n1, slot1), (t2, n2, _slot2) = deliveries[m][:2]
        assert (n1, n2) == (OLD, new) and t1 < fault_us <= t2, deliveries[m]
        assert slot1 >= oldest, (m, deliveries[m], fault_us)
    read_again_from = min(deliveries[m][0][2] for m in twice)
    by_old = {m for m, ds in deliveries.items() if ds[0][1] == OLD and ds[0][2] >= read_again_from}
    settled = {m for m in by_old if parked[m][0] < fault_us - S}  # replicated long before the loss
    assert settled <= twice, sorted(settled - twice)[:5]
    assert Counter(r.summary["duplicates_by_cause"]).most_common(1)[0][0] == "timer_redelivered"
