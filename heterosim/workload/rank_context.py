"""What every part of one rank's trace builder needs: where the rank sits, its dtypes, its templates.

:class:`RankContext` is read by the pieces that build a rank's trace
(heterosim/workload/generator.py ``RankProgram``): the model-chunk units (chunk_units.py), the
pipeline p2p endpoints (pipeline_p2p.py), the schedule walks (walk_*.py) and the optimizer step
(optimizer_step.py). They share its :class:`~heterosim.workload.builder.TemplateTable`, so the
order in which they add templates is the order of the trace's template rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heterosim.catalog.gpus import DTYPE_BYTES
from heterosim.workload.builder import TemplateTable
from heterosim.workload.framework import collective_call_op
from heterosim.workload.ops import OpSpec, main_grad_bytes
from heterosim.workload.ops_base import activation_dtype
from heterosim.workload.trace import COMM_COLL_NODE

if TYPE_CHECKING:
    from heterosim.workload.generator import Workload


class RankContext:
    """One rank of a workload: its coordinates, parallel settings, dtypes and template table."""

    def __init__(self, workload: Workload, rank: int) -> None:
        self.w = workload
        self.rank = rank
        exp = workload.experiment
        self.exp = exp
        self.model, self.training = exp.model, exp.training
        self.par = workload.rank_parallel(rank)
        lay = workload.layout
        self.stage = lay.pp_index(rank)
        self.replica = lay.dp_index(rank)
        self.tp_index = lay.tp_index(rank)
        self.cp_index = lay.cp_index(rank)
        self.mixed_dp = lay.stage_is_mixed(self.stage)
        self.V = self.par.pp * self.par.vpp
        self.templates = TemplateTable()
        self.act_dtype = activation_dtype(self.training.dtype)
        self.grad_bytes = main_grad_bytes(self.training.dtype)
        reduce_dtype = self.training.grad_reduce_dtype
        if reduce_dtype == "auto":  # the main-gradient dtype
            reduce_dtype = "fp16" if self.grad_bytes == 2 else "fp32"
        self.reduce_dtype = reduce_dtype
        self.reduce_bytes = DTYPE_BYTES[reduce_dtype]
        self.param_bytes = 4 if self.training.dtype == "fp32" else 2
        self.micro_batches = workload.partition.replica_micro_batches[self.replica]
        self.ds_zero3 = self.par.zero >= 3 and self.par.zero3_impl == "deepspeed-0.3"
        # framework.collective_overhead: a marker op before every TP collective and pipeline p2p
        # call carries its cost
        self.call_marker = (
            self.templates.add(collective_call_op(self.act_dtype))
            if exp.framework.has_collective_overhead
            else None
        )

    def template(self, op: OpSpec) -> int | None:
        """Template row for ``op``; None for a collective over a one-rank group (nothing to do)."""
        if op.node_type == COMM_COLL_NODE:
            gid = self.w.groups.group_id(self.rank, op.comm_group)
            if gid is None:
                return None
            return self.templates.add(op, gid)
        return self.templates.add(op)

    def framework_op(self, label: str, phase: str, ns: int) -> OpSpec:
        """A host-side framework op of ``ns`` nanoseconds (at least 1)."""
        return OpSpec(label, "framework", phase, self.act_dtype, (max(1, int(ns)), 0, 0, 0))

    def virtual_stage(self, chunk: int) -> int:
        """Virtual pipeline stage of this rank's model chunk ``chunk``."""
        return chunk * self.par.pp + self.stage
