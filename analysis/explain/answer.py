"""`rmqsim explain`: why did this happen? One message's life, a cause's messages, a fault's effects.

    rmqsim explain RUN_DIR MSG            # MSG: a display key (p-1-42, as in lost_sample) or the integer id
    rmqsim explain RUN_DIR --cause CAUSE [--limit N]
    rmqsim explain RUN_DIR --fault K
    (each with --json)

The run's records come from its trace, or from a replay when it has none (explain_source.py);
the checkers judge them again and give each message its cause with the code that counted it in
the summary (explain_judge.py); the output is facts in simulated time (explain_facts.py) and
verdicts with the rule behind each label (explain_reasons.py); `--fault` attributes every finding
(explain_fault.py). The output does not depend on where the records came from: the same run
explained from its trace and from a replay prints the same.

`explain_message`, `explain_cause` and `explain_fault` return JSON-ready dicts; `render_*` turn
them into text. Bad input (not a run directory, an unknown message, cause or fault index) raises
`ExplainError` (the CLI's exit 2).
"""

from __future__ import annotations

import re
from typing import Any

from analysis.checkers.duplicates import CAUSES as DUPLICATE_CAUSES
from analysis.checkers.ledger_codes import SEQ_BITS, SEQ_MASK
from analysis.checkers.metrics import LOSS_CAUSES
from analysis.checkers.order import CAUSES as ORDER_CAUSES
from analysis.checkers.txn_checker import CAUSES_LOST as TXN_CAUSES
from analysis.explain.facts import Context, message_facts
from analysis.explain.fault import NO_FAULT, attribution
from analysis.explain.judge import Findings, investigate
from analysis.explain.reasons import (
    RULES,
    duplicate_verdict,
    lost_verdict,
    message_verdicts,
    txn_verdict,
    violation_verdict,
)
from analysis.explain.source import ExplainError, RunFiles, read_run
from analysis.explain.stories import PUSH_MAX_RECONSUME_TIMES, seconds
from rmqsim.scenario.validate import instance_names
from sim.files import some
from sim.inputs import short
from sim.readback import missing

DEFAULT_LIMIT = 10
MAX_ID_CHARS = 200  # a display key: a producer's name (64 characters, a `-N` suffix) and a sequence number
MAX_INT_ID_DIGITS = 20  # an id is below 2^64 (20 digits); longer digit strings are no id, never converted
_DIGITS = re.compile(r"[0-9]+")  # ASCII only
__all__ = ["ExplainError", "explain_cause", "explain_fault", "explain_message", "explain_result", "message_id",
           "read_run", "render"]


def message_id(text: str | int, names: list[str]) -> int:
    """The integer id of a message given as a display key (`<producer>-<seq>`) or an integer id
    (`producer index << 32 | seq`), the one parser of both: ASCII digits only (`²` is no digit,
    though `str.isdigit` says so), at most `MAX_ID_CHARS` characters (a 5,000-digit id is never
    converted), a producer of this run and a sequence number from 1. ExplainError otherwise: "was
    never sent in this run" for a well-formed id beyond the run's producers or any sequence number
    (one beyond what its producer sent is found once the records are read: `explain_message`)."""
    if isinstance(text, bool) or not isinstance(text, int | str):
        raise ExplainError(f"a message is a display key or an integer id, not {type(text).__name__}")
    shown = short(text)
    if isinstance(text, str) and len(text) > MAX_ID_CHARS:
        raise ExplainError(f"{shown} is not a message of this run: longer than any display key or id "
                           f"({MAX_ID_CHARS} characters)")
    if isinstance(text, int):
        return _in_range(shown, text if 0 <= text < 1 << 64 else -1, names)
    if _DIGITS.fullmatch(text):
        return _in_range(shown, int(text) if len(text) <= MAX_INT_ID_DIGITS else -1, names)
    producer, _, seq = text.rpartition("-")
    if producer not in names or not _DIGITS.fullmatch(seq):
        raise ExplainError(f"{shown} is not a message of this run: give a display key <producer>-<seq> "
                           f"(producers: {some(names) or 'none'}) or an integer id")
    number = int(seq) if len(seq) <= MAX_INT_ID_DIGITS else SEQ_MASK + 1
    if number < 1:
        raise ExplainError(f"{shown} is not a message: sequence numbers start at 1")
    if number > SEQ_MASK:
        raise ExplainError(f"{shown} was never sent in this run (a sequence number beyond {SEQ_MASK:,})")
    return names.index(producer) << SEQ_BITS | number


def _in_range(shown: str, msg_id: int, names: list[str]) -> int:
    """`msg_id` if it is an id of one of this run's producers (-1: too many digits for any)."""
    p, seq = msg_id >> SEQ_BITS, msg_id & SEQ_MASK
    if 0 <= msg_id and p < len(names) and seq >= 1:
        return msg_id
    if 0 <= msg_id and p < len(names):
        raise ExplainError(f"{shown} is not a message id: its sequence number (the low 32 bits) is 0")
    raise ExplainError(f"{shown} was never sent in this run (an integer id is producer index << 32 | seq; "
                       f"this run's {len(names)} producer(s): {some(names) or 'none'})")


def explain_message(run: RunFiles, msg: str | int) -> dict[str, Any]:
    """One message's life: facts in time order, then its verdicts (module docstring)."""
    msg_id = message_id(msg, run.producer_names)
    f = investigate(run, msg_id)
    p, seq = msg_id >> SEQ_BITS, msg_id & SEQ_MASK
    if seq > f.ledger.top_seq[p]:
        raise ExplainError(f"{f.key(msg_id)} was never sent in this run ({f.names[p]} sent "
                           f"{f.ledger.top_seq[p]} messages)")
    records = f.collector.message_records()
    topic = f.ledger.producers[p].topic
    facts = message_facts(records, _context(f, msg_id, topic))
    verdicts = message_verdicts(f, msg_id, records)
    return {"msg_id": msg_id, "key": f.key(msg_id), "producer": f.names[p], "topic": topic,
            "facts": [fact.as_json() for fact in facts],
            "verdicts": [v.as_json(f.key(v.msg_id)) for v in verdicts]}


def _context(f: Findings, msg_id: int, topic: str) -> Context:
    """What the fact builder needs besides the records: the run's groups, POP clients, timer checkpoints."""
    sc = f.run.scenario
    groups = tuple(dict.fromkeys(u.group for u in f.ledger.units.values() if u.topic == topic))
    members: dict[str, tuple[str, ...]] = {}
    pop_clients: dict[str, str] = {}
    max_reconsume: dict[str, int] = {}
    for c in sc.consumers:
        members[c.group] = members.get(c.group, ()) + tuple(instance_names(c.name, c.count))
        if c.pop is not None:
            pop_clients[c.group] = c.pop.client
        limit = c.client.max_reconsume_times
        max_reconsume[c.group] = PUSH_MAX_RECONSUME_TIMES if limit == -1 else limit
    timer_flush_ms = {b.name: b.store.timer_flush_interval_ms for b in sc.cluster.brokers}
    return Context(msg_id, f.names, f.collector.broker_of, f.collector.watched, f.run.summary["sim_time_ms"] * 1000,
                   groups, pop_clients, members, timer_flush_ms, max_reconsume)


def known_causes() -> dict[str, list[str]]:
    return {"lost": list(LOSS_CAUSES), "duplicate": list(DUPLICATE_CAUSES), "order_violation": list(ORDER_CAUSES),
            "txn": list(TXN_CAUSES)}


def explain_cause(run: RunFiles, cause: str, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    """Up to `limit` messages whose loss, duplicate or order violation has `cause`, each with its reason."""
    kinds = [kind for kind, causes in known_causes().items() if cause in causes]
    if not kinds:
        listed = "; ".join(f"{k}: {', '.join(c)}" for k, c in known_causes().items())
        raise ExplainError(f"unknown cause {short(cause)}; causes are {listed}")
    if limit < 1:
        raise ExplainError(f"--limit must be at least 1, not {limit}")
    f = investigate(run)
    found = []
    if "lost" in kinds:
        lost = sorted((msg_id & SEQ_MASK, msg_id >> SEQ_BITS, unit) for unit, of_unit in f.causes.lost.items()
                      for msg_id, c in of_unit.items() if c == cause)
        found += [lost_verdict(f, unit, p << SEQ_BITS | s, cause) for s, p, unit in lost]
    if "duplicate" in kinds:
        found += [duplicate_verdict(f, d) for d in sorted(f.causes.duplicates, key=lambda d: (d.t_us, d.msg_id))
                  if d.cause == cause]
    if "order_violation" in kinds:
        found += [violation_verdict(f, v) for v in sorted(f.causes.violations, key=lambda v: (v.first_us, v.msg_id))
                  if v.cause == cause]
    if "txn" in kinds:
        found += _txn_found(f, cause)
    return {"cause": cause, "kinds": kinds, "total": len(found), "rule": RULES.get(cause),
            "messages": [v.as_json(f.key(v.msg_id)) for v in _distinct(found)[:limit]]}


def _distinct(found: list[Any]) -> list[Any]:
    """The first finding of each message (a message may be duplicated several times)."""
    seen: set[tuple[str, int]] = set()
    out = []
    for v in found:
        if (v.unit, v.msg_id) not in seen:
            seen.add((v.unit, v.msg_id))
            out.append(v)
    return out


def _txn_found(f: Findings, cause: str) -> list[Any]:
    out = []
    for p, is_txn in enumerate(f.txn.transactional):
        if is_txn:  # the masks the checker counted (analysis/checkers/txn_checker.py)
            masks, _basis = f.txn.outcomes(f.ledger, p, len(f.txn.state[p]))
            out += [txn_verdict(f, p << SEQ_BITS | seq) for seq in masks[f"committed_lost:{cause}"].nonzero()[0].tolist()]
    return out


def explain_fault(run: RunFiles, index: int) -> dict[str, Any]:
    """What fault `index` did (module docstring of explain_fault.py), with the whole run's attribution."""
    lacking = missing(run.summary, ("faults_applied", "groups"))
    if lacking:
        where = f"{run.directory}/summary.json" if run.directory is not None else "this run's summary"
        raise ExplainError(f"{where}: written by an older rmqsim (no {', '.join(lacking)}): re-run it")
    applied = run.summary["faults_applied"]
    indexes = [a["index"] for a in applied]
    if index not in indexes:
        scripted = len(run.scenario.faults)
        hint = (f"scripted fault {index} was never injected (at or after duration_ms)" if 0 <= index < scripted
                else f"faults injected: {', '.join(map(str, indexes)) or 'none'}")
        raise ExplainError(f"no fault {index} in this run: {hint}")
    f = investigate(run)
    faults, counts, attributed = attribution(f)
    w = next(w for w in faults if w.index == index)
    mine = [v for v, owner in attributed if owner == index]
    return {"fault": {"index": w.index, "kind": w.kind, "target": w.target, "start_us": w.start_us,
                      "end_us": w.end_us, "back_to_normal_us": w.back_us, "restart_us": w.restart_us,
                      "until_us": w.until_us,
                      "recovery_s": None if w.back_us is None else round((w.back_us - w.start_us) / 1e6, 3),
                      "recovery": w.recovery, "why": w.why},
            "effects": _plain(counts[index]),
            "examples": [v.as_json(f.key(v.msg_id)) for v in _distinct(mine)[:DEFAULT_LIMIT]],
            "attribution": {str(k): _plain(c) for k, c in counts.items()},
            "summary": {k: run.summary.get(k) for k in ("lost", "duplicates", "order_violations")}}


def _plain(counts: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"total": sum(c.values()), "by_cause": dict(sorted(c.items()))} for kind, c in counts.items()}


def explain_result(result: Any, msg: str | int) -> dict[str, Any]:
    """`RunResult.explain`: a loaded run's directory, else the run's scenario and seed (and its
    trace, if it streamed one)."""
    if result.directory is not None:
        return explain_message(read_run(result.directory), msg)
    run = RunFiles(None, result.summary, result.world.scenario, result.meta, result.trace_dir)
    return explain_message(run, msg)


# --- text -------------------------------------------------------------------------------------
def render(answer: dict[str, Any]) -> str:
    if "facts" in answer:
        return _render_message(answer)
    if "cause" in answer:
        return _render_cause(answer)
    return _render_fault(answer)


def _render_message(a: dict[str, Any]) -> str:
    lines = [f"{a['key']} (msg_id {a['msg_id']}): producer {a['producer']}, topic {a['topic']}"]
    lines += [f"{seconds(x['t_us']):>12}  {x['text']}" for x in a["facts"]]
    for v in a["verdicts"]:
        label = f"{v['verdict']}: {v['cause']}" if v["cause"] else v["verdict"]
        lines.append(f"verdict ({v['unit']}): {label} — {v['reason']}")
        if v["rule"]:
            lines.append(f"  rule: {v['cause']}: {v['rule']}")
    return "\n".join(lines)


def _render_cause(a: dict[str, Any]) -> str:
    lines = [f"{a['cause']} ({' / '.join(a['kinds'])}): {a['total']} finding(s); rule: {a['rule'] or '-'}"]
    for v in a["messages"]:
        lines.append(f"  {v['key']} (msg_id {v['msg_id']}) [{v['unit']}] {v['reason']}")
    return "\n".join(lines)


def _render_fault(a: dict[str, Any]) -> str:
    w = a["fault"]
    end = seconds(w["end_us"])
    lines = [f"fault {w['index']}: {w['kind']} of {w['target']}, {seconds(w['start_us'])} → {end}"
             + (f" (attributed until {seconds(w['until_us'])})" if w["until_us"] != w["end_us"] else "")]
    orderly = a["summary"]["order_violations"] is not None
    lines += [f"  {kind.replace('_', ' ')}: {c['total'] if orderly or kind != 'order_violations' else 'n/a'}"
              + _by(c) for kind, c in a["effects"].items()]
    r = w["recovery"]
    if w["back_to_normal_us"] is None:
        lines.append("  not back to normal by the end of the run")
    else:
        lines.append(f"  back to normal at {seconds(w['back_to_normal_us'])}, {w['recovery_s']:.3f} s after it began")
    sends = "sends succeed from " + _at(r["sends_succeed_us"]) if r["sends_succeed_us"] is not None else \
        "sends do not succeed again"
    groups = "every group back at " + _at(r["groups_back_us"]) if r["groups_back_us"] is not None else \
        "not every group back"
    lines.append(f"    {sends}; {groups} (the summary's availability section)")
    owned = "every queue that lost its owner had one again at " + _at(r["queues_owned_us"]) \
        if r["queues_owned_us"] is not None else "a queue that lost its owner had none again"
    lines.append(f"    {owned} (a rebalance shorter than the normal wait is not an outage)")
    lines += [f"    why: {line}" for line in w.get("why", [])]
    for v in a["examples"]:
        lines.append(f"  {v['key']} [{v['unit']}] {v['verdict']}: {v['cause']} — {v['reason']}")
    lines.append("whole run (the counts add up to the summary's):")
    for owner, counts in a["attribution"].items():
        name = owner if owner == NO_FAULT else f"fault {owner}"
        lines.append(f"  {name}: " + ", ".join(f"{k.replace('_', ' ')} {c['total']}" for k, c in counts.items()
                                               if orderly or k != "order_violations"))
    s = a["summary"]
    lines.append(f"  summary: lost {s['lost']}, duplicates {s['duplicates']}, order violations "
                 f"{'n/a' if s['order_violations'] is None else s['order_violations']}")
    return "\n".join(lines)


def _by(c: dict[str, Any]) -> str:
    return f" ({', '.join(f'{k} {n}' for k, n in c['by_cause'].items())})" if c["by_cause"] else ""


def _at(t_us: int | None) -> str:
    return "never" if t_us is None else seconds(t_us)

