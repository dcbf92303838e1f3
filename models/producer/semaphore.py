"""java.util.concurrent.Semaphore (fair), as the producer's send paths use it.

`try_acquire(permits, timeout_us, on_done, *args)` is `tryAcquire(permits, timeout, MILLISECONDS)`
of a fair semaphore: granted at once when nobody waits and enough permits are free; otherwise
the caller queues (FIFO: a waiter at the head blocks later ones even if they would fit) until
enough permits are released, or gives up after `timeout_us` (at once if it is 0 or less).
Returns True or False when the outcome is known at once, else None and calls
`on_done(*args, granted)` later. Used for DefaultMQProducerImpl's async back-pressure
(`semaphoreAsyncSendNum` / `semaphoreAsyncSendSize`) and NettyRemotingAbstract's
`semaphoreAsync` (clientAsyncSemaphoreValue). A waiting caller here does not hold a thread:
the threads that would block in Java are not modelled.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any


class _Waiter:
    __slots__ = ("permits", "on_done", "args", "timer", "done")

    def __init__(self, permits: int, on_done: Callable[..., None], args: tuple) -> None:
        self.permits, self.on_done, self.args = permits, on_done, args
        self.timer: Any = None
        self.done = False


class Semaphore:
    def __init__(self, node: Any, permits: int) -> None:
        self.node = node
        self.initial = permits
        self.available = permits
        self.waiters: deque[_Waiter] = deque()
        node.on_crash(self.reset)

    def reset(self) -> None:
        """The process died: the semaphore is new again."""
        self.available = self.initial
        self.waiters.clear()

    def try_acquire(self, permits: int, timeout_us: int, on_done: Callable[..., None], *args: Any) -> bool | None:
        if not self.waiters and self.available >= permits:
            self.available -= permits
            return True
        if timeout_us <= 0:
            return False
        waiter = _Waiter(permits, on_done, args)
        waiter.timer = self.node.timer(timeout_us, self._expire, waiter)
        self.waiters.append(waiter)
        return None

    def release(self, permits: int) -> None:
        self.available += permits
        waiters = self.waiters
        while waiters and (waiters[0].done or waiters[0].permits <= self.available):
            waiter = waiters.popleft()
            if waiter.done:
                continue
            waiter.done = True
            waiter.timer.cancel()
            self.available -= waiter.permits
            waiter.on_done(*waiter.args, True)

    def _expire(self, waiter: _Waiter) -> None:
        if waiter.done:
            return
        waiter.done = True
        waiter.on_done(*waiter.args, False)
        while self.waiters and self.waiters[0].done:  # a timed-out head no longer blocks the others
            self.waiters.popleft()
        self.release(0)
