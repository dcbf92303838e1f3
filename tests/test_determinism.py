"""Same scenario + seed ⇒ identical trace digest, in-process and across PYTHONHASHSEED values;
streaming (records not kept) changes nothing but memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import rmqsim
from sim import trace
from tests.conftest import ROOT, short_baseline

_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
from tests.conftest import short_baseline
import rmqsim
import sim
r = rmqsim.run(short_baseline(), seed={seed})
print(json.dumps({{"digest": r.summary["trace_sha256"], "sent_ok": r.summary["sent_ok"]}}))
"""


def _child(seed: int, hash_seed: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    out = subprocess.run([sys.executable, "-c", _CHILD.format(root=str(ROOT), seed=seed)], env=env,
                         capture_output=True, text=True, check=True, cwd=str(ROOT))
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def kept7():
    return rmqsim.run(short_baseline(), seed=7, keep_records=True)


def test_same_seed_same_digest_in_process(kept7) -> None:
    b = rmqsim.run(short_baseline(), seed=7, keep_records=True)
    assert kept7.summary["trace_sha256"] == b.summary["trace_sha256"]
    assert kept7.records == b.records
    assert len(kept7.records) == kept7.summary["records"] > 0
    assert trace.digest(kept7.records) == kept7.summary["trace_sha256"]


def test_streaming_run_keeps_no_records_and_judges_the_same(kept7) -> None:
    """Without `keep_records` (the default) the checkers and the digest see every record as it
    streams by, and nothing is kept: same summary, same digest, no records in memory."""
    streamed = rmqsim.run(short_baseline(), seed=7)
    assert streamed.records == [] and streamed.world.env.tracer.records == []
    assert streamed.summary == kept7.summary
    assert streamed.summary["sent_ok"] > 5_000 and streamed.summary["verdict"] == "valid"


def test_different_seeds_differ() -> None:
    a = rmqsim.run(short_baseline(), seed=1)
    b = rmqsim.run(short_baseline(), seed=2)
    assert a.summary["trace_sha256"] != b.summary["trace_sha256"]


def test_digest_is_independent_of_pythonhashseed_and_process() -> None:
    first = _child(3, "0")
    second = _child(3, "1")
    third = _child(3, "random")
    assert first == second == third
    local = rmqsim.run(short_baseline(), seed=3).summary["trace_sha256"]
    assert first["digest"] == local


def test_records_hold_only_stable_scalar_types() -> None:
    """Exact types, not subclasses: an enum or a NumPy scalar would enter the digest's pickle
    by class reference (version-dependent) and would not come back the same from the Parquet trace."""
    result = rmqsim.run(short_baseline(duration_ms=5_000, settle_ms=2_000), seed=1, keep_records=True)
    assert result.records
    allowed = {str, int, float, bool, type(None)}
    for record in result.records:
        assert type(record[0]) is int and type(record[1]) is str
        assert all(type(v) in allowed for v in record), record
        declared = trace.TYPES[record[2]]  # and each field has the type its kind declares
        assert len(record) == 3 + len(declared), record
        assert all(v is None or type(v) is tp for v, tp in zip(record[3:], declared, strict=True)), record


def test_adding_a_consumer_leaves_other_streams_untouched() -> None:
    """Named streams: broker disk draws do not depend on how many clients exist."""
    from sim.rng import Rng

    a, b = Rng(5), Rng(5)
    a.stream("c-4.listener")
    assert a.stream("broker-a.disk").random() == b.stream("broker-a.disk").random()


_BROKER_FIDELITY = ["duration_ms=25s", "settle_ms=10s", "consumers[0].start_ms=1s",
                    "cluster.brokers[1].store.transient_store_pool_enable=true",
                    "actions=[{at_ms: 20s, kind: reset_offset, group: billing, to_time_ms: 5s}]"]
_BROKER_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
import rmqsim
import sim
r = rmqsim.run({path!r}, seed=2, overrides={overrides!r})
print(json.dumps({{"digest": r.summary["trace_sha256"], "lost": r.summary["lost"]}}))
"""


def _children(code: str) -> list[dict]:
    """The JSON line `code` prints, run in processes with PYTHONHASHSEED 0 and 1."""
    outs = []
    for hash_seed in ("0", "1"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                             cwd=str(ROOT))
        outs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return outs


@pytest.mark.slow  # over 5 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
def test_broker_fidelity_run_is_deterministic_across_pythonhashseed() -> None:
    """HA replication, a power loss with page-cache write-back and stale connections, the
    transient store pool and a reset by time: the same digest in processes with different hash
    seeds, and records of the declared scalar types."""
    path = str(ROOT / "scenarios" / "power_loss_async_master.yaml")
    outs = _children(_BROKER_CHILD.format(root=str(ROOT), path=path, overrides=_BROKER_FIDELITY))
    local = rmqsim.run(path, seed=2, overrides=_BROKER_FIDELITY, keep_records=True)
    assert outs[0] == outs[1] and outs[0]["digest"] == local.summary["trace_sha256"]
    kinds = {r[2] for r in local.records}
    assert {"ha.connected", "broker.slave_synced", "commit_log.destroyed", "admin.offset_reset",
            "consumer.offset_reset", "broker.offsets_loaded"} <= kinds
    allowed = {str, int, float, bool, type(None)}
    assert all(type(v) in allowed for r in local.records for v in r)


def test_orderly_broker_failure_is_deterministic_across_pythonhashseed() -> None:
    """Orderly consumption with broker locks, a broker crash that loses them, and the order
    checker: the same digest and figures in processes with different hash seeds; records of the
    declared scalar types."""
    path = str(ROOT / "scenarios" / "orderly_broker_failure.yaml")
    overrides = ["duration_ms=45s", "settle_ms=15s"]
    outs = _children(_BROKER_CHILD.format(root=str(ROOT), path=path, overrides=overrides).replace(
        '"lost": r.summary["lost"]', '"lost": r.summary["lost"], "order": r.summary["order_violations_by_cause"]'))
    local = rmqsim.run(path, seed=2, overrides=overrides, keep_records=True)
    assert outs[0] == outs[1] and outs[0]["digest"] == local.summary["trace_sha256"]
    assert outs[0]["order"] == local.summary["order_violations_by_cause"]
    kinds = {r[2] for r in local.records}
    assert {"broker.lock_granted", "broker.lock_refused", "broker.unlocked"} <= kinds
    for record in local.records:
        declared = trace.TYPES[record[2]]
        assert all(v is None or type(v) is tp for v, tp in zip(record[3:], declared, strict=True)), record


def test_pop_consumption_is_deterministic_across_pythonhashseed() -> None:
    """POP (both clients, a broker crash, listener failures: revives, changed invisible times, an
    offset rollback): the same digest and duplicate causes in processes with different hash seeds;
    the POP records of their declared scalar types."""
    path = str(ROOT / "scenarios" / "pop_vs_push_rebalance.yaml")
    overrides = ["duration_ms=40s", "consumers[2].failure_probability=0.05",
                 "faults=[{at_ms: 20s, kind: process_crash, node: broker-a, duration_ms: 5s}]"]
    outs = _children(_BROKER_CHILD.format(root=str(ROOT), path=path, overrides=overrides).replace(
        '"lost": r.summary["lost"]', '"lost": r.summary["lost"], "dups": r.summary["duplicates_by_cause"]'))
    local = rmqsim.run(path, seed=2, overrides=overrides, keep_records=True)
    assert outs[0] == outs[1] and outs[0]["digest"] == local.summary["trace_sha256"]
    assert outs[0]["dups"] == local.summary["duplicates_by_cause"]
    pop = [r for r in local.records if r[2].startswith("pop.")]
    assert {"pop.revived"} <= {r[2] for r in pop}
    for record in pop:
        declared = trace.TYPES[record[2]]
        assert all(v is None or type(v) is tp for v, tp in zip(record[3:], declared, strict=True)), record
