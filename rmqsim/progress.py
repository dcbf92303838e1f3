"""The progress line of a long single run (`rmqsim run`, on a terminal only).

`ProgressLine(stream)` is a `run_scenario(progress=...)` callback. At most once per
`INTERVAL_S` of wall time it rewrites one line on `stream` (carriage return, no newline):
simulated time and share of the run, events per wall second, the ETA, and the fields of
RocketMQ's benchmark Producer (example/.../benchmark/Producer.java: "Send TPS", "Max RT(ms)",
"Average RT(ms)", "Send Failed"), from what the checkers have counted as records stream in (they
reach the checkers in chunks, so these lag by up to one chunk):

- send TPS: SEND_OK per simulated second since the start;
- Max RT: the longest send RT (send() call → its result, simulated ms) of any send that returned a
  result so far, like the benchmark Producer's `sendMessageMaxRT` (not reset between lines);
- Average RT: the mean RT of the sends whose results arrived since the previous line (the
  benchmark averages over its last 10 s of snapshots; here the window is one line's, about
  `INTERVAL_S` of wall time); `-` when none arrived;
- send failed: sends that ended without a result.

RT counts every send (the warm-up too: this is a live view, not the summary's `send_latency_ms`).
It prints nothing unless `stream` is a terminal, so pipes, files and CI logs stay clean;
`close()` ends the line. Wall time is read by the runner, never here.
"""

from __future__ import annotations

from typing import Any, TextIO

INTERVAL_S = 1.0


class ProgressLine:
    def __init__(self, stream: TextIO, force: bool = False) -> None:
        self.stream = stream
        self.enabled = force or bool(getattr(stream, "isatty", lambda: False)())
        self.last_wall_s = -INTERVAL_S
        self.shown = False
        self.rt_seen = (0, 0)  # (send_rt_count, send_rt_sum_us) at the previous line: Average RT's window

    def __call__(self, p: dict[str, Any]) -> None:
        if not self.enabled or p["wall_s"] - self.last_wall_s < INTERVAL_S:
            return
        self.last_wall_s = p["wall_s"]
        line = format_line(p, since=self.rt_seen)
        self.rt_seen = (p.get("send_rt_count", 0), p.get("send_rt_sum_us", 0))
        self.stream.write("\r" + line + "\033[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def format_line(p: dict[str, Any], since: tuple[int, int] = (0, 0)) -> str:
    """`sim 12.0/80.0 s (15%) · 12,345 sent, send TPS 2,000, Max RT 41.2 ms, Average RT 2.35 ms, send
    failed 0 · 310,000 events/s · ETA 0:41`; `since`: (send_rt_count, send_rt_sum_us) at the start
    of the Average RT window."""
    sim_s, end_s, wall_s = p["sim_us"] / 1e6, p["end_us"] / 1e6, p["wall_s"]
    share = sim_s / end_s if end_s else 1.0
    rate = p["events"] / wall_s if wall_s > 0 else 0.0
    eta = wall_s * (1 - share) / share if share > 0 else None
    tps = p.get("sent_ok", 0) / sim_s if sim_s > 0 else 0.0
    eta_text = "?" if eta is None else f"{int(eta // 60)}:{int(eta % 60):02d}"
    return (f"sim {sim_s:,.1f}/{end_s:,.1f} s ({share:.0%}) · {p.get('sent_ok', 0):,} sent, send TPS {tps:,.0f}, "
            f"{_rt_fields(p, since)}, send failed {p.get('send_failed', 0):,} · {rate:,.0f} events/s · ETA {eta_text}")


def _rt_fields(p: dict[str, Any], since: tuple[int, int]) -> str:
    count, sum_us = p.get("send_rt_count", 0), p.get("send_rt_sum_us", 0)
    max_text = f"{p['send_rt_max_us'] / 1000:,.1f} ms" if count else "-"
    window = count - since[0]
    avg_text = f"{(sum_us - since[1]) / window / 1000:,.2f} ms" if window > 0 else "-"
    return f"Max RT {max_text}, Average RT {avg_text}"
