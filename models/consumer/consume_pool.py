"""A consume service's thread pool (consumeExecutor) and its shutdown (ThreadUtils.shutdownGracefully,
5.3.3), shared by ConsumeMessageConcurrentlyService and ConsumeMessageOrderlyService.

`busy` threads of `consumeThreadMax` run listener calls; requests wait in the FIFO `queue`. A
service keeps its calls in progress where it likes (`running`: token → the call, unless it
overrides `_take_running` and `_calls_left`). A process crash empties it all.

The pool stops taking requests (queued ones never run: shutdownNow), waits up to
awaitTerminationMillisWhenShutdown for the running listener calls, then interrupts the rest: an
interrupted call is modelled as a listener that fails at once (`_interrupted`, per service); a
listener that ignores interrupts is not modelled. When no call is left, `_terminated(then)` runs
(the service's own last step, then the consumer's continuation).
"""

# compiled with Cython: the C declarations of this module's classes are in consume_pool.pxd beside it

from __future__ import annotations

import itertools
from collections import deque
from typing import Any


class ConsumePool:
    """Mixin of a consume service with a `node` attribute; `init_pool()` in its constructor. (No
    class-level annotation of `node`: a compiled build makes this class an extension type,
    sim/compiled.py.)"""

    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("_await_timer", "_tokens", "busy", "queue", "running", "stopped", "stopping")

    def init_pool(self) -> None:
        self.busy = 0
        self.queue: deque = deque()
        self.running: dict[int, tuple] = {}  # listener calls in progress: token → the call
        self._tokens = itertools.count(1)
        self.stopping: Any = None  # shutdown's continuation while it awaits the running calls
        self.stopped = False  # shut down (the service's `stopped` flag); a relaunch clears it
        self._await_timer: Any = None
        self.node.on_crash(self._reset)  # type: ignore[attr-defined]  # the service's `node` (class docstring)

    def _reset(self) -> None:
        self.busy = 0
        self.queue.clear()
        self.running.clear()
        self.stopping = None
        self.stopped = False

    def shutdown(self, await_us: int, then: Any) -> None:
        self.stopped = True
        self.queue.clear()
        self.stopping = then
        if not self._calls_left():
            self._drained()
        elif await_us > 0:
            self._await_timer = self.node.timer(await_us, self._interrupt)  # type: ignore[attr-defined]  # as above
        else:
            self._interrupt()

    def _interrupt(self) -> None:
        self._await_timer = None
        for call in self._take_running():
            self._interrupted(call)
        self._drained()

    def _calls_left(self) -> bool:
        """Whether a listener call is still running."""
        return bool(self.running)

    def _take_running(self) -> list[tuple]:
        """The calls in progress, in start order, forgotten here: each is interrupted next."""
        running, self.running = self.running, {}
        return list(running.values())

    def _drained(self) -> None:
        then, self.stopping = self.stopping, None
        if self._await_timer is not None:
            self._await_timer.cancel()
            self._await_timer = None
        if then is not None:
            self._terminated(then)

    def _interrupted(self, call: tuple) -> None:  # pragma: no cover - each service defines it
        """Process one interrupted call's result (and release its thread: `busy`)."""
        raise NotImplementedError

    def _terminated(self, then: Any) -> None:
        then()
