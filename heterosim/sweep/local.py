"""Run tasks in parallel on this machine with a ``concurrent.futures`` process pool (spawn context).

Each worker process imports heterosim and loads the C++ library once, then runs tasks one after
another; ``on_done`` is called in the driver as each finishes, in completion order.

If a worker process dies (a crash inside the simulator), the pool breaks and every unfinished
task fails with it, so the culprit cannot be told from the bystanders. The remaining tasks are
then run again, each in a pool of its own (still ``workers`` at a time): a task that kills its
own worker is recorded as an error and the rest complete.

Workers ignore Ctrl-C (the driver handles it for the whole sweep: it stops every worker, so a
variant is never recorded as a partial run cut short by the user) and end when the driver ends,
even when it is killed with SIGKILL (Linux: ``PR_SET_PDEATHSIG``), so no worker is left behind.
The driver holds SIGINT and SIGTERM back while it starts worker processes
(:func:`signals_held_while_starting`): a signal that arrives while it writes a new worker's start-up
data is delivered right after, so the worker never reads half of it (it printed an EOFError
traceback). Workers inherit the held mask and release it in their initializer, where a held
signal takes effect. Limitation: a Ctrl-C to the terminal's process group in the second or so
while a worker imports heterosim, before its initializer runs, reaches the worker once the mask
is released; it ignores SIGINT by then, so the sweep stops as described.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, as_completed, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

from heterosim.sweep.task import RunTask, error_record, execute_task

DoneFn = Callable[[RunTask, dict[str, Any]], None]


_PR_SET_PDEATHSIG = 1


_HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def signals_held_while_starting() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while the block starts worker processes; a signal that arrives
    meanwhile is delivered when the block ends (its handler then runs as usual).

    Two layers: the calling thread blocks both signals, so the workers it spawns inherit them
    blocked (their initializer releases them); and in the main thread the Python handlers are
    replaced by ones that only record the signal, because a process-directed signal can be
    delivered to another thread (a native library's worker thread) and would otherwise run the
    Python handler in the middle of writing a new worker's start-up data."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    pending: list[int] = []
    replaced: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for held in _HELD:
            replaced[int(held)] = signal.signal(held, lambda received, _frame: pending.append(received))
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        for signum, handler in replaced.items():
            signal.signal(signum, handler)
        for received in dict.fromkeys(pending):
            signal.raise_signal(received)


def _worker_init() -> None:
    """In each worker: ignore Ctrl-C, receive SIGTERM when the driver process dies, and release
    the signals the driver held while starting it (a held SIGTERM ends the worker here)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the driver's own handler still stops the workers
    if os.getppid() == 1:  # the driver died before prctl took effect
        os._exit(1)


def _pool(workers: int) -> ProcessPoolExecutor:
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_init)


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: cancel queued tasks and end the worker processes mid-run."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():  # stuck in native code that ignores SIGTERM
            process.kill()
            process.join(timeout=5)


def _crash_record(task: RunTask) -> dict[str, Any]:
    return error_record(
        task.id,
        task.label,
        "the worker process died while running this variant (simulator crash or out of memory)",
    )


def _run_shared_pool(tasks: Sequence[RunTask], on_done: DoneFn, workers: int) -> list[RunTask]:
    """Run every task in one pool; return the tasks left unfinished by a broken pool."""
    pool = _pool(min(workers, len(tasks)))
    futures: dict[Future, RunTask] = {}
    unfinished: list[RunTask] = []
    try:
        with signals_held_while_starting():  # the pool starts its workers on the first submit
            futures = {pool.submit(execute_task, task): task for task in tasks}
        for future in as_completed(futures):
            task = futures[future]
            try:
                record = future.result()
            except BrokenProcessPool:
                unfinished.append(task)
                continue
            on_done(task, record)
    except BaseException:
        _terminate(pool)
        raise
    pool.shutdown(wait=True)
    order = {task.id: i for i, task in enumerate(tasks)}
    return sorted(unfinished, key=lambda t: order[t.id])


def _run_isolated(tasks: Sequence[RunTask], on_done: DoneFn, workers: int) -> None:
    """Run each task in a single-process pool of its own, ``workers`` at a time."""
    queue = list(tasks)
    running: dict[Future, tuple[RunTask, ProcessPoolExecutor]] = {}
    try:
        while queue or running:
            while queue and len(running) < workers:
                task = queue.pop(0)
                pool = _pool(1)
                with signals_held_while_starting():
                    running[pool.submit(execute_task, task)] = (task, pool)
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in done:
                task, pool = running.pop(future)
                try:
                    record = future.result()
                except BrokenProcessPool:
                    record = _crash_record(task)
                pool.shutdown(wait=True)
                on_done(task, record)
    except BaseException:
        for _, pool in running.values():
            _terminate(pool)
        raise


def run_local(tasks: Sequence[RunTask], on_done: DoneFn, workers: int | None = None) -> None:
    """Run ``tasks`` on a local process pool, calling ``on_done(task, record)`` as each finishes."""
    if not tasks:
        return
    workers = max(1, workers or default_workers())
    unfinished = _run_shared_pool(tasks, on_done, workers)
    if unfinished:
        _run_isolated(unfinished, on_done, workers)
