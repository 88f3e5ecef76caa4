"""Profiler: time ops with PyTorch on the local device and write them to an operation database.

Two timing methods; the database records which (``runs.method``):

- ``sustained`` (the default): the op runs back to back, as a training step runs its kernels. It
  first runs for ``warm_s`` of wall time (long enough for the GPU to leave its boost clock for the
  clock its power limit allows under this load), then ``repeats`` windows of at least ``window_s``
  each are timed with CUDA events around the whole window; the median window's time per call is
  stored. On a GPU the window replays a CUDA graph of up to 128 calls, so short ops are timed at
  the GPU's rate, not the host's launch rate. Inputs rotate over enough copies that together
  they exceed twice the L2 cache (:func:`input_copies`), so each call reads its operands from
  DRAM as in training. Measured on an H100 (``shared/validation/h100_profile/bench.json``):
  large bf16 GEMMs run 10-17 % slower this way than one at a time with idle gaps.
- ``burst``: each op is run ``warmup`` times, then timed ``repeats`` times one call at a time
  with CUDA events around the op alone; ``l2_flush`` overwrites a buffer larger than the L2
  cache before each timed run. The GPU idles between calls, so it runs at its boost clock: an
  optimistic figure for a training step.

On CPU timing uses ``time.perf_counter_ns`` and the shapes are small: a CPU profile checks the
plumbing, its times are CPU times, not GPU times, and the database says so in its ``runs.note``.

The op list is either the distinct compute ops of an experiment (from
:mod:`heterosim.workload.ops`) or a standard sweep of GEMM, attention (fwd and bwd), norm and
elementwise shapes. torch is an optional dependency (``pip install heterosim[profile]``).

fp8 GEMMs run through ``torch._scaled_mm`` (cuBLASLt's fp8 GEMM on CUDA): e4m3 operands with unit
tensor-wise scales, bf16 output, the second operand column-major as cuBLASLt requires, and the
accumulation Transformer Engine picks per pass: fast accumulation (``use_fast_accum``) for forward
GEMMs, split accumulation for dgrad and wgrad (``_2X_ACC_FPROP = False``, ``_2X_ACC_DGRAD`` and
``_2X_ACC_WGRAD = True`` in TE's ``pytorch/module/base.py``). Shapes it cannot run
(batched, or a dimension not a multiple of 16) and builds without it are skipped with a message.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heterosim.catalog.gpus import DTYPE_BYTES, canonical_gpu_name
from heterosim.errors import UserError
from heterosim.plan.compute.database import Measurement, OpDatabase
from heterosim.plan.compute.efficiency import attention_forward_flops

CPU_NOTE = "CPU timings are not GPU timings: this profile only exercises the plumbing"
PROFILED_KINDS = ("gemm", "attention", "norm", "elementwise")
L2_FLUSH_BYTES = 256 * 2**20
METHODS = ("sustained", "burst")
MAX_INPUT_COPIES = 16
MAX_ROTATION_BYTES = 2 * 2**30  # the input copies of one op together stay below this


@dataclass(frozen=True)
class SustainedTiming:
    """How long the sustained method runs an op: warm-up and each timed window, in seconds."""

    warm_s: float = 0.1
    window_s: float = 0.03

    def __post_init__(self) -> None:
        if not (0 <= self.warm_s <= 60 and 0 < self.window_s <= 60):
            raise UserError("profile: sustained warm-up must be in [0, 60] s and windows in (0, 60] s")


@dataclass(frozen=True)
class ProfileOp:
    """One op to time; shapes follow trace.OP_KINDS; ``pass_`` is fwd or bwd."""

    op_kind: str
    dtype: str
    shape: tuple[int, int, int, int]
    shape_extra: tuple[int, int]
    flops: int
    bytes_moved: int
    pass_: str = "fwd"


def import_torch():
    try:
        return importlib.import_module("torch")
    except ImportError:
        raise UserError(
            "profile: PyTorch is not installed; install it with `pip install heterosim[profile]`"
        ) from None


def gemm_op(m: int, n: int, k: int, dtype: str, batch: int = 1) -> ProfileOp:
    e = DTYPE_BYTES[dtype]
    return ProfileOp(
        "gemm", dtype, (m, n, k, batch), (0, 0), 2 * m * n * k * batch, (m * k + k * n + m * n) * batch * e
    )


def attention_op(
    batch: int, seq: int, heads: int, head_dim: int, causal: bool, dtype: str, backward: bool = False
) -> ProfileOp:
    fwd = attention_forward_flops(batch, seq, heads, head_dim, causal)
    tensor = batch * seq * heads * head_dim * DTYPE_BYTES[dtype]
    flops, moved = (2.5 * fwd, 8 * tensor) if backward else (fwd, 4 * tensor)
    return ProfileOp(
        "attention",
        dtype,
        (batch, seq, heads, head_dim),
        (heads, int(causal)),
        int(flops),
        moved,
        "bwd" if backward else "fwd",
    )


def norm_op(rows: int, cols: int, dtype: str) -> ProfileOp:
    return ProfileOp(
        "norm", dtype, (rows, cols, 0, 0), (0, 0), 8 * rows * cols, 2 * rows * cols * DTYPE_BYTES[dtype]
    )


def elementwise_op(elements: int, dtype: str) -> ProfileOp:
    """GELU over ``elements`` values: read x, write y."""
    return ProfileOp(
        "elementwise", dtype, (elements, 0, 0, 0), (0, 0), 8 * elements, 2 * elements * DTYPE_BYTES[dtype]
    )


def standard_sweep(device: str, dtype: str) -> list[ProfileOp]:
    """GEMM / attention / norm / elementwise shapes; small ones on CPU."""
    if device == "cpu":
        gemm_sizes = [64, 128, 256, 384]
        seqs, heads, hd = [64, 128, 256], 4, 32
        rows, elems = [256, 1024, 4096], [2**14, 2**16, 2**18]
        cols = 256
    else:
        gemm_sizes = [256, 512, 1024, 2048, 4096, 8192]
        seqs, heads, hd = [512, 1024, 2048, 4096, 8192], 16, 128
        rows, elems = [1024, 4096, 16384, 65536], [2**20, 2**22, 2**24, 2**26]
        cols = 4096
    ops = [gemm_op(s, s, s, dtype) for s in gemm_sizes]
    ops += [gemm_op(gemm_sizes[-1] * 2, gemm_sizes[-2], gemm_sizes[-2], dtype)]
    tokens = seqs[-1] * 2
    for causal in (False, True):
        for backward in (False, True):
            ops += [attention_op(max(tokens // s, 1), s, heads, hd, causal, dtype, backward) for s in seqs]
    ops += [norm_op(r, cols, dtype) for r in rows]
    ops += [elementwise_op(n, dtype) for n in elems]
    return ops


def experiment_ops(path: str | Path) -> list[ProfileOp]:
    """The distinct compute ops (gemm, attention, norm, elementwise) of one micro-batch of every
    layer of an experiment, as :mod:`heterosim.workload.ops` builds them for its TP degree."""
    from heterosim.config.experiment import load_experiment
    from heterosim.workload import ops as workload_ops

    exp = load_experiment(path)
    seen: dict[tuple, ProfileOp] = {}
    for layer in range(exp.model.layers):
        specs = workload_ops.layer_forward_ops(
            exp.model, exp.training, exp.parallel, layer
        ) + workload_ops.layer_backward_ops(exp.model, exp.training, exp.parallel, layer)
        for op in specs:
            if op.is_comm or op.op_kind not in PROFILED_KINDS:
                continue
            key = (op.op_kind, op.dtype, op.shape, op.shape_extra, op.flops, op.bytes_moved)
            pass_ = "bwd" if op.phase == "bwd" else "fwd"
            seen.setdefault(
                key,
                ProfileOp(op.op_kind, op.dtype, op.shape, op.shape_extra, op.flops, op.bytes_moved, pass_),
            )
    return list(seen.values())


def _torch_dtype(torch, dtype: str):
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}[
        dtype
    ]


def fp8_gemm_runner(
    torch, m: int, n: int, k: int, batch: int, device: str, fast_accum: bool = False
) -> Callable[[], object] | None:
    """``torch._scaled_mm`` on fresh e4m3 inputs (module docstring), fast accumulation if
    ``fast_accum``, or None where this PyTorch or device cannot run the shape."""
    if (
        batch != 1
        or any(x % 16 for x in (m, n, k))
        or not hasattr(torch, "_scaled_mm")
        or not hasattr(torch, "float8_e4m3fn")
    ):
        return None
    a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=device, dtype=torch.float32)

    def run() -> object:
        return torch._scaled_mm(
            a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast_accum
        )

    try:
        run()
    except (RuntimeError, TypeError, NotImplementedError):
        return None
    return run


def build_runner(torch, op: ProfileOp, device: str) -> Callable[[], object] | None:
    """A closure that runs ``op`` once on fresh inputs allocated here (None: cannot run it)."""
    if op.dtype == "fp8":
        if op.op_kind != "gemm":
            return None
        m, n, k, batch = op.shape
        return fp8_gemm_runner(torch, m, n, k, batch, device, fast_accum=op.pass_ == "fwd")
    dt = _torch_dtype(torch, op.dtype)
    kw = {"device": device, "dtype": dt}
    if op.op_kind == "gemm":
        m, n, k, batch = op.shape
        a = torch.randn(batch, m, k, **kw) if batch > 1 else torch.randn(m, k, **kw)
        b = torch.randn(batch, k, n, **kw) if batch > 1 else torch.randn(k, n, **kw)
        return lambda: torch.matmul(a, b)
    if op.op_kind == "attention":
        batch, seq, heads, hd = op.shape
        causal = bool(op.shape_extra[1])
        sdpa = torch.nn.functional.scaled_dot_product_attention
        q, k, v = (
            torch.randn(batch, heads, seq, hd, **kw, requires_grad=op.pass_ == "bwd") for _ in range(3)
        )
        if op.pass_ != "bwd":
            return lambda: sdpa(q, k, v, is_causal=causal)
        out = sdpa(q, k, v, is_causal=causal)
        grad = torch.randn_like(out)
        return lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
    if op.op_kind == "norm":
        return _norm_runner(torch, op, kw)
    if op.op_kind == "elementwise":
        return _elementwise_runner(torch, op, kw)
    raise ValueError(f"cannot profile op kind {op.op_kind!r}")


def _norm_runner(torch, op: ProfileOp, kw: dict) -> Callable[[], object]:
    """LayerNorm over rows x cols; its backward (input and weight gradients) for a bwd op."""
    rows, cols = op.shape[0], op.shape[1]
    grad = op.pass_ == "bwd"
    x = torch.randn(rows, cols, **kw, requires_grad=grad)
    w = torch.ones(cols, **kw, requires_grad=grad)
    b = torch.zeros(cols, **kw, requires_grad=grad)
    if not grad:
        return lambda: torch.nn.functional.layer_norm(x, (cols,), w, b)
    y = torch.nn.functional.layer_norm(x, (cols,), w, b)
    dy = torch.randn_like(y)
    return lambda: torch.autograd.grad(y, (x, w, b), dy, retain_graph=True)


def _elementwise_runner(torch, op: ProfileOp, kw: dict) -> Callable[[], object]:
    """A memory-bound kernel over the op's elements moving about its bytes per element: a
    reduction (1 access per element: a bias gradient), GELU (2: read, write), GELU's backward or
    an add (3), a multiply-add (4 or more). Approximate: an op is timed by a kernel with its
    element count and byte ratio, not by its own kernel."""
    n = int(op.shape[0])
    per_element = op.bytes_moved / max(n * DTYPE_BYTES.get(op.dtype, 2), 1)
    x = torch.randn(n, **kw)
    if per_element < 1.5:
        cols = 1024 if n % 1024 == 0 else 1
        return lambda: x.view(-1, cols).sum(0)
    if per_element < 2.5:
        return lambda: torch.nn.functional.gelu(x)
    y = torch.randn(n, **kw)
    if per_element < 3.5:
        if op.pass_ == "bwd":
            return lambda: torch.ops.aten.gelu_backward(y, x)
        return lambda: torch.add(x, y)
    z = torch.randn(n, **kw)
    return lambda: torch.addcmul(x, y, z)


def input_copies(op: ProfileOp, l2_bytes: int) -> int:
    """How many independent input sets the sustained method rotates through for ``op``: enough
    that together they hold at least twice the L2 cache, at most :data:`MAX_INPUT_COPIES` and
    :data:`MAX_ROTATION_BYTES` together."""
    per_copy = max(int(op.bytes_moved), 1)
    wanted = -(-2 * l2_bytes // per_copy)
    return int(max(1, min(wanted, MAX_INPUT_COPIES, MAX_ROTATION_BYTES // per_copy)))


def l2_cache_bytes(torch, device: str) -> int:
    """The device's L2 size (0 on CPU, where the rotation is not needed)."""
    if device != "cuda":
        return 0
    props = torch.cuda.get_device_properties(0)
    return int(getattr(props, "L2_cache_size", 50 * 2**20))


def time_sustained(
    torch,
    runs: list[Callable[[], object]],
    device: str,
    repeats: int,
    timing: SustainedTiming,
    graphs: bool = True,
) -> float:
    """Median time per call in ns of ``runs`` called round robin, back to back (module docstring).

    On a GPU the calls are captured into a CUDA graph (:func:`graph_of_calls`) and the graph is
    replayed, so the GPU runs them back to back whatever the host's launch rate (an op shorter
    than the Python loop's dispatch, about 8 us, would otherwise be timed at that rate); an op
    that cannot be captured, or any op with ``graphs`` false, runs in a Python loop."""
    clock = _WallClock(torch, device)
    calls, t0 = 0, time.perf_counter()
    while True:  # warm-up: at least one round, then until warm_s has passed
        for run in runs:
            run()
        calls += len(runs)
        clock.sync()
        if time.perf_counter() - t0 >= timing.warm_s:
            break
    per_call_s = max((time.perf_counter() - t0) / calls, 1e-9)
    n = max(len(runs), int(timing.window_s / per_call_s) + 1)
    step, per_step = (lambda i: runs[i % len(runs)]()), 1
    if device == "cuda" and graphs and not GRAPH_FALLBACKS[0]:  # one failed capture: no more
        graph_calls = max(len(runs), min(GRAPH_MAX_CALLS, n))
        replay = graph_of_calls(torch, runs, graph_calls)
        if replay is not None:
            step, per_step = (lambda i: replay()), graph_calls
            n = max(1, -(-n // graph_calls))
            for _ in range(2):
                replay()
    samples = []
    for _ in range(repeats):
        clock.start()
        for i in range(n):
            step(i)
        samples.append(clock.stop_ns() / (n * per_step))
    return float(statistics.median(samples))


GRAPH_MAX_CALLS = 128


def capturable(op: ProfileOp) -> bool:
    """GEMMs and elementwise kernels (plain kernels, no autograd or library plans) are captured
    in a CUDA graph; attention and norms are timed in a Python loop (their kernels are long
    enough that the host's launch rate does not bound them, except the smallest norms)."""
    return op.op_kind in ("gemm", "elementwise")


GRAPH_FALLBACKS: list[int] = [0]  # ops timed in a Python loop because capture failed (this process)


def graph_of_calls(torch, runs: list[Callable[[], object]], calls: int) -> Callable[[], object] | None:
    """A CUDA graph of ``calls`` back-to-back calls of ``runs`` (round robin), as its replay
    function, or None when an op cannot be captured. Warmed up on a side stream first, as graph
    capture requires."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for run in runs:
                run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(calls):
                runs[i % len(runs)]()
        torch.cuda.synchronize()
    except Exception:  # capture unsupported for this op or build: the Python loop times it
        GRAPH_FALLBACKS[0] += 1
        try:
            torch.cuda.synchronize()
            torch.cuda.manual_seed_all(0)  # a failed capture can leave the generator mid-capture
        except RuntimeError:
            pass
        return None
    return graph.replay


class _WallClock:
    """CUDA events on a GPU, ``perf_counter_ns`` on CPU, around a window of back-to-back calls."""

    def __init__(self, torch, device: str) -> None:
        self.torch, self.cuda = torch, device == "cuda"
        self._t0 = 0
        self._start: Any = None
        self._end: Any = None

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def start(self) -> None:
        self.sync()
        if self.cuda:
            self._start = self.torch.cuda.Event(enable_timing=True)
            self._end = self.torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._t0 = time.perf_counter_ns()

    def stop_ns(self) -> float:
        if self.cuda:
            self._end.record()
            self._end.synchronize()
            return float(self._start.elapsed_time(self._end) * 1e6)
        return float(time.perf_counter_ns() - self._t0)


def time_runner(
    torch, run: Callable[[], object], device: str, warmup: int, repeats: int, l2_flush: bool
) -> float:
    """Median time of ``run`` in ns, one call at a time (the burst method)."""
    for _ in range(warmup):
        run()
    samples: list[float] = []
    if device == "cuda":
        flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda") if l2_flush else None
        torch.cuda.synchronize()
        for _ in range(repeats):
            if flush is not None:
                flush.zero_()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e6)
    else:
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            run()
            samples.append(float(time.perf_counter_ns() - t0))
    return float(statistics.median(samples))


def open_for_device(out: str | Path, label: str) -> OpDatabase:
    """The database at ``out``, created if needed; a UserError (nothing written) when it already
    holds runs of another device: one database profiles one GPU, so its rows never mix."""
    db = OpDatabase(out, create=True)
    others = sorted({str(r["gpu"]) for r in db.runs() if r.get("gpu") and r["gpu"] != label})
    if others:
        db.close()
        raise UserError(
            f"{out}: --out holds profiles of {', '.join(others)}, not {label}; "
            "write this GPU's profile to another file"
        )
    return db


def record_run(
    db: OpDatabase,
    torch,
    device: str,
    raw_name: str,
    label: str,
    repeats: int,
    note: str,
    method: str,
    l2_flush: bool = False,
) -> int:
    """Add one profiler run (device, software versions, method) to ``db``; its id."""
    return db.add_run(
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        device=raw_name,
        gpu=label,
        driver=_driver_version() if device == "cuda" else "",
        torch=str(torch.__version__),
        cuda=str(torch.version.cuda or ""),
        repeats=repeats,
        l2_flush=int(l2_flush and device == "cuda"),
        note=note,
        method=method,
    )


def resolve_device(torch, device: str) -> str:
    """``auto`` -> cuda when PyTorch sees a GPU, else cpu; a UserError for cuda without one."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("profile: --device cuda requested but PyTorch sees no CUDA device")
    return device


def _driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def device_gpu_label(torch, device: str, override: str | None) -> tuple[str, str]:
    """(catalogue name or device label for the rows, the device's own name)."""
    if device == "cpu":
        return (override or "cpu"), "cpu"
    raw = torch.cuda.get_device_name(0)
    if override:
        return override, raw
    name = raw.replace("NVIDIA ", "").strip()
    guess = canonical_gpu_name(name) or canonical_gpu_name(name.split()[0])
    if guess is None:
        raise UserError(f"profile: cannot map device {raw!r} to a catalogued GPU; pass --gpu NAME")
    return guess, raw


def profile(
    out: str | Path,
    ops: Iterable[ProfileOp] | None = None,
    *,
    device: str = "auto",
    repeats: int = 20,
    warmup: int = 5,
    l2_flush: bool = True,
    gpu: str | None = None,
    dtype: str | None = None,
    method: str = "sustained",
    sustained: SustainedTiming = SustainedTiming(),
    log: Callable[[str], None] = print,
) -> int:
    """Time ``ops`` (default: the standard sweep) with ``method`` (module docstring) and append
    them to the database at ``out``."""
    torch = import_torch()
    device = resolve_device(torch, device)
    if repeats < 1:
        raise UserError("profile: --repeats must be >= 1")
    if method not in METHODS:
        raise UserError(f"profile: --method must be one of {', '.join(METHODS)}, got {method!r}")
    label, raw_name = device_gpu_label(torch, device, gpu)
    dtype = dtype or ("fp32" if device == "cpu" else "bf16")
    op_list = list(ops) if ops is not None else standard_sweep(device, dtype)
    if device == "cpu":
        log(f"profile: running on CPU ({CPU_NOTE}).")
    db = open_for_device(out, label)
    note = CPU_NOTE if device == "cpu" else ""
    run_id = record_run(db, torch, device, raw_name, label, repeats, note, method, l2_flush)
    rows: list[Measurement] = []
    source = "profiler:cuda" if device == "cuda" else "profiler:cpu"
    l2 = l2_cache_bytes(torch, device)
    written = 0
    for index, op in enumerate(op_list):
        if device == "cpu" and op.dtype in ("bf16", "fp16"):
            op = ProfileOp(op.op_kind, "fp32", op.shape, op.shape_extra, op.flops, op.bytes_moved, op.pass_)
        runner = build_runner(torch, op, device)
        if runner is None:
            log(
                f"profile: skipping {op.dtype} {op.op_kind} {op.shape} (torch._scaled_mm cannot "
                f"run it on {device} with this PyTorch)"
            )
            continue
        if method == "sustained":
            extra = [build_runner(torch, op, device) for _ in range(input_copies(op, l2) - 1)]
            runs = [runner, *(r for r in extra if r is not None)]
            t = time_sustained(torch, runs, device, repeats, sustained, graphs=capturable(op))
            del runs, extra
        else:
            t = time_runner(torch, runner, device, warmup, repeats, l2_flush)
        del runner
        if (index + 1) % 25 == 0:
            log(f"profile: {index + 1}/{len(op_list)} ops timed")
            written += db.add(rows, run_id)  # a run stopped later keeps what it timed
            rows = []
        rows.append(
            Measurement(
                label,
                op.op_kind,
                op.dtype,
                op.pass_,
                op.shape,
                op.shape_extra,
                op.flops,
                op.bytes_moved,
                t,
                source,
                f"heterosim profile run {run_id} ({method}) on {raw_name}",
            )
        )
    written += db.add(rows, run_id)
    db.close()
    if device == "cuda" and method == "sustained" and GRAPH_FALLBACKS[0]:
        log(f"profile: {GRAPH_FALLBACKS[0]} ops not captured in a CUDA graph (timed in a Python loop)")
    log(f"profile: wrote {written} measurements ({method}) for {label} ({raw_name}, {device}) to {out}")
    return written
