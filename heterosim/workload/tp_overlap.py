"""Tensor-parallel communication overlap as Transformer Engine's userbuffers run it.

With ``parallel.tp_comm_overlap`` (Megatron-core ``tp_comm_overlap``, NeMo
``ub_tp_comm_overlap``; it needs sequence parallelism) the sequence-parallel collectives of a
layer run under its GEMMs instead of before or after them. The methods follow the userbuffers
configurations NeMo ships (e.g. its H100 configs: ``qkv_fprop``/``fc1_fprop``/``proj_dgrad``/
``fc2_dgrad: ring_exchange``, ``proj_fprop``/``fc2_fprop: pipeline`` with ``num_splits: 4``,
``qkv_dgrad``/``qkv_wgrad``/``fc1_dgrad``/``fc1_wgrad: bulk``):

- ring exchange: the all-gather before a GEMM (QKV and fc1 forward, out_proj and fc2 dgrad) is
  exchanged chunk by chunk around the TP ring while the GEMM works on the chunks it has, so the
  all-gather runs beside the GEMM and what follows waits for both;
- pipeline: the reduce-scatter after the out_proj and fc2 forward GEMMs is split in
  ``PIPELINE_SPLITS`` chunks, each reduced while the GEMM computes the next: all but the last
  chunk run beside the GEMM, the last one after it;
- bulk: in the backward of QKV and fc1 the all-gather of the stored input runs beside the dgrad
  GEMM and the reduce-scatter of the input gradient beside the wgrad GEMM.

With ``parallel.tp_comm_overlap_method: torch_async_tp`` the overlap is PyTorch's async TP
instead (torch.compile with ``torch._inductor.config._micro_pipeline_tp``, as torchtitan's
``enable_async_tp`` sets it). Its post-grad pass (torch/_inductor/fx_passes/micro_pipeline_tp.py,
run on every compiled graph, forward and backward alike) fuses only two patterns:

- ``fuse_all_gather_matmul``: an all-gather whose result is the left operand of matmuls
  (``_find_consumer_matmuls``: users that are ``mm(A, B)`` with A the gathered tensor) becomes
  one ``fused_all_gather_matmul`` (torch/distributed/_symmetric_memory/__init__.py): the local
  shard's GEMM runs first while the other shards are pulled from the peers' symmetric buffers by
  the copy engine, one GEMM per shard. Forward (and recomputed forward): the gathers before
  QKV and fc1; backward: the gather of the output gradient before the out_proj and fc2 dgrad.
  The backward gather of the stored input (for the QKV/fc1 wgrad, ``grad.t() @ x``: the
  gathered tensor is the right operand) is not fused and stays exposed.
- ``fuse_matmul_reduce_scatter``: a reduce-scatter whose input is a single matmul with no other
  user (``_find_producer_matmul``, ``len(input_node.users) != 1`` rejected) becomes
  ``fused_matmul_reduce_scatter``: the chunk for each peer is computed and written to it while
  the next is computed, the local chunk last, then a local sum. Forward: after out_proj and fc2,
  the whole reduce-scatter beside the GEMM. In the backward the reduce-scatter of the input
  gradient sums the dgrads of several linears (torchtitan's Llama: wq/wk/wv and w1/w3 are
  separate ``nn.Linear``), so its input is an add, not a matmul: not fused, exposed.

The collectives keep their NCCL decomposition and channels (userbuffers' own kernels take 1-32
SMs; the SymmetricMemory copies run on the copy engine; approximate), and the GEMMs beside them
are slowed by ``simulation.compute_contention``. Both fused ops run one GEMM per shard
(``_fused_all_gather_matmul`` calls the matmul on each gathered shard as it lands;
``_fused_matmul_reduce_scatter`` computes each peer's output chunk with its own matmul), so
each fused GEMM becomes ``tp`` GEMMs of ``M / tp`` rows (same N, K), timed one by one with their
own (lower) efficiency: all-gather local shard first, then the peers in ring order;
reduce-scatter the peers' chunks first, the local chunk last. FLOPs are conserved exactly; each
shard GEMM reads the whole weight (no reuse across GEMMs assumed), so the bytes grow by
``(tp - 1)`` weight reads. APPROXIMATION (torch_async_tp): the local sum
after ``fused_matmul_reduce_scatter`` is not a separate kernel (the NCCL reduce-scatter's timing
holds the reduction), the shard GEMM is the simulator's fused QKV (fc1) GEMM where PyTorch runs
one per weight (wq/wk/wv, w1/w3: 3 or 2 GEMMs per shard), and models whose QKV or fc1 is one
linear (where the backward reduce-scatter would be fused) are still treated as torchtitan's Llama.
"""

from __future__ import annotations

from dataclasses import replace

from heterosim.catalog.gpus import DTYPE_BYTES
from heterosim.config.choices import TP_OVERLAP_METHODS
from heterosim.workload.ops_base import OpSpec

PIPELINE_SPLITS = 4  # NeMo userbuffers configs: proj_fprop / fc2_fprop num_splits 4


def _is_tp(op: OpSpec, kind: str) -> bool:
    return op.is_comm and op.comm_group == "tp" and op.label.startswith(f"tp_{kind}")


def overlap_tp_comms(ops: list[OpSpec], method: str = "userbuffers", tp: int = 1) -> list[OpSpec]:
    """``ops`` (one layer's forward or backward, in chain order) with their sequence-parallel
    all-gathers and reduce-scatters overlapped with the GEMMs next to them as ``method`` runs
    them (module docstring); ``tp``: the TP degree (torch_async_tp's per-shard GEMMs)."""
    if method not in TP_OVERLAP_METHODS:
        raise ValueError(f"unknown TP overlap method {method!r}; expected one of {TP_OVERLAP_METHODS}")
    return _userbuffers(ops) if method == "userbuffers" else _torch_async_tp(ops, tp)


def _userbuffers(ops: list[OpSpec]) -> list[OpSpec]:
    out: list[OpSpec] = []
    i = 0
    while i < len(ops):
        op = ops[i]
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        if op.overlap_next or op.label.endswith(".last_chunk"):  # already placed (recompute)
            out.append(op)
        elif _is_tp(op, "allgather") and nxt is not None and nxt.op_kind == "gemm":
            out.append(replace(op, overlap_next=1))  # ring exchange / bulk beside the next GEMM
        elif _is_tp(op, "reducescatter") and op.phase == "bwd" and nxt is not None and nxt.op_kind == "gemm":
            out.append(replace(op, overlap_next=1))  # bulk beside the wgrad
        elif _is_tp(op, "reducescatter") and op.phase != "bwd" and out and out[-1].op_kind == "gemm":
            gemm = out.pop()
            head = op.comm_bytes * (PIPELINE_SPLITS - 1) // PIPELINE_SPLITS
            out += [
                replace(op, label=f"{op.label}.overlapped", comm_bytes=head, overlap_next=1),
                gemm,
                replace(op, label=f"{op.label}.last_chunk", comm_bytes=op.comm_bytes - head),
            ]
        else:
            out.append(op)
        i += 1
    return out


def _torch_async_tp(ops: list[OpSpec], tp: int) -> list[OpSpec]:
    """Only the collectives PyTorch's micro-pipeline TP pass fuses run beside their GEMM, which
    runs as one GEMM per shard."""
    out: list[OpSpec] = []
    skip = False
    for i, op in enumerate(ops):
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        if skip:  # the GEMM just split after its fused all-gather
            skip = False
        elif op.overlap_next:  # already placed (full recompute re-runs the overlapped forward)
            out.append(op)
        elif _is_tp(op, "allgather") and nxt is not None and nxt.op_kind == "gemm" and _gathers_lhs(op, nxt):
            shards = shard_gemm(nxt, tp, local_first=True)  # fused_all_gather_matmul
            out += [replace(op, overlap_next=len(shards)), *shards]
            skip = True
        elif _is_tp(op, "reducescatter") and op.phase != "bwd" and out and out[-1].op_kind == "gemm":
            shards = shard_gemm(out.pop(), tp, local_first=False)  # fused_matmul_reduce_scatter
            out += [replace(op, overlap_next=len(shards)), *shards]
        else:
            out.append(op)  # backward reduce-scatters and input re-gathers: exposed
    return out


def shard_gemm(gemm: OpSpec, tp: int, local_first: bool) -> list[OpSpec]:
    """``gemm`` (C[M,N] = A[M,K] @ B[K,N]) as the ``tp`` GEMMs of ``M / tp`` rows the fused
    SymmetricMemory ops run, labelled ``.local`` and ``.peer{step}`` in issue order (the local
    shard first when ``local_first``, else last). The rows (and FLOPs) are split exactly (the
    first ``M % tp`` shards take one more row); every shard re-reads the whole weight B."""
    m, n, k, batch = gemm.shape
    if tp <= 1 or m < tp:
        return [gemm]
    weight = min(k * n * batch * DTYPE_BYTES[gemm.dtype], gemm.bytes_moved)  # B, as ops_base.gemm
    rest = gemm.bytes_moved - weight  # A read + C written: in proportion to the rows
    names = ["local", *(f"peer{step}" for step in range(1, tp))]
    order = names if local_first else names[1:] + names[:1]
    out = []
    done = 0  # rows before this shard; integer cumulative splits keep the sums exact
    for j, name in enumerate(order):
        rows = m // tp + (1 if j < m % tp else 0)
        upto = done + rows
        flops = gemm.flops * upto // m - gemm.flops * done // m
        moved = weight + rest * upto // m - rest * done // m
        out.append(
            replace(
                gemm, label=f"{gemm.label}.{name}", shape=(rows, n, k, batch), flops=flops, bytes_moved=moved
            )
        )
        done = upto
    return out


def _gathers_lhs(gather: OpSpec, gemm: OpSpec) -> bool:
    """Whether the gathered tensor is the left operand of ``gemm``: forward inputs and backward
    output gradients (dgrad), not the backward re-gather of a stored input (wgrad's right operand)."""
    if gather.phase != "bwd":
        return True
    return gemm.label.endswith(".dgrad") and not gather.label.endswith("_input.bwd")
