"""A run's records judged again for `rmqsim explain`: the checkers' own ledgers, fed the run's
records (its trace or a replay, explain_source.py), give every message its cause with the very
code that counted it in `summary.json` (analysis/checkers/message_causes.py); a `Collector` keeps the
records the question needs beside them (explain_collect.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from analysis.checkers.duplicates import Timeline
from analysis.checkers.ledger import Ledger, ProducerInfo
from analysis.checkers.ledger_codes import SEQ_BITS, SEQ_MASK
from analysis.checkers.message_causes import MessageCauses
from analysis.checkers.metrics import judge_units
from analysis.checkers.txn_checker import TxnLedger
from analysis.explain.collect import MSG_FIELD, Collector
from analysis.explain.source import ExplainError, RunFiles, stream
from models.records import COMMIT_LOG_DESTROYED
from rmqsim.runner import consumer_groups, producer_infos
from rmqsim.scenario.validate import broker_group_nodes
from sim.env import ms


@dataclass
class Findings:
    run: RunFiles
    ledger: Ledger
    txn: TxnLedger
    causes: MessageCauses
    metrics: dict[str, Any]
    collector: Collector
    source: str  # "trace" or "replay"

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.ledger.producers]

    def key(self, msg_id: int) -> str:
        return self.causes.key(msg_id)

    def run_broker(self, node: str) -> str:
        """The broker group of a broker node (a node that is none is its own name)."""
        return self.collector.broker_of.get(node, node)

    @cached_property
    def timeline(self) -> Timeline:
        return Timeline(self.ledger.events)

    @cached_property
    def copies(self) -> list[np.ndarray]:
        """Stored copies of each message in its topic, per producer (the duplicate checker's view)."""
        return [np.frombuffer(c, np.uint8) for c in self.ledger.copies]

    @cached_property
    def dups(self) -> dict[tuple[str, int, int], tuple]:
        """(unit, message id, time) → the ledger's note of that duplicate delivery."""
        return {(name, d[6] << SEQ_BITS | d[7], d[0]): d for name, unit in self.ledger.units.items() for d in unit.dups}

    @cached_property
    def rare_by_msg(self) -> dict[tuple[str, int], list[tuple]]:
        """(kind, message id) → the rare records of that kind naming it (destroyed copies, reused offsets, ...)."""
        out: dict[tuple[str, int], list[tuple]] = {}
        for r in self.collector.rare:
            at = MSG_FIELD.get(r[2])
            if at is not None:
                out.setdefault((r[2], r[at]), []).append(r)
        return out

    @cached_property
    def destroyed_in_group(self) -> dict[tuple, list[tuple]]:
        """(broker group, topic, queue id, queue offset) → the commit_log.destroyed records of that
        position on any node of the group, in time order (a position is the group's: its replicas
        give the same offsets)."""
        out: dict[tuple, list[tuple]] = {}
        for r in self.collector.rare:
            if r[2] == COMMIT_LOG_DESTROYED:
                out.setdefault((self.run_broker(r[1]), r[4], r[5], r[6]), []).append(r)
        return out

    def born_us(self, msg_id: int) -> int | None:
        p, seq = msg_id >> SEQ_BITS, msg_id & SEQ_MASK
        if p >= len(self.ledger.producers) or seq > self.ledger.top_seq[p]:
            return None
        born = int(self.ledger.born_us[p].at(np.array([seq], np.int64))[0])
        return born if born >= 0 else None


def broker_nodes(scenario: Any) -> dict[str, str]:
    """Every broker node → its broker group's name (a master is named as its group; slaves `-s1`...)."""
    return {node: b.name for b in scenario.cluster.brokers
            for node, _role, _zone, _id in broker_group_nodes(b.name, b.zone, b.store.broker_role, b.replicas)}


def investigate(run: RunFiles, msg_id: int | None = None) -> Findings:
    """Feed the run's records to fresh ledgers and a collector (asked about `msg_id`, if given) and
    judge them; ExplainError if the counts are not the summary's."""
    sc = run.scenario
    infos: list[ProducerInfo] = producer_infos(sc)
    groups = consumer_groups(sc)
    ledger = Ledger(infos, {g: e["topic"] for g, e in groups.items()},
                    broadcasting=tuple(g for g, e in groups.items() if e["broadcasting"]),
                    orderly=tuple(g for g, e in groups.items() if e["orderly"]),
                    members={g: e["members"] for g, e in groups.items()},
                    pop=tuple(g for g, e in groups.items() if e["pop"]))
    ledger.warmup_us = ms(sc.warmup_ms)
    txn = TxnLedger(infos)
    collector = Collector(broker_nodes(sc), msg_id)
    source = stream(run, [ledger.feed, txn.feed, collector])
    details: dict[str, Any] = {}
    quiet = run.summary.get("quiescence")
    not_quiet = isinstance(quiet, dict) and quiet.get("reached") is False  # unconsumed, not lost (metrics.py)
    metrics = judge_units(ledger, details, stopped=run.summary.get("stopped_by") is not None or not_quiet,
                          idle=frozenset(run.summary.get("undrained_units") or ()))
    for key in ("lost", "duplicates", "order_violations"):
        if metrics[key] != run.summary.get(key):
            raise ExplainError(f"judging this run's records again gives {key} = {metrics[key]}, not the summary's "
                               f"{run.summary.get(key)}: the summary was not made by this version of the checkers")
    return Findings(run, ledger, txn, details["message_causes"], metrics, collector, source)
