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

The collectives keep their NCCL decomposition and channels (userbuffers' own kernels take 1-32
SMs; approximate), and the GEMMs beside them are slowed by ``simulation.compute_contention``.
"""

from __future__ import annotations

from dataclasses import replace

from heterosim.workload.ops_base import OpSpec

PIPELINE_SPLITS = 4  # NeMo userbuffers configs: proj_fprop / fc2_fprop num_splits 4


def _is_tp(op: OpSpec, kind: str) -> bool:
    return op.is_comm and op.comm_group == "tp" and op.label.startswith(f"tp_{kind}")


def overlap_tp_comms(ops: list[OpSpec]) -> list[OpSpec]:
    """``ops`` (one layer's forward or backward, in chain order) with their sequence-parallel
    all-gathers and reduce-scatters overlapped with the GEMMs next to them (module docstring)."""
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
