"""HeteroSim: LLM training iterations on heterogeneous GPU clusters, simulated on ns-3."""

__version__ = "0.1.0"
