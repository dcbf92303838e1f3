"""Fault story: a broker process restarts from an older consumerOffset.json (ConsumerOffsetManager,
flushed every `flushConsumerOffsetInterval` = 5 s; the clients commit every
`persistConsumerOffsetInterval` = 5 s), so its consumers re-read what they had consumed since the
file's offsets: `broker_offset_rollback` duplicates, bounded by what was consumed from that broker
in those two intervals before the crash (scenarios/orderly_send.yaml: broker-a killed at 20 s,
back at 35 s)."""

from __future__ import annotations

import pytest

import rmqsim

FLUSH_PLUS_PERSIST_US = 5_000_000 + 5_000_000  # flushConsumerOffsetInterval + persistConsumerOffsetInterval
SLACK_US = 1_000_000  # a commit in flight, a flush tick's phase


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_broker_restart_from_older_offsets_rereads_at_most_the_last_intervals(seed):
    r = rmqsim.run("scenarios/orderly_send.yaml", seed=seed, keep_records=True)
    s = r.summary
    rollback = s["duplicates_by_cause"]["broker_offset_rollback"]
    assert s["lost"] == 0 and rollback > 0
    crashed = r.frame("node.crashed")
    crash_us = int(crashed[crashed.node == "broker-a"].t_us.min())
    c = r.frame("consumer.consumed")
    ok = c[c.ok & (c.broker == "broker-a") & (c.reconsume_times == 0)]
    first = ok.groupby("msg_id").t_us.min()
    window = first[(first > crash_us - FLUSH_PLUS_PERSIST_US - SLACK_US) & (first <= crash_us)]
    assert rollback <= len(window)
    # the broker rolled back only when it restarted (it loads consumerOffset.json at start-up)
    rolled = r.frame("broker.offset_rolled_back")
    assert len(rolled) > 0 and (rolled.node == "broker-a").all() and (rolled.t_us > crash_us).all()
    # and no more re-reads than the offsets the restart moved back
    assert rollback <= int((rolled.from_offset - rolled.to_offset).sum())
