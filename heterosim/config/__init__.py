"""Experiment and cluster configuration: schemas, loading, validation."""
