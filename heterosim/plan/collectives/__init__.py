"""HeteroSim plan/collectives package."""
