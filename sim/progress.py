"""The progress line of a long single run (`rmqsim run`, on a terminal only).

`ProgressLine(stream)` is a `run_scenario(progress=...)` callback. At most once per
`INTERVAL_S` of wall time it rewrites one line on `stream` (carriage return, no newline):
simulated time and share of the run, events per wall second, the ETA, and the RocketMQ
benchmark tool's fields that the checkers count as records stream in — send TPS (SEND_OK per
simulated second) and send failed (records reach the checkers in chunks, so these lag by up
to one chunk). Max and average send RT are not in it yet: no per-send latency is aggregated
while the run goes (issue 10's send latency metric is the place). It prints nothing unless `stream` is a terminal, so pipes,
files and CI logs stay clean; `close()` ends the line. Wall time is read by the runner, never
here.
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

    def __call__(self, p: dict[str, Any]) -> None:
        if not self.enabled or p["wall_s"] - self.last_wall_s < INTERVAL_S:
            return
        self.last_wall_s = p["wall_s"]
        self.stream.write("\r" + format_line(p) + "\033[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def format_line(p: dict[str, Any]) -> str:
    """`sim 12.0/80.0 s (15%) · 12,345 sent, send TPS 2,000, send failed 0 · 310,000 events/s · ETA 0:41`."""
    sim_s, end_s, wall_s = p["sim_us"] / 1e6, p["end_us"] / 1e6, p["wall_s"]
    share = sim_s / end_s if end_s else 1.0
    rate = p["events"] / wall_s if wall_s > 0 else 0.0
    eta = wall_s * (1 - share) / share if share > 0 else None
    tps = p.get("sent_ok", 0) / sim_s if sim_s > 0 else 0.0
    eta_text = "?" if eta is None else f"{int(eta // 60)}:{int(eta % 60):02d}"
    return (f"sim {sim_s:,.1f}/{end_s:,.1f} s ({share:.0%}) · {p.get('sent_ok', 0):,} sent, send TPS {tps:,.0f}, "
            f"send failed {p.get('send_failed', 0):,} · {rate:,.0f} events/s · ETA {eta_text}")
