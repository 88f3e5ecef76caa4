"""Shipped compute-model data: publication tables and per-GPU model inputs (YAML)."""
