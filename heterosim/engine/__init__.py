"""HeteroSim engine package."""
