"""The run's watchdog: bounds that fire even when the simulation never comes back to check them.

rmqsim/runner.py checks `max_events` and `max_wall_s` between slices of simulated time. That check
never runs while one model step loops without yielding (no event ends), while events keep
coming at one simulated instant (the slice never reaches its end time), or while set-up builds
a world too large to finish. The watchdog is a thread, started before set-up, that samples every
`SAMPLE_S` of wall time:

- wall time since the run started, against `max_wall_s`;
- the process's resident memory (`/proc/self/statm`), against `max_rss_mb` (`default_max_rss_mb`:
  half the memory of the machine or of its cgroup, whichever is smaller);
- once the simulation runs (`watch`): the clock (`env.clock.now_us`) and the events processed
  (`env.processed()`). One step that processes no event for `max_step_wall_s` is a livelock (a
  loop that never yields). More than `max_events` with the clock stopped is the event bound the
  slice loop cannot reach;
- after the run, while its summary is built (`watch_analysis`): resident memory only, so that
  the analysis runs under the run's memory bound too.

The other livelock, more than `limits.max_events_per_instant` events at one simulated instant,
is not sampled: a sample every 0.1 s cannot count the events of one instant. The run loop counts
them exactly and raises `InstantLivelock` instead of processing the one beyond the bound
(sim/env.py); `stop()` turns it into the same `livelock` stop.

On a breach it raises `RunInterrupted` in the simulation thread (`PyThreadState_SetAsyncExc`:
delivered at the next bytecode that thread runs, so even inside `while True: pass`); rmqsim/runner.py
catches it, asks `stop()` why, and writes the summary of what ran, `stopped_by` the bound. The
exception derives from BaseException, so that no `except Exception` of model code swallows it;
SimPy turns it into a failed process and re-raises it from the run loop, where the runner catches
it. If it was swallowed all the same (raised inside a `__del__`), it is raised again every
`REFIRE_S` until the runner acknowledges it. `stop()` disarms the watchdog and clears an
exception still pending, and `close()` joins the thread: no exception is raised after the run
returned, and no thread outlives it (sweeps run many runs in one Python worker).

What it costs the simulation: nothing per event (it reads the clock and the event counter that the
loop keeps anyway, sim/env.py); one GIL hand-over per sample. A model step that runs compiled code
only (sim/compiled.py) without calling any Python function cannot be interrupted until it does.

Determinism: the watchdog only ever stops a run; a run it does not stop is the same run, event
for event. Where it stops a run depends on wall time, as `max_wall_s` always did. The
simulation's own code has no threads and no wall clock (house style); the runner hands the
watchdog its clock (`time.perf_counter`).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from sim.env import InstantLivelock

SAMPLE_S = 0.1  # wall seconds between samples
REFIRE_S = 1.0  # an interruption not acknowledged by then is raised again
JOIN_S = 5.0  # close() waits at most this long for the thread (it is a daemon either way)
RSS_SHARE = 0.5  # default max_rss_mb: this share of the machine's (or cgroup's) memory
MB = 1 << 20
ROOT = Path(__file__).resolve().parents[1]
# frames of the loop machinery itself: a looping owner is named by the frame below them
_LOOP_FILES = frozenset(("sim/env.py", "sim/event_queue.py", "rmqsim/runner.py", "sim/watchdog.py"))


class RunInterrupted(BaseException):
    """Raised in the simulation thread by the watchdog; `Watchdog.stop()` says why. A
    BaseException (as KeyboardInterrupt) so that model code's `except Exception` lets it pass."""


@dataclass(frozen=True)
class Stop:
    """Why a run stopped early: the bound (`stopped_by`), one sentence, and for a livelock the
    code that looped (`file:function (node)`). `at_instant`: a livelock of many events at one
    instant (named by the entries due then), not one step that never yields (named by its frame)."""

    bound: str
    detail: str
    owner: str | None = None
    at_instant: bool = False


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    """Raise `exc` in thread `thread_id` at its next bytecode (None: clear a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exc) if exc is not None else None)


def rss_mb() -> float | None:
    """This process's resident memory in MB (Linux: /proc/self/statm), None where unknown."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB
    except (OSError, ValueError, IndexError):
        return None


def machine_memory_mb() -> float | None:
    """Physical memory, or the cgroup's memory limit where that is smaller (a container)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            total = min(total, int(Path(path).read_text().strip()))  # "max" (no limit) is not a number
        except (OSError, ValueError):
            continue
    return total / MB


def default_max_rss_mb() -> float | None:
    """`limits.max_rss_mb` when the scenario leaves it null: `RSS_SHARE` of `machine_memory_mb()`."""
    total = machine_memory_mb()
    return None if total is None else round(total * RSS_SHARE)


class Watchdog:
    """Samples the run's bounds from a thread and interrupts the simulation thread on a breach
    (module docstring). `clock()` is wall time in seconds; `started` its value at the run's start.
    A bound left None is not watched. Use as a context manager, or `start()` ... `close()`."""

    def __init__(self, clock: Callable[[], float], started: float, *, max_wall_s: float | None = None,
                 max_rss_mb: float | None = None, max_events: int | None = None,
                 max_step_wall_s: float | None = None, sample_s: float = SAMPLE_S) -> None:
        self.clock, self.started, self.sample_s = clock, started, sample_s
        self.max_wall_s, self.max_rss_mb, self.max_events = max_wall_s, max_rss_mb, max_events
        self.max_step_wall_s = max_step_wall_s
        self.breach: Stop | None = None  # the first breach found; set before it is raised
        self._target = threading.get_ident()  # the simulation thread: the one that creates the watchdog
        self._lock = threading.Lock()
        self._armed = True
        self._fired_at: float | None = None
        self._done = threading.Event()
        self._env: Any = None
        self._thread = threading.Thread(target=self._loop, name="rmqsim-watchdog", daemon=True)

    def __enter__(self) -> Watchdog:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def watch(self, env: Any, first_events: int) -> None:
        """From now on also watch the simulation: events since `first_events`, and the clock."""
        now = self.clock()
        self._first, self._instant = first_events, env.clock.now_us
        self._last_events, self._last_change = first_events, now
        self._env = env

    def watch_analysis(self, max_rss_mb: float | None) -> None:
        """After the run, while its summary is built: watch resident memory only, against
        `max_rss_mb` (None: nothing), re-armed with no breach of the run's left to raise. The
        wall-time and event bounds are the run's, judged when it ended; the analysis is bounded by
        memory (a summary that would exceed it stops with `max_rss_mb`, rmqsim/runner.py). `stop()`
        ends it as it ends the run."""
        with self._lock:
            self._env, self.max_wall_s, self.max_rss_mb = None, None, max_rss_mb
            self.breach, self._fired_at, self._armed = None, None, True

    def stop(self, exc: BaseException | None = None, env: Any = None) -> Stop | None:
        """Disarm (no interruption after this returns, none left pending) and say why the run
        stopped: the breach, if `exc` is the watchdog's interruption, or the livelock the run loop
        raised (`InstantLivelock`); for a livelock, with the code that looped: the entries due at
        `env`'s instant, or the frame `exc` was raised in. None otherwise. Call it from the
        simulation thread."""
        with self._lock:
            self._armed = False
            _set_async_exc(self._target, None)
        if isinstance(exc, InstantLivelock):
            breach: Stop | None = instant_livelock(exc)
        elif isinstance(exc, RunInterrupted):
            breach = self.breach
        else:
            return None
        if breach is None or breach.bound != "livelock":
            return breach
        due = owners_due_now(env) if breach.at_instant and env is not None else []
        owner = due[0] if due else raising_owner(exc)
        looping = ", ".join(due) if due else owner
        return replace(breach, owner=owner, detail=breach.detail + (f"; looping: {looping}" if looping else ""))

    def close(self) -> None:
        """Disarm and end the thread (idempotent)."""
        self.stop()
        self._done.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(JOIN_S)

    # --- the thread ---------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._done.wait(self.sample_s):
            with self._lock:  # a sample taken under bounds that `watch_analysis` then changed is not fired
                breach = self.breach or self._check()
                if breach is not None:
                    self._fire(breach)

    def _fire(self, breach: Stop) -> None:
        """Raise the interruption (the lock held): once, again after `REFIRE_S` if unacknowledged."""
        now = self.clock()
        if not self._armed or (self._fired_at is not None and now - self._fired_at < REFIRE_S):
            return
        self.breach, self._fired_at = self.breach or breach, now
        _set_async_exc(self._target, RunInterrupted)

    def _check(self) -> Stop | None:
        now = self.clock()
        elapsed = now - self.started
        if self.max_wall_s is not None and elapsed > self.max_wall_s:
            return Stop("max_wall_s", f"{elapsed:.1f} s of wall time, above max_wall_s ({self.max_wall_s:g} s)")
        if self.max_rss_mb is not None:
            rss = rss_mb()
            if rss is not None and rss > self.max_rss_mb:
                return Stop("max_rss_mb", f"resident memory {rss:,.0f} MB, above limits.max_rss_mb "
                                          f"({self.max_rss_mb:,.0f} MB)")
        return self._check_simulation(now) if self._env is not None else None

    def _check_simulation(self, now: float) -> Stop | None:
        env = self._env
        instant, events = env.clock.now_us, env.processed()
        at = f"simulated {instant / 1e6:.6f} s"
        if instant != self._instant:
            self._instant = instant
        elif self.max_events is not None and events - self._first > self.max_events:
            return Stop("max_events", f"{events - self._first:,} events, above max_events ({self.max_events:,}), "
                                      f"the clock stopped at {at}")
        if events != self._last_events:
            self._last_events, self._last_change = events, now
        elif self.max_step_wall_s is not None and now - self._last_change > self.max_step_wall_s:
            return Stop("livelock", f"one step ran {now - self._last_change:.1f} s of wall time at {at} without "
                                    f"yielding (limits.max_step_wall_s: {self.max_step_wall_s:g} s)")
        return None


def instant_livelock(exc: InstantLivelock) -> Stop:
    """The stop of a run whose loop found more than `limits.max_events_per_instant` events at one
    instant (sim/env.py): the instant, and the event it stopped at, unprocessed."""
    return Stop("livelock", f"more than limits.max_events_per_instant ({exc.limit:,}) events at simulated "
                            f"{exc.instant_us / 1e6:.6f} s without the clock moving: stopped at event {exc.events:,} "
                            "of that instant, not processed", at_instant=True)


# --- naming the code that looped ------------------------------------------------------------------

def _source(filename: str) -> str | None:
    """`filename` relative to the source tree (else as it is); None for the loop's own files and
    for the libraries' (the standard library, SimPy: the code that loops is the code calling them)."""
    if filename.startswith("<"):  # <stdin>, <frozen ...>, <string>
        return None
    path = Path(filename)
    try:
        full = path.resolve() if path.is_absolute() else (ROOT / path).resolve()
    except OSError:
        return None
    if full.is_relative_to(ROOT):
        text = full.relative_to(ROOT).as_posix()
        return None if text in _LOOP_FILES or text.startswith((".venv/", "build/")) else text
    libraries = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return None if any(full.is_relative_to(p) for p in libraries) else str(full)


def _node_of(obj: Any) -> str | None:
    """The node an object belongs to: its `node.name`, `host.name` or `name`."""
    for inner in (getattr(obj, "node", None), getattr(obj, "host", None), obj):
        name = getattr(inner, "name", None)
        if isinstance(name, str):
            return name
    return None


def _describe(where: str, name: str, owner: Any) -> str:
    node = _node_of(owner) if owner is not None else None
    return f"{where}:{name}" + (f" ({node})" if node else "")


def _frame_owner(frame: FrameType) -> str | None:
    where = _source(frame.f_code.co_filename)
    if where is None:
        return None
    return _describe(where, frame.f_code.co_name, frame.f_locals.get("self"))


def raising_owner(exc: BaseException) -> str | None:
    """The innermost frame of this source tree (outside the loop machinery) that `exc` passed
    through, as `file:function (node)`; SimPy re-raises a failed process's exception from the run
    loop with the original as `__cause__`, so the original is looked at first."""
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    for e in reversed(chain):
        tb: TracebackType | None = e.__traceback__
        frames = []
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        for frame in reversed(frames):
            owner = _frame_owner(frame)
            if owner is not None:
                return owner
    return None


def _entry_owner(entry: tuple) -> str | None:
    """A heap entry `(time, priority, eid, owner, epoch, fn, args)` (sim/env.py) as `file:function
    (node)`; a SimPy event is named by the process it resumes."""
    from sim.env import _fire_simpy

    fn, args = entry[5], entry[6]
    if fn is _fire_simpy:
        for callback in args[0].callbacks or ():
            gen = getattr(getattr(callback, "__self__", None), "_generator", None)
            if gen is not None and (where := _source(gen.gi_code.co_filename)) is not None:
                return _describe(where, gen.gi_code.co_name, (gen.gi_frame.f_locals if gen.gi_frame else {}).get("self"))
        return None
    timer: Any = getattr(fn, "__self__", None)
    if callable(getattr(timer, "fn", None)) and getattr(timer, "host", None) is not None:  # a host's timer (OwnedCall)
        fn, entry = timer.fn, (*entry[:3], timer.host, *entry[4:])
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    where = _source(code.co_filename) if code is not None else \
        _source(str(getattr(fn, "__module__", "")).replace(".", "/") + ".py")  # a compiled function
    if where is None:
        return None
    name = code.co_name if code is not None else getattr(fn, "__name__", "?")
    return _describe(where, name, getattr(fn, "__self__", None) or entry[3])


def owners_due_now(env: Any, most: int = 3) -> list[str]:
    """The code of the entries due at the current instant, most frequent first (heap order
    between equals): what keeps the clock from moving in a livelock."""
    counts: dict[str, int] = {}
    now = env.clock.now_us
    for entry in sorted(e for e in env._queue if e[0] == now):
        owner = _entry_owner(entry)
        if owner is not None:
            counts[owner] = counts.get(owner, 0) + 1
    return sorted(counts, key=lambda o: -counts[o])[:most]
