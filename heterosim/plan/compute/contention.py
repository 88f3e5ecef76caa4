"""Compute slowed by communication kernels on the same GPU: the per-op terms of the model.

NCCL runs a collective as one kernel holding one thread block per channel on every GPU of the
communicator for as long as it moves data (``ncclKernel`` launched with ``nChannels`` blocks);
point-to-point transfers hold ``NCCL_NCHANNELS_PER_NET_PEER`` (default 2) blocks. Measured on an
H100 (``validation/h100_2026-11-27/contention*.json``, ``benchmarks/gpu/contention_bench.py``):

- cuBLAS and cuDNN run Hopper GEMMs and fused attention as persistent kernels whose grid is the
  SM count (132 CTAs of 384 threads, 168 registers and 188-232 kB of shared memory each: one
  per SM, so a CTA cannot share an SM with a communication block). While a kernel beside them
  holds ``c`` SMs, some CTAs start only when others finish, so a GEMM with few waves of tiles
  loses most of a wave: 123 GEMM shapes of the standard layers beside 16 copy blocks ran
  1.02x-2.03x slower, 1.9x at one wave and 1.2-1.3x at 10-30 waves; blocks that only compute
  (no memory traffic) slow them as much as copying blocks, so it is the SMs, not the bandwidth.
- Memory-bound kernels (norms, elementwise) have many small blocks that share SMs with the
  communication blocks and lose only part of the memory bandwidth those take (a LayerNorm of
  16384 x 4096 beside 32 copy blocks moving 941 GB/s: 13.5 % slower).

The model, per compute op on a GPU whose communication kernels hold ``c`` blocks (applied by
``ns3::ComputeContention`` while they run, re-timed whenever ``c`` changes):

    f(c) = max(1 + A * waves ** -P  [if c > SMs - tiles],  1 / (1 - c * share))     (GEMMs)
    f(c) = 1 / (1 - c * share)                          (fused attention, memory-bound kernels)

with ``waves`` the GEMM's tiles over the SM count (the roofline's tile choice,
:func:`heterosim.plan.compute.efficiency.gemm_tile_count`), ``share`` = 1 / SMs for compute
kernels and ``COUPLING * BLOCK_GBPS / HBM bandwidth`` for memory-bound ones. Fused attention
(cuDNN on Hopper) showed no wave tail beside 4-32 copy blocks (1.04-1.25x, its SM share). ``A``
and ``P`` were fitted to the shipped microbenchmark ``validation/h100_2026-11-26/overlap.json`` (4
GEMMs x 8/16/32 blocks: mean absolute error 4.6 points, worst 12); held out, whole layers forward
+ backward beside 8-32 copy blocks are reproduced with a mean absolute error of 4.5 points (mean
-0.2), attention and LayerNorm with 3.0; isolated loops of one GEMM beside 16 blocks read 17
points slower on average than the model (and than the same GEMMs inside layers)
(``benchmarks/bench_contention.py``).
Approximate: the wave term ignores which SMs the blocks take (clusters of 2 CTAs need pairs)
and the GPU clock rising when fewer SMs run (cluster-slot and tile-round rules from the GPU's
layout were tested in its place and fit no set better: benchmarks/HISTORY.md, "Cluster slots
and tile rounds"); the communication kernel is not slowed in turn
(measured, ``validation/h100_2026-11-27b/comm_beside_compute.json``: launched while persistent
GEMMs or attention hold every SM, a copy kernel's blocks start as the compute's CTAs retire and
it takes 1.15-1.93x its time alone; resident before the compute arrives, 0.94-1.13x). That
wait is left out on purpose: a plan's flow starts when its data is ready, and a kernel whose
data dependency is met at a compute kernel's end (a gradient bucket, a send after its pass)
launches at that boundary, where no wait arises; a receive kernel or a userbuffers exchange is
launched earlier by the host and is resident before its data arrives. Applied at each flow's
release instead, the wait held Megatron-Bridge Llama 3 70B's (TP overlap, pipeline receives)
flows for 3.0 s per GPU and lengthened its iteration by 8 % (11.04 -> 11.93 s), a wait those
kernels do not have.
"""

from __future__ import annotations

import math

import numpy as np

from heterosim.catalog.gpus import GpuSpec
from heterosim.plan.compute.efficiency import EfficiencyParams, gemm_tile_count
from heterosim.plan.execution_plan import COMPUTE, FLOW, ExecutionPlan
from heterosim.workload.trace import OpTemplates

WAVE_TAIL_A = 1.00  # fitted to overlap.json's 12 H100 points: benchmarks/bench_contention.py --fit
WAVE_TAIL_P = 0.80
BLOCK_GBPS = 35.0  # HBM traffic of one copy block, read + write (H100: 294 / 548 / 941 GB/s at 8 / 16 / 32)
COUPLING = 0.36  # share of that traffic a memory-bound kernel beside it loses (LayerNorm, 32 blocks)
ATTENTION_TILE_ROWS = 128  # query rows per CTA tile of the fused attention kernels (FlashAttention-2/3)
P2P_BLOCKS = 2  # NCCL_NCHANNELS_PER_NET_PEER default
MAX_SHARE = 0.9  # ns3::ComputeContention::MaxShare
MEMORY_KINDS = ("norm", "elementwise")


def wave_term(waves: float) -> float:
    """The share of a kernel's time added when some of its SMs are held (0 for no tiles)."""
    return WAVE_TAIL_A * waves**-WAVE_TAIL_P if waves > 0 else 0.0


def op_waves(op_kind: str, shape: tuple, params: EfficiencyParams) -> float:
    """Tiles of a GEMM or fused-attention op over the GPU's SMs (0 for other kinds)."""
    sms = max(int(params.sm_count), 1)
    if op_kind == "gemm":
        m, n, _, batch = (int(x) for x in shape[:4])
        return gemm_tile_count(m, n, max(batch, 1), params) / sms
    if op_kind == "attention":
        batch, seq, heads, _ = (int(x) for x in shape[:4])
        return max(batch, 1) * max(heads, 1) * math.ceil(max(seq, 1) / ATTENTION_TILE_ROWS) / sms
    return 0.0


def op_terms(op_kind: str, shape: tuple, spec: GpuSpec, params: EfficiencyParams) -> tuple[float, float, int]:
    """(wave term, share per block, free SMs it needs) of one op on a GPU
    (``ns3::ComputeContention``'s inputs): the wave term applies only while the blocks leave
    fewer SMs free than the op has tiles (a GEMM of 64 tiles runs whole beside 16 blocks)."""
    sms = max(int(params.sm_count), 1)
    if op_kind == "gemm":
        waves = op_waves(op_kind, shape, params)
        return wave_term(waves), 1.0 / sms, min(int(round(waves * sms)), sms)
    if op_kind == "attention":  # measured: cuDNN's fused attention loses only its SM share
        return 0.0, 1.0 / sms, sms
    if op_kind in MEMORY_KINDS:
        return 0.0, COUPLING * BLOCK_GBPS * 1e9 / spec.memory_bytes_per_s, sms
    return 0.0, 0.0, sms


def slowdown(op_kind: str, shape: tuple, spec: GpuSpec, params: EfficiencyParams, blocks: int) -> float:
    """f(blocks) of one op (the formula ``ns3::ComputeContention`` evaluates; 1 for no blocks)."""
    if blocks <= 0:
        return 1.0
    wave, share, needed = op_terms(op_kind, shape, spec, params)
    tail = 1.0 + wave if blocks > max(int(params.sm_count), 1) - needed else 1.0
    return max(tail, 1.0 / (1.0 - min(blocks * share, MAX_SHARE)))


def template_terms(
    templates: OpTemplates, spec: GpuSpec, params: EfficiencyParams
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(wave term, share per block, blocks above which the wave term applies) per template row
    on one GPU (float64, float64, int32 arrays)."""
    n = len(templates)
    wave, share, above = np.zeros(n), np.zeros(n), np.zeros(n, np.int32)
    names = templates.op_kind_names
    sms = max(int(params.sm_count), 1)
    for i in range(n):
        kind = names[int(templates.op_kind[i])]
        w, s, needed = op_terms(kind, tuple(templates.shape[i]), spec, params)
        wave[i], share[i], above[i] = w, s, sms - needed
    return wave, share, above


def fill_plan_terms(
    plan: ExecutionPlan, template_of_rank: list[np.ndarray], terms_of_rank: list[tuple | None]
) -> None:
    """Give every compute task of ``plan`` its rank's template terms (in place).

    ``template_of_rank[r]`` maps rank ``r``'s trace nodes to template rows; ``terms_of_rank[r]``
    is :func:`template_terms` of its GPU, or None to leave the rank's tasks unslowed.
    """
    compute = np.flatnonzero((plan.kind == COMPUTE) & (plan.rank >= 0))
    by_rank = compute[np.argsort(plan.rank[compute], kind="stable")]
    bounds = np.searchsorted(plan.rank[by_rank], np.arange(len(terms_of_rank) + 1))
    for r, terms in enumerate(terms_of_rank):
        if terms is None:
            continue
        sel = by_rank[bounds[r] : bounds[r + 1]]
        rows = template_of_rank[r][plan.node[sel]]
        plan.contention_wave[sel] = terms[0][rows]
        plan.contention_share[sel] = terms[1][rows]
        plan.contention_above[sel] = terms[2][rows]


def flow_blocks(plan: ExecutionPlan) -> np.ndarray:
    """Blocks each flow's kernel holds on the GPUs it touches (int32, 0 for other tasks): the
    channels of its collective, or :data:`P2P_BLOCKS` for a point-to-point transfer."""
    blocks = np.zeros(len(plan), np.int32)
    channels = np.asarray(plan.collectives.get("channels", np.zeros(0)), np.int64)
    held = np.maximum(channels, 1).astype(np.int32)
    for lo in range(0, len(plan), FLOW_BLOCK_ROWS):  # a block of tasks at a time (memory)
        hi = lo + FLOW_BLOCK_ROWS
        flows = np.flatnonzero(plan.kind[lo:hi] == FLOW)
        inst = plan.collective[lo:hi][flows]
        in_coll = (inst >= 0) & (inst < channels.shape[0])
        part = blocks[lo:hi]
        part[flows] = P2P_BLOCKS
        part[flows[in_coll]] = held[inst[in_coll]]
    return blocks


FLOW_BLOCK_ROWS = 1 << 20  # tasks per block of flow_blocks (its temporaries: ~20 MB)
