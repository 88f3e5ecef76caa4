"""HeteroSim plan/compute package."""
