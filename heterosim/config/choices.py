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
# the fidelity of an experiment or scenario file that names none; code that builds its settings
# without a file names the fidelity itself (engine_config(fidelity), the --fidelity defaults of
# `heterosim collective` and `heterosim validate`)
DEFAULT_FIDELITY = "packet"
# simulation.collective_granularity (heterosim/plan/collectives/granularity.py)
GRANULARITIES = ("chunk", "step", "connection")
# simulation.intra_host: flows between GPUs of one host, in packet fidelity
INTRA_HOST_MODELS = ("packet", "flow")
# simulation.queue_pairs: what one RDMA queue pair (or fluid flow) carries
QUEUE_PAIR_MODELS = ("connection", "flow")
# simulation.replicas: every data-parallel replica simulated, or one replica with its
# data-parallel collectives timed on the full fabric (heterosim/plan/fold.py)
REPLICA_MODES = ("all", "fold")
# simulation.fold_timing: every folded communicator simulated, or one of each set of
# interchangeable link-disjoint components (heterosim/simulate/fold_symmetry.py)
FOLD_TIMINGS = ("all", "representative")
# simulation.packet_acceleration: every frame simulated, settled stretches skipped (steady-state
# fast-forward, ns3_modules/rdma/model/packet-fast-forward.h), repeated contention episodes
# replayed (memoization, ns3_modules/rdma/model/packet-episode-cache.h), or both
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
# training.attention_kernel (besides "auto"): the attention implementations the compute model's
# kernel tables hold (heterosim/plan/compute/data/; a test keeps the tables to these names)
ATTENTION_KERNELS = ("cudnn", "flash-attention-2", "flash-attention-triton")
# parallel.cp_comm: how context-parallel attention exchanges K/V (heterosim/workload/cp.py):
# Transformer Engine's ring (AttnFuncWithCPAndKVP2P, Megatron-core cp_comm_type "p2p") or an
# all-gather of K/V before attention (AttnFuncWithCPAndKVAllGather, "all_gather"; Llama 3 §3.3.2)
CP_COMMS = ("p2p", "all_gather")
# parallel.cp_impl: whose context-parallel attention runs it (heterosim/workload/cp.py):
# Transformer Engine's (Megatron-core, NeMo) or PyTorch's experimental context_parallel
# (torch.distributed.tensor.experimental, as torchtitan calls it: one SDPA call per K/V chunk,
# outputs merged in fp32, dK/dV rotated in fp32)
CP_IMPLS = ("transformer_engine", "pytorch")
# parallel.tp_comm_overlap_method: which TP overlap runs with parallel.tp_comm_overlap
# (heterosim/workload/tp_overlap.py): Transformer Engine's userbuffers (Megatron-core / NeMo) or
# PyTorch's async TP (torch._inductor micro_pipeline_tp + SymmetricMemory fused matmuls)
TP_OVERLAP_METHODS = ("userbuffers", "torch_async_tp")

# training.recompute: activation recomputation: none, Megatron's selective (core attention,
# Korthikanti et al. 2022), torchtitan's op-level selective AC (every second linear GEMM and the
# non-GEMM ops re-run, heterosim/workload/op_sac.py) or full (the whole layer)
RECOMPUTE = ("none", "selective", "selective_op", "full")

# network.cc: the config name -> the ns-3 TypeId of the congestion-control class the packet
# network instantiates for every queue pair (ns3_modules/rdma/model/). The C++ side creates the
# class by TypeId name and asks the instance what it needs (INT headers, CNPs, ECN).
CC_TYPE_IDS = {
    "dcqcn": "ns3::Dcqcn",
    "hpcc": "ns3::Hpcc",
    "timely": "ns3::Timely",
    "dctcp": "ns3::Dctcp",
    "none": "ns3::NoCongestionControl",
    "nscc": "ns3::Nscc",
    "rccc": "ns3::Rccc",
}
CC_ALGORITHMS = tuple(CC_TYPE_IDS)

# network.load_balancing: how leaf and spine switches choose among equal-cost ports
# (PacketNetwork::LoadBalancing; every mode but ecmp is a ns3::LoadBalancer Mode,
# ns3_modules/switch/model/load-balancer.h): by flow hash, per flowlet (random port), per packet
# to the least-loaded port, per flowlet to the least-loaded port, per packet at random, per
# packet round-robin
LOAD_BALANCING = ("ecmp", "flowlet", "adaptive", "adaptive_flowlet", "spray", "spray_rr")
# the modes that move packets of one flow between paths at any time, so its packets arrive
# out of order; a transport that cannot reorder (go-back-N) loses throughput under them
REORDERING_LOAD_BALANCING = ("adaptive", "spray", "spray_rr")
# the modes that spread every flow's packets evenly over the equal-cost paths (per packet)
SPRAYING_LOAD_BALANCING = ("spray", "spray_rr")
# network.transport: the RDMA NIC's loss recovery (ns3::RdmaNic Transport): roce (go-back-N),
# irn (selective acknowledgement and retransmission, Mittal et al., SIGCOMM 2018) or uet (the
# Ultra Ethernet transport, UET 1.0: per-packet entropy spraying, selective acknowledgement, a
# lossy fabric)
TRANSPORTS = ("roce", "irn", "uet")
# the transports that deliver in order from packets that arrive out of order
REORDERING_TRANSPORTS = ("irn", "uet")
# network.cc with network.transport: uet: UET 1.0 defines NSCC (sender-based) and RCCC
# (receiver credits, ns3::Rccc); the first is the default
UET_CCS = ("nscc", "rccc")
# the congestion controls only the UET transport runs (the receiver's credit pacer of RCCC)
UET_ONLY_CCS = ("rccc",)


def require_choice(where: str, value: str, choices: Iterable[str]) -> str:
    """``value`` if it is one of ``choices``, else a one-line UserError naming ``where``."""
    options = tuple(choices)
    if value not in options:
        raise UserError(f"{where}: expected one of {', '.join(options)}, got {value!r}")
    return value
