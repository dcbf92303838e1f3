"""A sweep's runs on this machine without Spark: a pool of Python worker processes, no JVM.

A local master (`local`, `local[N]`, `local[*]`, or none given) runs the sweep here
(analysis/sweeps/sweep.py `uses_spark`): N worker processes (local[*]: the processors this process
may use), each started once with `python -P -c` on the driver's own sources (PYTHONPATH: the
folder the driver imported `analysis` from) and PYTHONHASHSEED=0, as Spark's local workers get
them; each imports the simulator once and then runs one task after another, so a run pays only
its own time (a Spark task pays its scheduling, serialisation and Python worker hand-off, and
the sweep the JVM's start). A worker runs exactly what a Spark task runs,
`analysis.sweeps.task.execute(task, attempt)`: the same rows, files, markers and repro cards,
written the same way, so the directory and its results table are the same whichever ran it.

Retries follow Spark's `local[N,F]` (F = sweep_dir.TASK_MAX_FAILURES): a worker that dies (killed,
out of memory) is replaced and its run tried again with the next attempt number, as is a task
whose `execute` raised; after F failed attempts of one run the sweep stops with `SweepAborted`
(the complete runs stay). A run whose worker keeps dying becomes a failed run on its third
attempt (analysis/sweeps/task.py, `RUN_ATTEMPTS`). A task reporting a full disk stops the sweep:
the workers are killed and the caller raises OutputError. Workers die with the driver (Linux:
PR_SET_PDEATHSIG; elsewhere at their next read of a task), ignore SIGINT (the driver handles
Ctrl-C, kills them and says how to resume), and print on the driver's stderr.

Wire: length-prefixed pickles; driver → worker on the worker's stdin `(task, attempt)`;
worker → driver on the worker's original stdout `("ok", result)` or `("error", text)`.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from analysis.sweeps import directory as sweep_dir

_HEADER = struct.Struct("!I")  # a frame's length in bytes
POLL_S = 1.0  # the driver wakes at least this often (the progress line)
_BOOT = "from analysis.sweeps.local_pool import worker_main; worker_main()"
_PR_SET_PDEATHSIG = 1
DRIVER_ENV = "RMQSIM_POOL_DRIVER"  # the driver's pid, as its workers are told


class PoolAborted(Exception):
    """A run failed TASK_MAX_FAILURES times (its worker died, or `execute` raised): the message
    says which and why, as Spark's job abort would."""


@dataclass
class PoolProgress:
    """What the driver's progress line reads: runs done, failed, and whether the disk filled."""

    done: int = 0
    failed: int = 0
    no_space: bool = False


def parallelism_of(master: str | None, parallelism: int | None) -> int:
    """Workers for a local master: `parallelism` if given, else local[N]'s N, local[*]'s (and no
    master's) processors this process may use, plain `local`'s one."""
    if parallelism:
        return parallelism
    text = (master or "local[*]").replace(" ", "")
    if text == "local":
        return 1
    inner = text[len("local["):-1].split(",")[0] if text.startswith("local[") else "*"
    return _processors() if inner == "*" else max(1, int(inner))


def _processors() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def run_tasks(pending: list[dict[str, Any]], workers: int, progress: PoolProgress,
              on_poll: Callable[[], None], no_space_status: str) -> list[dict[str, Any]]:
    """Run every task in `pending` on `workers` processes; returns their results in task order
    (module docstring). `on_poll` is called after each result and at least every POLL_S."""
    pool = _Pool(min(workers, len(pending)))
    queue: deque[tuple[int, int]] = deque((i, 0) for i in range(len(pending)))  # (task index, attempt)
    results: dict[int, dict[str, Any]] = {}
    try:
        while len(results) < len(pending) and not progress.no_space:
            pool.assign(queue, pending)
            for worker, message in pool.wait(POLL_S):
                if worker.busy is None:  # wait() answers busy workers only
                    continue
                index, attempt = worker.busy
                worker.busy = None
                if message is None or message[0] == "error":
                    why = "its Python worker died (killed, or out of memory?)" if message is None else message[1]
                    if message is None:
                        pool.replace(worker)
                    if attempt + 1 >= sweep_dir.TASK_MAX_FAILURES:
                        raise PoolAborted(f"Job aborted: run {pending[index]['run_id']} failed "
                                          f"{attempt + 1} times; the last: {_first_line(why)}")
                    queue.appendleft((index, attempt + 1))
                    continue
                result = message[1]
                results[index] = result
                progress.done += 1
                if result["status"] == no_space_status:
                    progress.no_space = True
                elif result["status"] != "ok":
                    progress.failed += 1
            on_poll()
        if not progress.no_space:
            pool.close()
    finally:
        pool.kill()
    return [results[i] for i in sorted(results)]


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "no reason given")[:400]


@dataclass
class _Worker:
    proc: subprocess.Popen
    stdin: IO[bytes]  # the process's pipes (never None: both are PIPE)
    stdout: IO[bytes]
    busy: tuple[int, int] | None = None  # (task index, attempt) it runs
    buffer: bytearray = field(default_factory=bytearray)


class _Pool:
    """The worker processes and their pipes."""

    def __init__(self, size: int) -> None:
        self.env = _worker_env()
        self.workers = [self._start() for _ in range(size)]

    def _start(self) -> _Worker:
        proc = subprocess.Popen([sys.executable, "-P", "-c", _BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=self.env, close_fds=True)
        if proc.stdin is None or proc.stdout is None:  # both asked as PIPE: Popen always makes them
            raise OSError("a worker process started without its pipes")
        return _Worker(proc, proc.stdin, proc.stdout)

    def replace(self, worker: _Worker) -> None:
        _reap(worker.proc)
        self.workers[self.workers.index(worker)] = self._start()

    def assign(self, queue: deque[tuple[int, int]], tasks: list[dict[str, Any]]) -> None:
        for worker in self.workers:
            if worker.busy is None and queue:
                index, attempt = queue.popleft()
                worker.busy = (index, attempt)
                try:
                    _send(worker.stdin, (tasks[index], attempt))
                except OSError:  # died between tasks: `wait` sees its end of file
                    pass

    def wait(self, timeout_s: float) -> list[tuple[_Worker, Any]]:
        """(worker, message) for each busy worker that answered or died (message None) within `timeout_s`."""
        busy = {w.stdout.fileno(): w for w in self.workers if w.busy is not None}
        if not busy:
            return []
        ready, _, _ = select.select(list(busy), [], [], timeout_s)
        return [(busy[fd], _receive(busy[fd])) for fd in ready]

    def close(self) -> None:
        """Every task done: workers told to exit, and waited for."""
        for worker in self.workers:
            try:
                worker.stdin.close()
            except OSError:
                pass
        for worker in self.workers:
            try:
                worker.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass

    def kill(self) -> None:
        """Any worker still alive is killed, and reaped (an error, Ctrl-C, a full disk)."""
        for worker in self.workers:
            if worker.proc.poll() is None:
                worker.proc.kill()
            _reap(worker.proc)


def _receive(worker: _Worker) -> Any:
    """The next whole message of `worker` (reading until it is whole), None at its end of file."""
    chunk = os.read(worker.stdout.fileno(), 1 << 20)
    if not chunk:
        return None
    worker.buffer += chunk
    while True:
        if len(worker.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(worker.buffer)
            if len(worker.buffer) >= _HEADER.size + size:
                payload = bytes(worker.buffer[_HEADER.size:_HEADER.size + size])
                del worker.buffer[:_HEADER.size + size]
                return pickle.loads(payload)  # noqa: S301 - our own worker's frame
        more = os.read(worker.stdout.fileno(), 1 << 20)  # the rest of a frame being written
        if not more:
            return None
        worker.buffer += more


def _reap(proc: subprocess.Popen) -> None:
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _worker_env() -> dict[str, str]:
    """The driver's environment, its own sources first on the path, and Spark's hash seed."""
    import analysis

    root = str(Path(analysis.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONHASHSEED": "0", DRIVER_ENV: str(os.getpid()),
            "PYTHONPATH": root if not path else os.pathsep.join([root, path])}


def _send(stream: IO[bytes], message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def _read_exact(stream: IO[bytes], size: int) -> bytes | None:
    data = stream.read(size)
    return data if data is not None and len(data) == size else None


# ---------------------------------------------------------------- the worker process

def worker_main() -> None:
    """A worker: tasks from stdin until its end of file, each result a frame on the original stdout
    (stdout itself then goes to stderr, so nothing a run prints can break a frame)."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    tasks = sys.stdin.buffer
    from analysis.sweeps.task import execute

    while True:
        header = _read_exact(tasks, _HEADER.size)
        if header is None:
            return
        payload = _read_exact(tasks, _HEADER.unpack(header)[0])
        if payload is None:
            return
        task, attempt = pickle.loads(payload)  # noqa: S301 - our own driver's frame
        try:
            message: tuple[str, Any] = ("ok", execute(task, attempt=attempt))
        except Exception as exc:  # noqa: BLE001 - the driver retries it, as Spark retries a failed task
            message = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}")
        _send(channel, message)


def _die_with_parent() -> None:
    """SIGKILL this process when the driver dies (Linux), so that no orphan writes into a directory
    a resumed sweep is writing; elsewhere it ends at its next read of a task."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if str(os.getppid()) != os.environ.get(DRIVER_ENV):  # the driver died before the call
        os._exit(1)
