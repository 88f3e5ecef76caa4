"""Where and when each block of a copy kernel runs beside back-to-back compute.

A copy kernel of 8, 16 or 32 blocks (512 threads each, as NCCL's collective kernels) records, for
each of its blocks, the SM it ran on (``%smid``) and its start and end on the GPU's global timer
(``%globaltimer``, ns). A one-thread stamp kernel after each compute kernel on the compute stream
records the compute's kernel boundaries on the same timer, and the host's launch time of the copy
is mapped onto that timer (median offset of stamp kernels launched on an idle GPU). Three orders:

- ``alone``: the copy on an idle GPU;
- ``comm_first``: the copy launched, then the compute queued behind it on the other stream;
- ``compute_first``: the compute running back to back when the copy is launched.

This says whether a copy launched into running compute starts only when a compute kernel ends
(a wait for SMs) and how fast each of its blocks then runs against alone (a rate effect).
Compute: a persistent 8192^3 bf16 GEMM and a 2048x6144x12288 one. Needs CuPy. Usage on a GPU:

    python3 benchmarks/gpu/copy_block_timeline.py OUT.json [SMEM_KB]

``SMEM_KB``: dynamic shared memory per copy block (120: one block per SM).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

import cupy as cp
import torch

SOURCE = r"""
extern "C" __global__ void copy_timed(int4* a, int4* b, long long n, int passes,
                                      unsigned long long* rec) {
  extern __shared__ int reserved[];  // dynamic shared memory: limits the blocks per SM
  if (threadIdx.x == 0 && n < 0) reserved[0] = passes;
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  unsigned int smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  long long stride = (long long)gridDim.x * blockDim.x;
  for (int p = 0; p < passes; ++p) {
    int4* from = (p & 1) ? b : a;
    int4* to = (p & 1) ? a : b;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
      to[i] = from[i];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    unsigned long long t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    rec[3 * blockIdx.x] = smid;
    rec[3 * blockIdx.x + 1] = t0;
    rec[3 * blockIdx.x + 2] = t1;
  }
}
extern "C" __global__ void stamp(unsigned long long* out, int i) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  out[i] = t;
}
"""

THREADS = 512  # NCCL's collective kernels: 512 threads per block (NCCL_MAX_NTHREADS)
COPY_BYTES = 256 << 20
COMPUTE_KERNELS = 24
REPEATS = 3


class Kernels:
    def __init__(self, smem_bytes: int = 0) -> None:
        self.copy = cp.RawKernel(SOURCE, "copy_timed")
        self.smem_bytes = smem_bytes
        if smem_bytes > 48 << 10:
            self.copy.max_dynamic_shared_size_bytes = smem_bytes
        self.stamp_fn = cp.RawKernel(SOURCE, "stamp")
        self.n = COPY_BYTES // 16
        self.a = cp.zeros(self.n * 4, dtype=cp.int32)
        self.b = cp.zeros(self.n * 4, dtype=cp.int32)
        self.rec = cp.zeros(3 * 64, dtype=cp.uint64)
        self.stamps = cp.zeros(256, dtype=cp.uint64)

    def launch_copy(self, stream: torch.cuda.Stream, blocks: int, passes: int) -> None:
        with cp.cuda.ExternalStream(stream.cuda_stream):
            args = (self.a, self.b, cp.int64(self.n), cp.int32(passes), self.rec)
            self.copy((blocks,), (THREADS,), args, shared_mem=self.smem_bytes)

    def stamp(self, stream: torch.cuda.Stream, i: int) -> None:
        with cp.cuda.ExternalStream(stream.cuda_stream):
            self.stamp_fn((1,), (1,), (self.stamps, cp.int32(i)))


def host_to_gpu_offset(k: Kernels, stream: torch.cuda.Stream) -> float:
    """Median (GPU global timer - host time.time_ns()) in ns, from stamps on an idle GPU."""
    offsets = []
    for _ in range(30):
        h0 = time.time_ns()
        k.stamp(stream, 200)
        stream.synchronize()
        h1 = time.time_ns()
        offsets.append(float(int(k.stamps[200].get())) - (h0 + h1) / 2)
    return statistics.median(offsets)


def one_run(
    k: Kernels,
    compute,
    comp: torch.cuda.Stream,
    comm: torch.cuda.Stream,
    order: str,
    blocks: int,
    passes: int,
    offset: float,
    alone_compute_ms: float,
) -> dict[str, Any]:
    torch.cuda.synchronize()
    k.rec.fill(0)
    k.stamps.fill(0)
    cp.cuda.Device().synchronize()
    launch = None

    def queue_compute() -> None:
        k.stamp(comp, 0)
        with torch.cuda.stream(comp):
            for i in range(COMPUTE_KERNELS):
                compute()
                k.stamp(comp, i + 1)

    if order == "alone":
        launch = time.time_ns()
        k.launch_copy(comm, blocks, passes)
    elif order == "comm_first":
        launch = time.time_ns()
        k.launch_copy(comm, blocks, passes)
        queue_compute()
    else:
        queue_compute()
        # launch when about a third of the compute has run
        time.sleep(alone_compute_ms * COMPUTE_KERNELS / 3 / 1e3)
        launch = time.time_ns()
        k.launch_copy(comm, blocks, passes)
    torch.cuda.synchronize()
    cp.cuda.Device().synchronize()
    rec = k.rec.get().reshape(-1, 3)[:blocks]
    stamps = k.stamps.get()[: COMPUTE_KERNELS + 1] if order != "alone" else []
    t_launch = launch + offset
    return {
        "order": order,
        "blocks": blocks,
        "launch_gpu_ns": t_launch,
        "sm": [int(r[0]) for r in rec],
        "start_ns": [float(r[1]) - t_launch for r in rec],
        "end_ns": [float(r[2]) - t_launch for r in rec],
        "compute_bounds_ns": [float(s) - t_launch for s in stamps],
    }


def main(out_path: str, smem_kb: int = 0) -> None:
    """``smem_kb``: dynamic shared memory per copy block (e.g. 120: one block per SM, as a
    kernel built with ``__launch_bounds__(512, 1)`` and NCCL's shared-memory footprint)."""
    k = Kernels(smem_kb << 10)
    comp, comm = torch.cuda.Stream(), torch.cuda.Stream()
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "threads": THREADS,
        "smem_kb": smem_kb,
        "runs": [],
    }
    offset = host_to_gpu_offset(k, comm)
    result["host_to_gpu_offset_ns"] = offset
    computes = {}
    for m, n, kk in ((8192, 8192, 8192), (2048, 6144, 12288)):
        x = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(kk, n, device="cuda", dtype=torch.bfloat16)
        computes[f"gemm_{m}x{n}x{kk}"] = lambda x=x, w=w: x @ w
    for name, fn in computes.items():
        with torch.cuda.stream(comp):
            for _ in range(5):
                fn()
        comp.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(comp)
        with torch.cuda.stream(comp):
            for _ in range(10):
                fn()
        b.record(comp)
        b.synchronize()
        alone_ms = a.elapsed_time(b) / 10
        result.setdefault("compute_alone_ms", {})[name] = alone_ms
        for blocks in (8, 16, 32):
            # passes so the copy alone takes about the time of 6 compute kernels
            k.launch_copy(comm, blocks, 2)
            comm.synchronize()
            t = time.perf_counter()
            k.launch_copy(comm, blocks, 2)
            comm.synchronize()
            per_pass_ms = (time.perf_counter() - t) * 1e3 / 2
            passes = max(2, int(6 * alone_ms / per_pass_ms))
            for rep in range(REPEATS):
                for order in ("alone", "comm_first", "compute_first"):
                    row = one_run(k, fn, comp, comm, order, blocks, passes, offset, alone_ms)
                    row.update(
                        {"compute": name, "passes": passes, "repeat": rep, "compute_alone_ms": alone_ms}
                    )
                    result["runs"].append(row)
            last = result["runs"][-3:]
            print(
                name,
                blocks,
                passes,
                [
                    (r["order"], round(min(r["start_ns"]) / 1e6, 3), round(max(r["end_ns"]) / 1e6, 3))
                    for r in last
                ],
                flush=True,
            )
            json.dump(result, open(out_path, "w"))
    json.dump(result, open(out_path, "w"))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
