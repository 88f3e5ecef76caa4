"""Plan search (``heterosim plan``): enumerate parallel layouts, prune them by validity and
memory, pre-rank them analytically, simulate the most promising in flow fidelity and rank them."""
