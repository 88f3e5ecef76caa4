"""Compute beside a communication-like kernel on one GPU: what slows the compute, and how much.

NCCL's collective kernels hold one thread block per channel for the whole collective and move
data through HBM (copy for all-gather / send-recv, read-two-write-one for reductions). This
benchmark separates the two ways such a kernel slows a GEMM or attention kernel on another
stream:

- ``spin``: blocks that only compute in registers (no memory traffic): the compute kernel loses
  those SMs and nothing else;
- ``copy`` / ``reduce``: blocks that stream through HBM like NCCL's copy and reduce steps.

For each compute op it records the time alone and beside 4-32 such blocks (median of three
trials of back-to-back calls), the launch grid, block size, registers and shared memory of the
kernels it runs (from the PyTorch profiler's trace), and for the copy kernel its own rate alone
and beside back-to-back GEMMs (the communication slowed by the compute). Usage on a GPU:

    python3 benchmarks/gpu/contention_bench.py OUT.json
"""

from __future__ import annotations

import json
import sys
import tempfile
import time

import torch
import triton
import triton.language as tl

BF16 = torch.bfloat16
COPY_ELEMS = 64 * 2**20  # 128 MiB each way in bf16
BLOCK_COUNTS = (4, 8, 16, 32)
SPIN_COUNTS = (8, 16, 32)
NUM_WARPS = 16  # 512 threads per block, as NCCL's collective kernels launch


@triton.jit
def copy_kernel(src, dst, n, iters, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for _ in range(iters):
        for start in range(pid * BLOCK, n, nprog * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


@triton.jit
def reduce_kernel(a, b, dst, n, iters, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for _ in range(iters):
        for start in range(pid * BLOCK, n, nprog * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < n
            x = tl.load(a + offs, mask=m).to(tl.float32) + tl.load(b + offs, mask=m).to(tl.float32)
            tl.store(dst + offs, x.to(tl.bfloat16), mask=m)


@triton.jit
def spin_kernel(out, iters, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.arange(0, BLOCK).to(tl.float32) + pid
    for _ in range(iters):
        x = x * 0.999999 + 0.5
    tl.store(out + pid * BLOCK + tl.arange(0, BLOCK), x)


class Background:
    """Launches a kernel holding ``blocks`` blocks on a side stream for about ``ms`` ms."""

    def __init__(self) -> None:
        self.src = torch.randn(COPY_ELEMS, device="cuda", dtype=BF16)
        self.src2 = torch.randn(COPY_ELEMS, device="cuda", dtype=BF16)
        self.dst = torch.empty_like(self.src)
        self.spin_out = torch.empty(132 * 1024, device="cuda", dtype=torch.float32)
        self.stream = torch.cuda.Stream()
        self.rate: dict[tuple[str, int], float] = {}  # ms per pass (copy/reduce) or per 1e6 iters

    def launch(self, kind: str, blocks: int, iters: int) -> None:
        with torch.cuda.stream(self.stream):
            if kind == "copy":
                copy_kernel[(blocks,)](self.src, self.dst, COPY_ELEMS, iters, BLOCK=4096, num_warps=NUM_WARPS)
            elif kind == "reduce":
                reduce_kernel[(blocks,)](
                    self.src, self.src2, self.dst, COPY_ELEMS, iters, BLOCK=4096, num_warps=NUM_WARPS
                )
            else:
                spin_kernel[(blocks,)](self.spin_out, iters, BLOCK=1024, num_warps=NUM_WARPS)

    def unit_ms(self, kind: str, blocks: int) -> float:
        """ms of one unit of work (one pass over the buffers; 100k spin iterations) alone."""
        key = (kind, blocks)
        if key not in self.rate:
            units = 2 if kind != "spin" else 1
            iters = units if kind != "spin" else 100_000
            self.launch(kind, blocks, iters)
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(self.stream)
            self.launch(kind, blocks, iters)
            b.record(self.stream)
            b.synchronize()
            self.rate[key] = a.elapsed_time(b) / units
        return self.rate[key]

    def iters_for(self, kind: str, blocks: int, ms: float) -> int:
        per = self.unit_ms(kind, blocks)
        scale = 100_000 if kind == "spin" else 1
        return max(1, int(ms / per * scale) + 1)

    def gbps(self, kind: str, blocks: int) -> float:
        bytes_per_pass = COPY_ELEMS * 2 * (2 if kind == "copy" else 3)
        return bytes_per_pass / self.unit_ms(kind, blocks) / 1e6


def loop_ms(fn, reps: int, stream) -> float:
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        a.record(stream)
        for _ in range(reps):
            fn()
        b.record(stream)
    b.synchronize()
    return a.elapsed_time(b) / reps


def beside(fn, bg: Background, kind: str, blocks: int, reps: int, alone_ms: float, stream) -> float:
    """Median ms per call of ``fn`` while ``blocks`` background blocks of ``kind`` run."""
    samples = []
    for _ in range(3):
        torch.cuda.synchronize()
        if blocks:
            bg.launch(kind, blocks, bg.iters_for(kind, blocks, 3 * alone_ms * reps + 2))
            time.sleep(0.002)
        samples.append(loop_ms(fn, reps, stream))
        torch.cuda.synchronize()
    return sorted(samples)[1]


def kernel_launches(fn) -> list[dict]:
    """Name, grid, block, registers and shared memory of the kernels ``fn`` launches."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    out = []
    for ev in trace.get("traceEvents", []):
        if ev.get("cat") == "kernel":
            args = ev.get("args", {})
            out.append(
                {
                    "name": ev.get("name", "")[:200],
                    "grid": args.get("grid"),
                    "block": args.get("block"),
                    "registers": args.get("registers per thread"),
                    "shared_memory": args.get("shared memory"),
                    "blocks_per_sm": args.get("blocks per SM"),
                    "dur_us": ev.get("dur"),
                }
            )
    return out


def gemm_case(m: int, n: int, k: int):
    a = torch.randn(m, k, device="cuda", dtype=BF16)
    b = torch.randn(k, n, device="cuda", dtype=BF16)
    return (lambda: a @ b), 2.0 * m * n * k


def attention_case(batch: int, seq: int, heads: int, hd: int, backward: bool):
    sdpa = torch.nn.functional.scaled_dot_product_attention
    q, k, v = (
        torch.randn(batch, heads, seq, hd, device="cuda", dtype=BF16, requires_grad=backward)
        for _ in range(3)
    )
    flops = 4.0 * batch * heads * seq * seq * hd / 2
    if not backward:
        return (lambda: sdpa(q, k, v, is_causal=True)), flops
    out = sdpa(q, k, v, is_causal=True)
    grad = torch.randn_like(out)
    return (lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)), 2.5 * flops


def norm_case(rows: int, cols: int):
    x = torch.randn(rows, cols, device="cuda", dtype=BF16)
    w = torch.ones(cols, device="cuda", dtype=BF16)
    return (lambda: torch.nn.functional.layer_norm(x, (cols,), w)), 4.0 * rows * cols  # bytes r+w


CASES = [
    ("gemm", "gpt175b-tp8-fc1", (2048, 6144, 12288)),
    ("gemm", "llama8b-qkv", (8192, 6144, 4096)),
    ("gemm", "mpt7b-mb6-fc1", (12288, 16384, 4096)),
    ("gemm", "gpt175b-tp8-proj", (2048, 12288, 1536)),
    ("gemm", "cube8192", (8192, 8192, 8192)),
    ("gemm", "cube4096", (4096, 4096, 4096)),
    ("gemm", "gpt2m-fc1", (8192, 4096, 1024)),
    ("gemm", "llama70b-tp8-fc1", (4096, 7168, 8192)),
    ("gemm", "gpt175b-tp8-qkv", (2048, 4608, 12288)),
    ("gemm", "small-2048", (2048, 2048, 2048)),
    ("attention_fwd", "causal-s4096-h16-d128", (2, 4096, 16, 128)),
    ("attention_bwd", "causal-s4096-h16-d128", (2, 4096, 16, 128)),
    ("norm", "ln-16384x4096", (16384, 4096)),
]


def build(kind: str, shape: tuple):
    if kind == "gemm":
        return gemm_case(*shape)
    if kind.startswith("attention"):
        return attention_case(*shape, backward=kind.endswith("bwd"))
    return norm_case(*shape)


def main(out_path: str) -> None:
    props = torch.cuda.get_device_properties(0)
    result: dict = {
        "device": torch.cuda.get_device_name(0),
        "sms": props.multi_processor_count,
        "torch": torch.__version__,
    }
    bg = Background()
    result["background"] = {
        f"{kind}-{c}": {
            "ms_per_unit": bg.unit_ms(kind, c),
            **({"GBps": bg.gbps(kind, c)} if kind != "spin" else {}),
        }
        for kind in ("copy", "reduce", "spin")
        for c in (*BLOCK_COUNTS, props.multi_processor_count)
    }
    s_comp = torch.cuda.Stream()
    result["cases"] = []
    for kind, label, shape in CASES:
        fn, work = build(kind, shape)
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        first = loop_ms(fn, 10, s_comp)
        reps = max(10, min(200, int(20.0 / max(first, 1e-3))))
        alone = beside(fn, bg, "copy", 0, reps, first, s_comp)
        row = {"kind": kind, "label": label, "shape": shape, "work": work, "reps": reps, "ms_alone": alone}
        for bkind, counts in (("spin", SPIN_COUNTS), ("copy", BLOCK_COUNTS), ("reduce", (16,))):
            for c in counts:
                row[f"ms_{bkind}_{c}"] = beside(fn, bg, bkind, c, reps, alone, s_comp)
        row["kernels"] = kernel_launches(fn)
        result["cases"].append(row)
        slow = {key: row[key] / alone for key in row if key.startswith("ms_") and key != "ms_alone"}
        print(label, f"{alone:.4f} ms", " ".join(f"{k[3:]}={v:.3f}" for k, v in slow.items()), flush=True)
        json.dump(result, open(out_path, "w"), indent=1)
    result["copy_beside_gemm"] = copy_beside_gemm(bg, s_comp)
    json.dump(result, open(out_path, "w"), indent=1)


def copy_beside_gemm(bg: Background, s_comp) -> dict:
    """The copy kernel's own time for 4 passes alone and while GEMMs run back to back beside it."""
    fn, _ = gemm_case(8192, 8192, 8192)
    out = {}
    for c in (8, 16, 32):
        alone = bg.unit_ms("copy", c) * 4
        with torch.cuda.stream(s_comp):
            for _ in range(int(3 * alone / 1.4) + 4):
                fn()
        time.sleep(0.001)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(bg.stream)
        bg.launch("copy", c, 4)
        b.record(bg.stream)
        b.synchronize()
        torch.cuda.synchronize()
        out[str(c)] = {"ms_alone": alone, "ms_beside_gemm": a.elapsed_time(b)}
        print("copy", c, "blocks:", f"{alone:.3f} ms alone, {a.elapsed_time(b):.3f} beside GEMMs", flush=True)
    return out


if __name__ == "__main__":
    main(sys.argv[1])
