"""Run many ``heterosim`` command lines quickly, each in a fresh forked child with bounded memory.

Started once (``python forkserver.py``): imports the CLI and its command modules, then reads one
JSON request per line on stdin (``{"argv": [...], "cwd": "...", "timeout_s": 60,
"memory_bytes": 2147483648}``) and answers one JSON line on stdout (``{"status": 2,
"stdout": "...", "stderr": "...", "wall_s": 0.1, "timed_out": false, "signal": null}``).

Each request runs in a child forked from the warm parent (no interpreter start-up per case):
the child sets ``RLIMIT_AS`` (so a run that tries to allocate more fails, as on a smaller
machine), changes to ``cwd``, sends its stdout and stderr to files and calls
``heterosim.cli.main(argv)``; an exception that escapes ``main`` is printed as a traceback and
the child exits 99. The parent kills a child that runs past ``timeout_s`` (a hang).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import tempfile
import time
import traceback

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

from heterosim import cli  # noqa: E402  (after the environment is set)

cli.build_parser()  # import every command module once, in the parent


def _child(request: dict, out_path: str, err_path: str) -> None:
    limit = int(request.get("memory_bytes", 2 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.chdir(request["cwd"])
    for fd, path in ((1, out_path), (2, err_path)):
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(handle, fd)
        os.close(handle)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        status = cli.main(request["argv"])
    except SystemExit as exc:  # argparse
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except BaseException:  # noqa: BLE001 - the traceback is the finding
        traceback.print_exc()
        status = 99
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(status or 0))


def _serve(request: dict) -> dict:
    folder = tempfile.mkdtemp(prefix="hsfuzz-io-")
    out_path, err_path = os.path.join(folder, "out"), os.path.join(folder, "err")
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            _child(request, out_path, err_path)
        finally:
            os._exit(98)
    deadline = started + float(request.get("timeout_s", 60))
    timed_out = False
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, wait_status = os.waitpid(pid, 0)
            timed_out = True
            break
        time.sleep(0.005)
    wall = time.monotonic() - started
    status = os.waitstatus_to_exitcode(wait_status)

    def read(path: str) -> str:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return handle.read(200_000)
        except OSError:
            return ""

    answer = {
        "status": status,
        "stdout": read(out_path),
        "stderr": read(err_path),
        "wall_s": wall,
        "timed_out": timed_out,
        "signal": -status if status < 0 else None,
    }
    for path in (out_path, err_path):
        if os.path.exists(path):
            os.unlink(path)
    os.rmdir(folder)
    return answer


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = _serve(json.loads(line))
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
