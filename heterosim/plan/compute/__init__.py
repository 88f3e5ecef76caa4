"""Compute timing: operation database, roofline with per-GPU efficiency, cross-GPU scaling."""

from heterosim.plan.compute.model import PROVENANCES, ComputeModel, provenance_shares

__all__ = ["PROVENANCES", "ComputeModel", "provenance_shares"]
