"""HeteroSim sweep package."""
