"""HeteroSim plan package."""
