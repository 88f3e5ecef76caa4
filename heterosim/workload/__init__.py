"""Workload layer: model + parallel strategy -> per-rank traces."""
