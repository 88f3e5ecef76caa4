"""NCCL-style decomposition of collectives into point-to-point flows (ring, tree, NVLS, p2p).

Entry point: :func:`decompose_collective` -> :class:`CollectivePlan` (a sub-DAG in the
execution-plan layout). The tuning model lives in :mod:`.tuning`.
"""

from heterosim.plan.collectives.decompose import decompose_collective
from heterosim.plan.collectives.graph import CollectivePlan

__all__ = ["CollectivePlan", "decompose_collective"]
