"""Run tasks on a Ray cluster (``--executor ray``): one ``ray.remote`` task per variant.

Ray is an optional extra (``pip install -e '.[ray]'``) and is imported only here, only when asked
for. Ray does the scheduling: every task is submitted at once with ``num_cpus=1`` and Ray places
them on the cluster's CPUs; results are collected with ``ray.wait`` as they finish. Tasks carry
the experiment with its cluster inlined, so workers need the heterosim package (same version) but
not the driver's files. A task whose worker dies is retried once by Ray, then recorded as an error.

``ray.init`` replaces the driver's SIGTERM handling (a Python handler that exits with status 15
and a native crash handler that aborts with a stack dump); the handler in place before it is put
back, so SIGTERM stops a Ray sweep like a local one (exit 143, ``--resume`` continues). A Ray
instance started here is shut down before returning, which ends its worker processes.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from typing import Any

from heterosim.errors import UserError
from heterosim.sweep.local import DoneFn
from heterosim.sweep.task import RunTask, error_record, execute_task, one_line

INSTALL_HINT = "python3 -m pip install -e '.[ray]'"


def import_ray() -> Any:
    """The ``ray`` module, or a UserError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError(
            f"--executor ray: the ray package is not installed; install the extra with "
            f"{INSTALL_HINT} (or use --executor local)"
        ) from None
    return ray


def run_ray(tasks: Sequence[RunTask], on_done: DoneFn, address: str | None = None) -> None:
    """Run ``tasks`` on Ray (``address`` HOST:PORT of a running head, or None for a local Ray)."""
    ray = import_ray()
    if not tasks:
        return
    started = False
    if not ray.is_initialized():
        _init_keeping_sigterm(ray, address)
        started = True
    try:
        _run_on_ray(ray, tasks, on_done)
    finally:
        if started:
            ray.shutdown()


def _init_keeping_sigterm(ray: Any, address: str | None) -> None:
    """``ray.init``, then the SIGTERM handler that was in place before it (see the module doc)."""
    previous = signal.getsignal(signal.SIGTERM)
    try:
        ray.init(
            address=address or None, ignore_reinit_error=True, logging_level="WARNING", log_to_driver=False
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = address or "a local Ray instance"
        raise UserError(f"--address {where}: cannot connect to Ray: {one_line(exc)}") from None
    finally:
        if previous is not None:  # None: set outside Python, cannot be put back
            try:
                signal.signal(signal.SIGTERM, previous)
            except ValueError:  # not the main thread: signals are left alone
                pass


def _run_on_ray(ray: Any, tasks: Sequence[RunTask], on_done: DoneFn) -> None:
    remote = ray.remote(num_cpus=1, max_retries=1)(execute_task)
    pending = {remote.remote(task): task for task in tasks}
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                task = pending.pop(ref)
                try:
                    record = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    record = error_record(task.id, task.label, f"ray: {one_line(exc)}")
                on_done(task, record)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
