"""HeteroSim report package."""
