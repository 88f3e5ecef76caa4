"""Every closed set of names a configuration key can take, defined once.

Config parsing (``Section.string(..., choices=...)``), argparse (``choices=``), the engine's
argument checks and sweep files all read these tuples; nothing else spells them out.
``docs/config.md`` describes what each value means.
"""

from __future__ import annotations

from collections.abc import Iterable

from heterosim.errors import UserError

# simulation.fidelity: RDMA packet network or max-min fluid network (heterosim/engine/)
FIDELITIES = ("packet", "flow")
# the fidelity of an experiment or scenario file that names none
DEFAULT_FIDELITY = "packet"
# the fidelity of runs made without such a file: engine_config(), `heterosim collective`, `validate`
ENGINE_DEFAULT_FIDELITY = "flow"
# simulation.collective_granularity (heterosim/plan/collectives/granularity.py)
GRANULARITIES = ("chunk", "step", "connection")
# simulation.intra_host: flows between GPUs of one host, in packet fidelity
INTRA_HOST_MODELS = ("packet", "flow")
# simulation.queue_pairs: what one RDMA queue pair (or fluid flow) carries
QUEUE_PAIR_MODELS = ("connection", "flow")
# simulation.packet_acceleration: every frame simulated, settled stretches skipped (steady-state
# fast-forward, ns3_modules/rdma/helper/packet-fast-forward.h), repeated contention episodes
# replayed (memoization, ns3_modules/rdma/helper/packet-episode-cache.h), or both
PACKET_ACCELERATIONS = ("exact", "fast", "memo", "fast+memo")
# the default: fast-forward meets the exact run's bar on every case measured, and on
# phase-sensitive incasts in distribution (benchmarks/README.md, "Packet fast-forward");
# memoization stays opt-in (congested episodes are replayed as recorded draws)
DEFAULT_PACKET_ACCELERATION = "fast"
# simulation.memory_check
MEMORY_CHECKS = ("error", "warn")
# network.collective_algorithm / network.collective_protocol ("auto": NCCL's tuning model)
COLLECTIVE_ALGORITHMS = ("auto", "ring", "tree", "nvls")
COLLECTIVE_PROTOCOLS = ("auto", "simple", "ll", "ll128")
# model.moe_routing.distribution: how a router spreads tokens over experts
# (heterosim/config/moe_routing.py, heterosim/workload/routing.py)
MOE_ROUTING_DISTRIBUTIONS = ("uniform", "zipf", "histogram")
# model.moe_routing.drop_policy: Megatron-core's moe_token_drop_policy (which tokens over an
# expert's capacity are dropped; megatron/core/transformer/moe/moe_utils.py)
MOE_DROP_POLICIES = ("probs", "position")
# parallel.cp_comm: how context-parallel attention exchanges K/V (heterosim/workload/cp.py):
# Transformer Engine's ring (AttnFuncWithCPAndKVP2P, Megatron-core cp_comm_type "p2p") or an
# all-gather of K/V before attention (AttnFuncWithCPAndKVAllGather, "all_gather"; Llama 3 §3.3.2)
CP_COMMS = ("p2p", "all_gather")

# network.cc: the config name -> the ns-3 TypeId of the congestion-control class the packet
# network instantiates for every queue pair (ns3_modules/rdma/model/). The C++ side creates the
# class by TypeId name and asks the instance what it needs (INT headers, CNPs, ECN).
CC_TYPE_IDS = {
    "dcqcn": "ns3::Dcqcn",
    "hpcc": "ns3::Hpcc",
    "timely": "ns3::Timely",
    "dctcp": "ns3::Dctcp",
    "none": "ns3::NoCongestionControl",
}
CC_ALGORITHMS = tuple(CC_TYPE_IDS)


def require_choice(where: str, value: str, choices: Iterable[str]) -> str:
    """``value`` if it is one of ``choices``, else a one-line UserError naming ``where``."""
    options = tuple(choices)
    if value not in options:
        raise UserError(f"{where}: expected one of {', '.join(options)}, got {value!r}")
    return value
