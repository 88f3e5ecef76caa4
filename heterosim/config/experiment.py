"""Experiment files: model, training, parallel strategy, cluster, network and simulation settings.

``load_experiment(path, overrides)`` reads the YAML, applies ``--set key=value`` overrides,
resolves the cluster file relative to the experiment, and validates everything before any
simulation starts. Errors name the file, the dotted key and the expectation.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from heterosim.catalog.models import ModelConfig, resolve_model
from heterosim.config.choices import (
    ATTENTION_KERNELS,
    CC_ALGORITHMS,
    COLLECTIVE_ALGORITHMS,
    COLLECTIVE_PROTOCOLS,
    CP_COMMS,
    CP_IMPLS,
    DEFAULT_FIDELITY,
    DEFAULT_PACKET_ACCELERATION,
    FIDELITIES,
    FOLD_TIMINGS,
    GRANULARITIES,
    INTRA_HOST_MODELS,
    LOAD_BALANCING,
    MEMORY_CHECKS,
    PACKET_ACCELERATIONS,
    QUEUE_PAIR_MODELS,
    RECOMPUTE,
    REPLICA_MODES,
    TP_OVERLAP_METHODS,
    TRANSPORTS,
    UET_CCS,
)
from heterosim.config.cluster import MAX_GPUS, ClusterConfig, load_cluster, parse_cluster
from heterosim.config.degenerate import network_warnings, run_sample_warnings
from heterosim.config.fabric import check_load_balancing, check_uet
from heterosim.config.faults import FaultSpec, fault_warnings, parse_faults
from heterosim.config.fields import Section, parse_override_value, plain_name, read_yaml_mapping
from heterosim.config.limits import simulated_time_floor_ns
from heterosim.config.moe_routing import check_routing_tokens
from heterosim.config.network_model import NetworkModel, network_model
from heterosim.config.replicas import check_replica_folding
from heterosim.errors import UserError

SCHEDULES = ("1f1b", "gpipe", "interleaved")
DTYPES = ("bf16", "fp16", "fp8", "fp32")
PARTITIONS = ("auto", "uniform")  # or an explicit list of layers per (virtual) stage
GRAD_REDUCE_DTYPES = ("auto", "fp32", "bf16", "fp16")
GRAD_SYNC = ("overlap", "after_backward")
FRAME_OVERHEADS = ("roce", "none")  # flow fidelity frame bytes on network links
P2P_SYNC = ("overlap", "blocking")  # pipeline send/recv and the compute stream
ZERO3_IMPLS = ("overlap", "deepspeed-0.3")  # heterosim/workload/zero3.py
RANK_ORDERS = ("tp-dp-pp", "tp-pp-dp", "dp-tp-pp")
ATTENTION = ("flash", "unfused")
# fused: Megatron-core / Transformer Engine kernels (fused RoPE, SwiGLU, bias-GeLU, weight
# gradients accumulated inside the wgrad GEMM); eager: plain PyTorch (heterosim/workload/ops_eager.py)
KERNELS = ("fused", "eager")
FRAMEWORKS = ("megatron", "deepspeed")

# Physical ranges of the numeric keys (a value outside is a one-line error before any work;
# whether a value inside them fits this machine is heterosim.config.limits' job).
MAX_GLOBAL_BATCH = 10**7  # sequences per step; the largest published runs use ~10^4
MAX_MICRO_BATCH = 65_536
MAX_SEQ_LEN = 1 << 22  # 4M tokens
MAX_STAGES = 10_000  # parallel.stages: each holds a layer or more (stages[].layers <= 10,000)
MAX_PARALLEL = 1 << 20  # tp, pp, dp, ep, vpp: no cluster has a million GPUs in one dimension
DP_BUCKET_RANGE = (1 << 10, 64 << 30)  # 1KiB..64GiB (Megatron 40MB, DeepSpeed 500MB defaults)
BUFFER_RANGE = (4 << 10, 16 << 30)  # per switch: 4KiB..16GiB (shipping switches: 8..256 MB)
MAX_SEED = 2**32 - 1  # ns-3's RngSeedManager takes a 32-bit seed; larger ones would alias
MIN_SAMPLE_INTERVAL_NS = 1_000  # 1us: a finer interval stores more samples than it resolves


@dataclass(frozen=True)
class TrainingConfig:
    global_batch: int  # sequences per optimizer step
    micro_batch: int
    seq_len: int
    dtype: str
    recompute: str
    # flash: one fused FlashAttention kernel; unfused: Megatron-LM v1-v2 core attention (batched
    # QK^T GEMM, fused scale-mask-softmax, attention dropout, batched PV GEMM; s x s scores stored)
    attention: str = "flash"
    # dtype of the data-parallel gradient reduction; auto: the main-gradient dtype (fp32 for
    # bf16/fp8, fp16 for fp16); fp32 e.g. for DeepSpeed's fp32_allreduce
    grad_reduce_dtype: str = "auto"
    # the fused attention kernel's published table that times attention (plan/compute/data/
    # published_kernels.yaml `impl`); auto: each GPU's own (gpu_compute.yaml `attention_impl`)
    attention_kernel: str = "auto"
    # how the elementwise work around the GEMMs runs: KERNELS
    kernels: str = "fused"


@dataclass(frozen=True)
class ReplicaPlan:
    """One data-parallel replica of one pipeline stage in an explicit plan."""

    gpu: str  # canonical GPU name (the cluster's own ``gpus:`` or the catalogue's)
    tp: int = 1
    micro_batches: int | None = None  # None: split by speed (partition auto) or evenly


@dataclass(frozen=True)
class StagePlan:
    """One pipeline stage: its transformer layers and its replicas (replica i joins pipeline i)."""

    layers: int
    replicas: tuple[ReplicaPlan, ...]


@dataclass(frozen=True)
class StagedPlan:
    """An explicit heterogeneous plan (``parallel.stages``), as planners such as Sailor, Metis
    or AMP produce it: per stage its layers, per replica its GPU type, TP degree and (optionally)
    micro-batch count. Replica ``i`` of every stage forms pipeline ``i``."""

    stages: tuple[StagePlan, ...]

    @property
    def pp(self) -> int:
        return len(self.stages)

    @property
    def dp(self) -> int:
        return len(self.stages[0].replicas)

    @property
    def world_size(self) -> int:
        return sum(r.tp for s in self.stages for r in s.replicas)

    def replica(self, stage: int, replica: int) -> ReplicaPlan:
        return self.stages[stage].replicas[replica]

    def stage_tp(self, stage: int) -> tuple[int, ...]:
        return tuple(r.tp for r in self.stages[stage].replicas)

    def pipeline_micro_batches(self, replica: int) -> int | None:
        """The micro-batches pipeline ``replica`` was given (in any stage), or None."""
        given = {s.replicas[replica].micro_batches for s in self.stages} - {None}
        return next(iter(given)) if given else None

    def as_dict(self) -> list[dict]:
        """The plan as ``parallel.stages`` YAML (what an importer or planner writes)."""
        out = []
        for stage in self.stages:
            replicas = []
            for r in stage.replicas:
                item: dict = {"gpu": r.gpu, "tp": r.tp}
                if r.micro_batches is not None:
                    item["micro_batches"] = r.micro_batches
                replicas.append(item)
            out.append({"layers": stage.layers, "replicas": replicas})
        return out


@dataclass(frozen=True)
class ParallelConfig:
    """``parallel``: each default here is the one a file that omits the key gets (``dp`` is
    required in a file); code that builds one names only what differs."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    schedule: str = "1f1b"
    vpp: int = 1
    zero: int = 0
    sequence_parallel: bool = False
    partition: str = "auto"  # auto | uniform | explicit (layers per stage in stage_layers)
    dp_bucket_bytes: int = 40_000_000  # 40MB (DP_BUCKET_RANGE names the frameworks' defaults)
    rank_order: str = "tp-dp-pp"
    distributed_optimizer: bool = False
    zero3_prefetch: int = 1
    # partition: explicit: transformer layers of each virtual stage v = chunk * pp + stage
    stage_layers: tuple[int, ...] = ()
    # overlap: gradient buckets are reduced as the last backward produces them (Megatron DDP);
    # after_backward: once that backward has finished (DeepSpeed's pipeline engine ReduceGrads)
    grad_sync: str = "overlap"
    # ZeRO-3 implementation (heterosim/workload/zero3.py): overlap (FSDP / DeepSpeed >= 0.5
    # prefetching) or deepspeed-0.3 (2021 DeepSpeed: per-tensor blocking fetches)
    zero3_impl: str = "overlap"
    zero3_persistence_threshold: int = 100_000  # stage3_param_persistence_threshold (elements)
    zero3_max_reuse_distance: int = 1_000_000_000  # stage3_max_reuse_distance (elements)
    # pipeline send/recv: overlap (compute goes on while a send is in flight) or blocking (the
    # rank's compute waits for its sends too: Megatron-LM batch_isend_irecv + req.wait() +
    # torch.cuda.synchronize(), batch_p2p_sync; heterosim/workload/generator.py)
    p2p_sync: str = "overlap"
    # Megatron-LM's scatter/gather pipeline optimisation (SC'21 §4.1; --scatter-gather-tensors-in-
    # pipeline, default on in Megatron-LM v2-v3): without sequence parallelism each TP rank sends
    # 1/tp of the activation and the receiving TP group all-gathers it over NVLink
    p2p_scatter_gather: bool = False
    # Transformer Engine userbuffers (Megatron-core / NeMo tp_comm_overlap): the sequence-parallel
    # all-gathers and reduce-scatters run under the GEMMs (heterosim.workload.tp_overlap)
    tp_comm_overlap: bool = False
    # which overlap: "userbuffers" (Transformer Engine) or "torch_async_tp" (PyTorch's
    # micro-pipeline TP: only the collectives its compiler pass fuses; heterosim.workload.tp_overlap)
    tp_comm_overlap_method: str = "userbuffers"
    # the column-parallel backward's TP collectives asynchronous, beside the dgrad / wgrad GEMMs
    # (Megatron-LM since 2021-08, Transformer Engine; heterosim.workload.ops_layer
    # _column_parallel_bwd); None ("auto" in a file) until load_experiment resolves it
    # (backward_overlap)
    tp_backward_overlap: bool | None = None
    # context parallelism (heterosim/workload/cp.py): each sequence is cut into 2*cp chunks and
    # every rank of a CP group holds two of them; K/V travel by ring p2p or all-gather
    cp: int = 1
    cp_comm: str = "p2p"
    cp_impl: str = "transformer_engine"  # CP_IMPLS
    # parallel.stages: an explicit heterogeneous plan; then pp/dp are its sizes, tp the largest
    # replica TP degree, partition "explicit" with stage_layers from the plan
    plan: StagedPlan | None = None
    # with parallel.stages: how pipelines without micro_batches share the rest of the batch
    # (auto: in proportion to their speed; uniform: evenly)
    micro_batch_split: str = "auto"

    def backward_overlap(self, framework: str = "megatron") -> bool:
        """Whether the column-parallel backward's TP collectives run beside its GEMMs:
        ``tp_backward_overlap`` where set, else (auto) as ``framework``'s TP layers do: Megatron-LM
        and Transformer Engine yes; DeepSpeed (Megatron-LM v1.1.5's mpu) and PyTorch's own TP
        (``tp_comm_overlap_method: torch_async_tp``, DTensor) no."""
        if self.tp_backward_overlap is not None:
            return self.tp_backward_overlap
        return framework == "megatron" and not (
            self.tp_comm_overlap and self.tp_comm_overlap_method == "torch_async_tp"
        )


PARALLEL_DEFAULTS = ParallelConfig()  # what a file's parallel section gets for each key it omits


# Host time per compute op (forward, backward) of an eager layer pass, per architecture: measured
# on the H100 machine whose layers ship in validation/ (heterosim/plan/compute/host_dispatch.py
# says how; validation/h100_2026-11-27b/host_dispatch.json).
HOST_DISPATCH_NS = {"gpt": (42_000, 79_000), "llama": (77_000, 136_000)}
# The same machine's host time per kernel (tiny twins: pass time / kernels launched, median over
# the 14 dense layers): with training.kernels: eager the op lists hold one op per kernel.
HOST_DISPATCH_PER_KERNEL_NS = (36_000, 42_000)


@dataclass(frozen=True)
class HostDispatch:
    """``framework.host_dispatch``: host time per compute op of a layer's forward and backward
    pass, pipelined with the GPU (heterosim.plan.compute.host_dispatch). None: the measured
    value for the model's architecture; 0 for both turns the model off."""

    forward_ns: int | None = None
    backward_ns: int | None = None

    def per_op_ns(self, arch: str, kernels: str = "fused") -> tuple[int, int]:
        """(forward, backward) host ns per compute op for a model of ``arch`` whose op lists
        follow ``kernels`` (TrainingConfig.kernels)."""
        if kernels == "eager":
            f, b = HOST_DISPATCH_PER_KERNEL_NS
        else:
            f, b = HOST_DISPATCH_NS.get(arch, HOST_DISPATCH_NS["gpt"])
        return (
            f if self.forward_ns is None else self.forward_ns,
            b if self.backward_ns is None else self.backward_ns,
        )

    def per_kernel_ns(self, arch: str, kernels: str = "fused") -> tuple[int, int]:
        """(forward, backward) host ns of an op that is one kernel (a context-parallel copy or
        merge): the measured per-kernel rate, or the per-op rate where that is lower."""
        per_op = self.per_op_ns(arch, kernels)
        forward, backward = HOST_DISPATCH_PER_KERNEL_NS
        return min(per_op[0], forward), min(per_op[1], backward)

    @property
    def enabled(self) -> bool:
        return self.forward_ns != 0 or self.backward_ns != 0


@dataclass(frozen=True)
class FrameworkConfig:
    """The training software's own costs (heterosim.workload.framework documents each one).

    ``name``: megatron (Megatron-LM's 1F1B engine: activations as one tensor per p2p, every TP
    rank sending its replica, sends not blocking the rank) or deepspeed (DeepSpeed's
    PipelineEngine with Megatron's GPT2ModelPipe: TrainSchedule instruction order, blocking p2p,
    the attention mask with every activation, TP>1 activations partitioned across the TP ranks
    and re-gathered). ``layer_forward_passes``: how many times the code evaluates each
    transformer layer's forward (1 normally; the backward runs once).
    ``host_op_overhead_ns``: host (CPU) time per compute kernel that the GPU waits for, per GPU
    type (``"*"`` for any other), added to every compute op of that GPU.
    ``collective_overhead_ns``: time each communication call (a TP collective, a pipeline p2p
    call) costs the GPU before its transfer starts, per GPU type (marker ops carry it).
    ``host_dispatch``: the eager host's time per op, pipelined with the GPU per layer pass; not
    applied where ``host_op_overhead`` is given (that serial cost already holds the host's time).
    """

    name: str = "megatron"
    layer_forward_passes: int = 1
    host_op_overhead_ns: tuple[tuple[str, int], ...] = ()
    collective_overhead_ns: tuple[tuple[str, int], ...] = ()
    host_dispatch: HostDispatch = HostDispatch()

    @property
    def pipelined_host_dispatch(self) -> HostDispatch:
        """The host dispatch model in force: off where a serial host overhead is given."""
        if any(ns > 0 for _, ns in self.host_op_overhead_ns):
            return HostDispatch(0, 0)
        return self.host_dispatch

    def host_overhead_ns(self, gpu: str) -> int:
        """Host time per compute op for ``gpu`` (catalogue name), 0 when none is given."""
        table = dict(self.host_op_overhead_ns)
        return int(table.get(gpu, table.get("*", 0)))

    def tp_collective_overhead_ns(self, gpu: str) -> int:
        """Time a TP collective or p2p call costs the calling GPU beyond its transfer (0: none)."""
        table = dict(self.collective_overhead_ns)
        return int(table.get(gpu, table.get("*", 0)))

    @property
    def has_collective_overhead(self) -> bool:
        return any(ns > 0 for _, ns in self.collective_overhead_ns)


@dataclass(frozen=True)
class NetworkConfig:
    cc: str
    mtu_bytes: int
    pfc: bool
    buffer_bytes: int  # per switch, shared
    ecmp: bool
    attributes: dict[str, Any] = field(default_factory=dict)  # ns-3 attribute overrides by name
    collective_algorithm: str = "auto"  # auto | ring | tree | nvls
    collective_protocol: str = "auto"  # auto | simple | ll | ll128
    channels: int = 0  # 0 = from the topology
    # flow fidelity: RoCEv2 frame bytes per MTU of payload on network links (heterosim/engine/
    # fluid.py); network.frame_overhead: roce (the default of parsed experiments) | none (0)
    frame_overhead: str = "none"
    # faults: time from a link going down or up until the routes follow (0 = at once)
    routing_delay_ns: int = 0
    # packet fidelity: choice among equal-cost ports at leaf/spine switches (choices.LOAD_BALANCING)
    load_balancing: str = "ecmp"
    # flowlet and adaptive_flowlet: a gap this long starts a new flowlet (LoadBalancer::FlowletGap,
    # CONGA's 500 us)
    flowlet_gap_ns: int = 500_000
    transport: str = "roce"  # RDMA loss recovery: roce (go-back-N) | irn (selective)
    # run per-packet load balancing over go-back-N anyway (heterosim.config.fabric)
    accept_reordering: bool = False
    # packet fidelity, transport uet: switches trim the data packets they cannot buffer to their
    # header instead of dropping them (RdmaSwitch::Trimming; heterosim.config.fabric)
    trimming: bool = False
    source: str = field(default="", compare=False)  # the file, for messages


@dataclass(frozen=True)
class SimulationConfig:
    fidelity: str
    seed: int
    iterations: int
    sample_interval_ns: int = 10_000  # time series (queues, flows in flight); 0 = none
    # chunk: NCCL's schedule chunk by chunk; step: one flow per step and channel; connection:
    # one flow per (src, dst) GPU pair per collective (heterosim.plan.collectives.granularity)
    collective_granularity: str = "chunk"
    # error: a rank whose estimated memory exceeds its GPU's stops the run; warn: run anyway and
    # report it (for configurations known to fit, where the estimate is conservative)
    memory_check: str = "error"
    # packet fidelity only: flows between GPUs of one host as frames on NVLink/PCIe (packet) or
    # as max-min fluid transfers on the same links (flow); host links carry no inter-host flow
    intra_host: str = "packet"
    # connection: a collective's flows on one NCCL connection (channel, source, destination) are
    # messages on one queue pair, sent one after another, as NCCL drives them; flow: every flow
    # (every in-flight chunk) is its own queue pair with its own share of a link
    queue_pairs: str = "connection"
    # packet fidelity only: exact simulates every frame; fast (the default) skips settled
    # stretches of the fabric analytically (steady-state fast-forward,
    # ns3_modules/rdma/model/packet-fast-forward.h); memo / fast+memo also replay repeated episodes
    packet_acceleration: str = DEFAULT_PACKET_ACCELERATION
    # with faults: also run the same plan without them and report what the faults cost
    # (results.json fault_impact); doubles the simulation time
    fault_baseline: bool = False
    # compute on a GPU slows down while communication kernels run beside it
    # (heterosim.plan.compute.contention); false: compute and communication overlap for free
    compute_contention: bool = True
    # all: every data-parallel replica simulated; fold: replica 0 only, its data-parallel
    # collectives timed once on the full fabric (heterosim.plan.fold; config.replicas checks)
    replicas: str = "all"
    # with replicas: fold: all: every folded communicator in the timing run; representative:
    # one of each set of interchangeable link-disjoint components (heterosim/simulate/fold_symmetry.py)
    fold_timing: str = "all"

    @property
    def network_model(self) -> NetworkModel:
        """The network model :attr:`fidelity` names (what it can do; no fidelity name compared)."""
        return network_model(self.fidelity)


@dataclass(frozen=True)
class ExperimentConfig:
    name: str
    model: ModelConfig
    training: TrainingConfig
    parallel: ParallelConfig
    cluster: ClusterConfig
    network: NetworkConfig
    simulation: SimulationConfig
    source: str = ""
    framework: FrameworkConfig = field(default_factory=FrameworkConfig)
    resolved: dict[str, Any] = field(default_factory=dict, compare=False)
    # degenerate but valid settings (heterosim.config.degenerate), printed and in results.json
    warnings: tuple[str, ...] = field(default=(), compare=False)
    faults: tuple[FaultSpec, ...] = ()  # link and GPU faults (heterosim.config.faults)

    @property
    def micro_batches_per_replica(self) -> int:
        """Micro-batches per data-parallel replica under a uniform split."""
        return self.training.global_batch // (self.training.micro_batch * self.parallel.dp)


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str) -> dict[str, Any]:
    """Apply ``key.sub=value`` strings (value parsed as YAML) to a copy of ``data``."""
    result = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise UserError(f"--set {item!r}: expected KEY=VALUE, e.g. network.cc=hpcc")
        key, text = item.split("=", 1)
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise UserError(f"--set {item!r}: empty key")
        value = parse_override_value(text, f"--set {key.strip()}")
        node: Any = result
        for part in parts[:-1]:
            node = _override_child(node, part, item, source)
        if isinstance(node, list):
            node[_list_index(node, parts[-1], item, source)] = value
        else:
            node[parts[-1]] = value
    return result


def _list_index(node: list[Any], part: str, item: str, source: str) -> int:
    """``jobs.1.start``: ``1`` indexes the list ``jobs`` (it must exist: --set adds no entries)."""
    if not part.isdigit() or int(part) >= len(node):
        raise UserError(
            f"--set {item!r}: {part}: expected an index 0..{len(node) - 1} of the list in {source}"
        )
    return int(part)


def _override_child(node: Any, part: str, item: str, source: str) -> Any:
    """The mapping or list under ``part`` of ``node`` (a missing mapping is created)."""
    if isinstance(node, list):
        child = node[_list_index(node, part, item, source)]
    else:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
    if not isinstance(child, (dict, list)):
        raise UserError(f"--set {item!r}: {part} in {source} is not a mapping or a list")
    return child


def _training(section: Section, model: ModelConfig) -> TrainingConfig:
    training = TrainingConfig(
        global_batch=section.integer("global_batch", minimum=1, maximum=MAX_GLOBAL_BATCH),
        micro_batch=section.integer("micro_batch", 1, minimum=1, maximum=MAX_MICRO_BATCH),
        seq_len=section.integer("seq_len", model.max_seq, minimum=1, maximum=MAX_SEQ_LEN),
        dtype=section.string("dtype", "bf16", choices=DTYPES),
        recompute=section.string("recompute", "none", choices=RECOMPUTE),
        attention=section.string("attention", "flash", choices=ATTENTION),
        grad_reduce_dtype=section.string("grad_reduce_dtype", "auto", choices=GRAD_REDUCE_DTYPES),
        attention_kernel=section.string("attention_kernel", "auto", choices=_attention_kernels()),
        kernels=section.string("kernels", "fused", choices=KERNELS),
    )
    if training.attention_kernel != "auto" and training.attention != "flash":
        raise section.error(
            "attention_kernel",
            f"names a fused attention kernel; training.attention is {training.attention!r}",
        )
    section.reject_unknown()
    return training


def _attention_kernels() -> tuple[str, ...]:
    """``auto`` and every attention implementation the shipped kernel tables name."""
    return ("auto", *ATTENTION_KERNELS)


_NOT_WITH_STAGES = ("tp", "pp", "dp", "vpp", "ep", "cp", "cp_comm", "cp_impl", "rank_order")


def _stages(section: Section) -> StagedPlan:
    """``parallel.stages``: shapes and types only; counts are checked against the model and the
    cluster in :func:`_check_stages`."""
    raw = section.raw("stages")
    if not isinstance(raw, list) or not raw:
        raise section.error("stages", "expected a non-empty list of {layers: N, replicas: [...]}")
    if len(raw) > MAX_STAGES:  # before any stage is read
        raise section.error("stages", f"{len(raw):,} stages; at most {MAX_STAGES:,} (one layer or more each)")
    replica_count = sum(
        len(s["replicas"]) for s in raw if isinstance(s, dict) and isinstance(s.get("replicas"), list)
    )
    if replica_count > MAX_GPUS:
        raise section.error(
            "stages", f"{replica_count:,} replicas in all; at most {MAX_GPUS:,} (one GPU or more each)"
        )
    for key in _NOT_WITH_STAGES:
        if section.has(key):
            raise section.error(
                key,
                "not allowed with parallel.stages (the stages give the "
                "pipeline depth, the replicas and each replica's tp)",
            )
    stages = []
    for i, item in enumerate(raw):
        stage = Section(item, section.source, section.key_path(f"stages[{i}]"))
        layers = stage.integer("layers", minimum=1, maximum=10_000)
        replicas_raw = stage.raw("replicas")
        if not isinstance(replicas_raw, list) or not replicas_raw:
            raise stage.error("replicas", "expected a non-empty list of {gpu: NAME, tp: N}")
        replicas = []
        for j, rep in enumerate(replicas_raw):
            rsec = Section(rep, section.source, stage.key_path(f"replicas[{j}]"))
            replicas.append(
                ReplicaPlan(
                    gpu=rsec.string("gpu"),
                    tp=rsec.integer("tp", 1, minimum=1, maximum=1024),
                    micro_batches=rsec.integer("micro_batches", None, minimum=1, maximum=MAX_GLOBAL_BATCH)
                    if rsec.has("micro_batches")
                    else None,
                )
            )
            rsec.reject_unknown()
        stage.reject_unknown()
        stages.append(StagePlan(layers, tuple(replicas)))
    first = len(stages[0].replicas)
    for i, stage_plan in enumerate(stages):
        if len(stage_plan.replicas) != first:
            raise section.error(
                f"stages[{i}].replicas",
                f"{len(stage_plan.replicas)} replicas but "
                f"stages[0] has {first}; every stage needs the same number "
                "(replica i of every stage forms pipeline i)",
            )
    return StagedPlan(tuple(stages))


def _parallel(section: Section) -> ParallelConfig:
    if "stages" in section.data and section.data["stages"] is None:
        raise section.error("stages", "expected a non-empty list of {layers: N, replicas: [...]}, got null")
    if section.has("stages"):
        return _staged_parallel(section)
    d = PARALLEL_DEFAULTS
    pp = section.integer("pp", d.pp, minimum=1, maximum=MAX_PARALLEL)
    schedule = section.string("schedule", d.schedule, choices=SCHEDULES)
    vpp = section.integer("vpp", d.vpp, minimum=1, maximum=1024)
    if vpp > 1 and schedule != "interleaved":
        schedule = "interleaved"
    if schedule == "interleaved" and vpp == 1:
        raise section.error("vpp", "schedule: interleaved needs vpp >= 2 virtual stages per rank")
    if vpp > 1 and pp == 1:
        raise section.error("vpp", "virtual pipeline stages need pp >= 2")
    mode, stage_layers = _partition(section)
    parallel = ParallelConfig(
        tp=section.integer("tp", d.tp, minimum=1, maximum=MAX_PARALLEL),
        pp=pp,
        dp=section.integer("dp", minimum=1, maximum=MAX_PARALLEL),
        ep=section.integer("ep", d.ep, minimum=1, maximum=MAX_PARALLEL),
        schedule=schedule,
        vpp=vpp,
        zero=section.integer("zero", d.zero, minimum=0, maximum=3),
        sequence_parallel=section.boolean("sequence_parallel", d.sequence_parallel),
        partition=mode,
        dp_bucket_bytes=section.size("dp_bucket", d.dp_bucket_bytes, *DP_BUCKET_RANGE),
        rank_order=section.string("rank_order", d.rank_order, choices=RANK_ORDERS),
        distributed_optimizer=section.boolean("distributed_optimizer", d.distributed_optimizer),
        zero3_prefetch=section.integer("zero3_prefetch", d.zero3_prefetch, minimum=0, maximum=1024),
        stage_layers=stage_layers,
        grad_sync=section.string("grad_sync", d.grad_sync, choices=GRAD_SYNC),
        zero3_impl=section.string("zero3_impl", d.zero3_impl, choices=ZERO3_IMPLS),
        zero3_persistence_threshold=section.integer(
            "zero3_persistence_threshold", d.zero3_persistence_threshold, minimum=0
        ),
        zero3_max_reuse_distance=section.integer(
            "zero3_max_reuse_distance", d.zero3_max_reuse_distance, minimum=0
        ),
        p2p_sync=section.string("p2p_sync", d.p2p_sync, choices=P2P_SYNC),
        p2p_scatter_gather=section.boolean("p2p_scatter_gather", d.p2p_scatter_gather),
        tp_comm_overlap=section.boolean("tp_comm_overlap", d.tp_comm_overlap),
        tp_comm_overlap_method=section.string(
            "tp_comm_overlap_method", d.tp_comm_overlap_method, choices=TP_OVERLAP_METHODS
        ),
        cp=section.integer("cp", d.cp, minimum=1, maximum=MAX_PARALLEL),
        cp_comm=section.string("cp_comm", d.cp_comm, choices=CP_COMMS),
        cp_impl=section.string("cp_impl", d.cp_impl, choices=CP_IMPLS),
        tp_backward_overlap=section.boolean_or_auto("tp_backward_overlap"),
    )
    section.reject_unknown()
    return parallel


def _staged_parallel(section: Section) -> ParallelConfig:
    plan = _stages(section)
    d = PARALLEL_DEFAULTS
    mode = section.string("partition", d.partition, choices=PARTITIONS)
    parallel = ParallelConfig(
        tp=max(r.tp for s in plan.stages for r in s.replicas),
        pp=plan.pp,
        dp=plan.dp,
        schedule=section.string("schedule", d.schedule, choices=("1f1b", "gpipe")),
        zero=section.integer("zero", d.zero, minimum=0, maximum=1),
        sequence_parallel=section.boolean("sequence_parallel", d.sequence_parallel),
        partition="explicit",
        micro_batch_split=mode,
        dp_bucket_bytes=section.size("dp_bucket", d.dp_bucket_bytes, *DP_BUCKET_RANGE),
        rank_order="stages",
        distributed_optimizer=section.boolean("distributed_optimizer", d.distributed_optimizer),
        stage_layers=tuple(s.layers for s in plan.stages),
        grad_sync=section.string("grad_sync", d.grad_sync, choices=GRAD_SYNC),
        # only where every replica has one TP degree (heterosim.workload.generator)
        p2p_scatter_gather=section.boolean("p2p_scatter_gather", d.p2p_scatter_gather),
        tp_backward_overlap=section.boolean_or_auto("tp_backward_overlap"),
        plan=plan,
    )
    section.reject_unknown()
    return parallel


def _partition(section: Section) -> tuple[str, tuple[int, ...]]:
    """``parallel.partition``: a mode name, or a list of layers per (virtual) stage (each >= 1;
    length and sum are checked against pp*vpp and the model in :func:`_check_consistency`)."""
    default = PARALLEL_DEFAULTS.partition
    value = section.raw("partition", default)
    if not isinstance(value, list):
        return section.string("partition", default, choices=PARTITIONS), ()
    if (
        not value
        or len(value) > MAX_PARALLEL
        or not all(isinstance(x, int) and not isinstance(x, bool) and x <= MAX_PARALLEL for x in value)
    ):
        raise section.error("partition", f"expected auto, uniform or a list of layer counts, got {value!r}")
    if min(value) < 1:
        raise section.error("partition", f"every stage needs at least one layer, got {value}")
    return "explicit", tuple(value)


def _framework(section: Section) -> FrameworkConfig:
    """``framework``: name, layer_forward_passes, host_op_overhead and collective_overhead (each a
    time, or a mapping of GPU names, ``"*"`` for the rest, to times)."""
    framework = FrameworkConfig(
        name=section.string("name", "megatron", choices=FRAMEWORKS),
        layer_forward_passes=section.integer("layer_forward_passes", 1, minimum=1, maximum=4),
        host_op_overhead_ns=_per_gpu_times(section, "host_op_overhead"),
        collective_overhead_ns=_per_gpu_times(section, "collective_overhead"),
        host_dispatch=_host_dispatch(section),
    )
    section.reject_unknown()
    return framework


def _host_dispatch(section: Section) -> HostDispatch:
    """``framework.host_dispatch``: one time for both passes, or ``{forward, backward}``."""
    raw = section.raw("host_dispatch", None)
    if raw is None:
        return HostDispatch()
    if isinstance(raw, dict):
        sub = section.section("host_dispatch")
        out = HostDispatch(
            _overhead_ns(sub, "forward") if "forward" in raw else None,
            _overhead_ns(sub, "backward") if "backward" in raw else None,
        )
        sub.reject_unknown(extra_allowed=("forward", "backward"))
        return out
    ns = _overhead_ns(section, "host_dispatch")
    return HostDispatch(ns, ns)


def _per_gpu_times(section: Section, key: str) -> tuple[tuple[str, int], ...]:
    """A time, or a mapping GPU name (catalogue aliases accepted, ``"*"``: any other) -> time."""
    from heterosim.catalog.gpus import canonical_gpu_name

    raw = section.raw(key, "0us")
    entries: dict[str, int] = {}
    if isinstance(raw, dict):
        sub = section.section(key)
        for name in list(raw):
            gpu = "*" if name == "*" else (canonical_gpu_name(str(name)) or str(name))
            entries[gpu] = _overhead_ns(sub, str(name))
    else:
        entries["*"] = _overhead_ns(section, key)
    return tuple(sorted(entries.items()))


MAX_FRAMEWORK_OVERHEAD_NS = 10**9  # per op or call: measured host and launch costs are microseconds


def _overhead_ns(section: Section, key: str, default: str = "0us") -> int:
    """A framework overhead per op: 0..1 s (hours per op would simulate hours of idle GPUs)."""
    ns = section.time_ns(key, default, minimum=0)
    if ns > MAX_FRAMEWORK_OVERHEAD_NS:
        raise section.error(
            key,
            f"expected at most 1s per op (host and launch overheads are microseconds), "
            f"got {section.raw(key)!r}",
        )
    return ns


def default_network() -> NetworkConfig:
    """The network settings of an experiment without a ``network`` section."""
    return _network(Section({}, ""))


def _network(section: Section) -> NetworkConfig:
    attributes = section.raw("attributes", {})
    if not isinstance(attributes, dict):
        raise section.error("attributes", "expected a mapping of ns-3 attribute names to values")
    transport = section.string("transport", "roce", choices=TRANSPORTS)
    uet = transport == "uet"  # lossy by design, with its own congestion control
    network = NetworkConfig(
        cc=section.string("cc", UET_CCS[0] if uet else "dcqcn", choices=CC_ALGORITHMS),
        mtu_bytes=section.size("mtu", "4KiB"),
        pfc=section.boolean("pfc", not uet),
        buffer_bytes=section.size("buffer", "32MiB", *BUFFER_RANGE),
        ecmp=section.boolean("ecmp", True),
        attributes=dict(attributes),
        collective_algorithm=section.string("collective_algorithm", "auto", choices=COLLECTIVE_ALGORITHMS),
        collective_protocol=section.string("collective_protocol", "auto", choices=COLLECTIVE_PROTOCOLS),
        channels=section.integer("channels", 0, minimum=0, maximum=64),
        frame_overhead=section.string("frame_overhead", "roce", choices=FRAME_OVERHEADS),
        routing_delay_ns=section.time_ns("routing_delay", 0, maximum=10_000_000),
        load_balancing=section.string("load_balancing", "ecmp", choices=LOAD_BALANCING),
        flowlet_gap_ns=section.time_ns("flowlet_gap", 500_000, minimum=1, maximum=1_000_000_000),
        transport=transport,
        accept_reordering=section.boolean("accept_reordering", False),
        trimming=section.boolean("trimming", False),
        source=section.source,
    )
    check_uet(network, section)
    if network.routing_delay_ns < 0:
        raise section.error("routing_delay", f"expected a time >= 0, got {network.routing_delay_ns} ns")
    if not 256 <= network.mtu_bytes <= 9216:
        raise section.error("mtu", f"expected 256B..9KiB, got {network.mtu_bytes} bytes")
    section.reject_unknown()
    return network


def _simulation(section: Section) -> SimulationConfig:
    simulation = SimulationConfig(
        fidelity=section.string("fidelity", DEFAULT_FIDELITY, choices=FIDELITIES),
        seed=section.integer("seed", 1, minimum=0, maximum=MAX_SEED),
        iterations=section.integer("iterations", 1, minimum=1, maximum=1000),
        sample_interval_ns=sample_interval(section),
        collective_granularity=section.string("collective_granularity", "chunk", choices=GRANULARITIES),
        memory_check=section.string("memory_check", "error", choices=MEMORY_CHECKS),
        intra_host=section.string("intra_host", "packet", choices=INTRA_HOST_MODELS),
        queue_pairs=section.string("queue_pairs", "connection", choices=QUEUE_PAIR_MODELS),
        packet_acceleration=section.string(
            "packet_acceleration", DEFAULT_PACKET_ACCELERATION, choices=PACKET_ACCELERATIONS
        ),
        fault_baseline=section.boolean("fault_baseline", False),
        compute_contention=section.boolean("compute_contention", True),
        replicas=section.string("replicas", "all", choices=REPLICA_MODES),
        fold_timing=section.string("fold_timing", "all", choices=FOLD_TIMINGS),
    )
    section.reject_unknown()
    return simulation


def sample_interval(section: Section, default: str = "10us") -> int:
    """``sample_interval``: 0 (no time series) or 1us..1h."""
    interval = section.time_ns("sample_interval", default, maximum=3600 * 10**9)
    if 0 < interval < MIN_SAMPLE_INTERVAL_NS:
        raise section.error("sample_interval", f"{interval} ns: expected 0 (no time series) or at least 1us")
    return interval


def _check_replica(
    top: Section,
    exp: ExperimentConfig,
    key: str,
    rep: ReplicaPlan,
    have: dict[str, int],
    need: dict[str, int],
) -> ReplicaPlan:
    """One replica (at ``key``) against the cluster's GPUs (``need``: GPUs the plan takes of
    each type up to here, updated) and the model's heads; returned with the canonical GPU name."""
    par, model, cluster, train = exp.parallel, exp.model, exp.cluster, exp.training
    canonical = cluster.resolve_gpu_name(rep.gpu)
    if canonical is None or canonical not in have:
        raise top.error(
            f"{key}.gpu",
            f"GPU type {rep.gpu!r} is not in the cluster {cluster.name!r}; it has: {', '.join(sorted(have))}",
        )
    peaks = cluster.gpu_spec(canonical).peak_tflops
    if not peaks.get(train.dtype):
        supported = ", ".join(k for k, v in peaks.items() if v)
        raise top.error(
            f"{key}.gpu",
            f"{canonical} has no {train.dtype} peak (it has: {supported}); "
            "set training.dtype to one of those",
        )
    need[canonical] = need.get(canonical, 0) + rep.tp
    if need[canonical] > have[canonical]:
        raise top.error(
            f"{key}.gpu",
            f"the plan needs {need[canonical]} {canonical} GPUs "
            f"up to here but the cluster {cluster.name!r} has "
            f"{have[canonical]}",
        )
    if model.heads % rep.tp:
        raise top.error(f"{key}.tp", f"model heads {model.heads} not divisible by tp {rep.tp}")
    if model.kv_heads % rep.tp and rep.tp % model.kv_heads:
        raise top.error(f"{key}.tp", f"kv_heads {model.kv_heads} and tp {rep.tp}: neither divides the other")
    if par.sequence_parallel and rep.tp == 1:
        raise top.error(f"{key}.tp", "sequence_parallel needs tp >= 2 in every replica")
    if par.sequence_parallel and train.seq_len % rep.tp:
        raise top.error(
            f"{key}.tp", f"seq_len {train.seq_len} not divisible by tp {rep.tp} (sequence_parallel)"
        )
    return ReplicaPlan(canonical, rep.tp, rep.micro_batches)


def _check_stage_micro_batches(top: Section, exp: ExperimentConfig, plan: StagedPlan) -> None:
    """Micro-batch counts given per pipeline: one per pipeline, summing to the batch's."""
    train = exp.training
    if train.global_batch % train.micro_batch:
        raise top.error(
            "training.global_batch",
            f"{train.global_batch} is not divisible by micro_batch {train.micro_batch}",
        )
    total = train.global_batch // train.micro_batch
    given = []
    for j in range(plan.dp):
        values = {m for s in plan.stages if (m := s.replicas[j].micro_batches) is not None}
        if len(values) > 1:
            raise top.error(
                f"parallel.stages[*].replicas[{j}].micro_batches",
                f"pipeline {j} is given different counts {sorted(values)} in "
                "different stages; give one count per pipeline",
            )
        given.append(next(iter(values)) if values else None)
    fixed = sum(g for g in given if g is not None)
    free = sum(1 for g in given if g is None)
    if (free == 0 and fixed != total) or (free and total - fixed < free):
        raise top.error(
            "parallel.stages[*].replicas[*].micro_batches",
            f"micro-batches sum to {fixed}{' plus the other pipelines' if free else ''}"
            f" but global_batch/micro_batch = {train.global_batch}/{train.micro_batch}"
            f" = {total}",
        )


def _check_stages(top: Section, exp: ExperimentConfig) -> StagedPlan:
    """Validate ``parallel.stages`` against the model, the batch and the cluster; return the
    plan with canonical GPU names."""
    par, model, cluster = exp.parallel, exp.model, exp.cluster
    plan = par.plan
    assert plan is not None
    have: dict[str, int] = {}
    for gpu in cluster.gpu_type:
        have[gpu] = have.get(gpu, 0) + 1
    need: dict[str, int] = {}
    stages = []
    for i, stage in enumerate(plan.stages):
        replicas = [
            _check_replica(top, exp, f"parallel.stages[{i}].replicas[{j}]", rep, have, need)
            for j, rep in enumerate(stage.replicas)
        ]
        if (par.zero or par.distributed_optimizer) and len({r.tp for r in replicas}) > 1:
            raise top.error(
                f"parallel.stages[{i}].replicas",
                "replicas of one stage with "
                "different tp need zero: 0 without distributed_optimizer (their "
                "gradient shards differ)",
            )
        stages.append(StagePlan(stage.layers, tuple(replicas)))
    if sum(s.layers for s in plan.stages) != model.layers:
        raise top.error(
            "parallel.stages",
            f"layers sum to {sum(s.layers for s in plan.stages)} but the model has {model.layers}",
        )
    _check_stage_micro_batches(top, exp, plan)
    if model.layers < plan.pp:
        raise top.error("parallel.stages", f"{model.layers} layers cannot fill {plan.pp} stages")
    return StagedPlan(tuple(stages))


def _check_framework(top: Section, exp: ExperimentConfig) -> None:
    """``framework`` against the cluster and the parallel plan."""
    par, cluster = exp.parallel, exp.cluster
    for key, table in (
        ("host_op_overhead", exp.framework.host_op_overhead_ns),
        ("collective_overhead", exp.framework.collective_overhead_ns),
    ):
        for gpu, _ in table:
            if gpu != "*" and gpu not in set(cluster.gpu_type):
                raise top.error(
                    f"framework.{key}.{gpu}",
                    f"no GPU of this type in the cluster (has: {', '.join(sorted(set(cluster.gpu_type)))})",
                )
    if exp.framework.name == "deepspeed" and par.plan is not None:
        raise top.error(
            "framework.name",
            "deepspeed models DeepSpeed's engine on a tp/pp/dp grid; "
            "parallel.stages plans run with framework megatron",
        )
    if exp.framework.name == "deepspeed" and (par.p2p_sync != "overlap" or par.p2p_scatter_gather):
        raise top.error(
            "framework.name",
            "deepspeed sets its own p2p path (blocking, TP-partitioned "
            "activations); leave parallel.p2p_sync and p2p_scatter_gather at their defaults",
        )
    if exp.framework.name == "deepspeed" and par.schedule != "1f1b":
        raise top.error(
            "parallel.schedule",
            f"framework deepspeed runs DeepSpeed's TrainSchedule (1F1B, no interleaving), not {par.schedule}",
        )


def _check_cp(top: Section, exp: ExperimentConfig) -> None:
    """Context parallelism: the load-balanced causal split cuts each sequence into 2*cp equal
    chunks (Megatron-core ``get_batch_on_this_cp_rank``), so 2*cp must divide seq_len; Megatron
    runs it through Transformer Engine's fused attention only (no unfused core attention)."""
    par, train = exp.parallel, exp.training
    if par.cp == 1:
        return
    if train.seq_len % (2 * par.cp):
        raise top.error(
            "parallel.cp",
            f"cp {par.cp} needs seq_len divisible by 2*cp = {2 * par.cp} "
            f"(each sequence is cut into 2*cp chunks), got seq_len {train.seq_len}",
        )
    if par.ep > 1:
        raise top.error("parallel.cp", "context parallelism with expert parallelism (ep > 1) is not modelled")
    if train.attention != "flash":
        raise top.error("parallel.cp", "context parallelism needs training.attention: flash")
    if par.zero >= 3 and par.zero3_impl == "deepspeed-0.3":
        raise top.error("parallel.cp", "context parallelism is not modelled with zero3_impl: deepspeed-0.3")
    if exp.framework.name != "megatron":
        raise top.error("parallel.cp", "context parallelism is modelled for framework: megatron only")


def _check_consistency(top: Section, exp: ExperimentConfig) -> None:
    par, model, cluster = exp.parallel, exp.model, exp.cluster
    if par.plan is not None:
        return
    product = par.tp * par.cp * par.pp * par.dp
    if product != cluster.world_size:
        if par.cp > 1:
            raise top.error(
                "parallel.cp",
                f"tp*cp*pp*dp = {par.tp}*{par.cp}*{par.pp}*{par.dp} = {product} but the cluster "
                f"{cluster.name!r} has {cluster.world_size} GPUs",
            )
        raise top.error(
            "parallel",
            f"tp*pp*dp = {par.tp}*{par.pp}*{par.dp} = {product} but the cluster "
            f"{cluster.name!r} has {cluster.world_size} GPUs",
        )
    _check_cp(top, exp)
    if model.heads % par.tp:
        raise top.error("parallel.tp", f"model heads {model.heads} not divisible by tp {par.tp}")
    if model.kv_heads % par.tp and par.tp % model.kv_heads:
        raise top.error(
            "parallel.tp", f"kv_heads {model.kv_heads} and tp {par.tp}: neither divides the other"
        )
    if model.layers < par.pp * par.vpp:
        raise top.error(
            "parallel.pp", f"{model.layers} layers cannot fill pp*vpp = {par.pp * par.vpp} pipeline stages"
        )
    if par.grad_sync == "after_backward" and par.zero >= 2:
        raise top.error(
            "parallel.grad_sync",
            f"after_backward needs zero 0 or 1: ZeRO-{par.zero} "
            "reduces gradients in every micro-batch's backward",
        )
    if par.partition == "explicit":
        stages = par.pp * par.vpp
        if len(par.stage_layers) != stages:
            raise top.error(
                "parallel.partition", f"{len(par.stage_layers)} stages listed but pp*vpp = {stages}"
            )
        if sum(par.stage_layers) != model.layers:
            raise top.error(
                "parallel.partition",
                f"layers sum to {sum(par.stage_layers)} but the model has {model.layers}",
            )
    train = exp.training
    if train.global_batch % (train.micro_batch * par.dp):
        raise top.error(
            "training.global_batch",
            f"{train.global_batch} is not divisible by micro_batch*dp = {train.micro_batch}*{par.dp}",
        )
    if par.ep > 1:
        if model.moe is None:
            raise top.error("parallel.ep", "expert parallelism needs a model with moe layers")
        if model.moe.experts % par.ep:
            raise top.error("parallel.ep", f"{model.moe.experts} experts not divisible by ep {par.ep}")
        if par.dp % par.ep:
            raise top.error("parallel.ep", f"ep {par.ep} must divide dp {par.dp}")
    if par.schedule == "interleaved" and exp.micro_batches_per_replica % par.pp:
        raise top.error(
            "parallel.schedule",
            f"interleaved 1F1B needs micro-batches per replica "
            f"({exp.micro_batches_per_replica}) to be a multiple of pp ({par.pp})",
        )
    if par.sequence_parallel and par.tp == 1:
        raise top.error("parallel.sequence_parallel", "sequence parallelism needs tp >= 2")
    if par.tp_comm_overlap and not par.sequence_parallel:
        raise top.error(
            "parallel.tp_comm_overlap", "TP communication overlap needs sequence_parallel: true (and tp >= 2)"
        )
    if par.tp_comm_overlap_method != "userbuffers" and not par.tp_comm_overlap:
        raise top.error("parallel.tp_comm_overlap_method", "needs tp_comm_overlap: true")
    if par.zero == 3 and par.pp > 1:
        raise top.error("parallel.zero", "ZeRO-3 with pipeline parallelism is not supported")
    if train.seq_len % max(1, par.tp) and par.sequence_parallel:
        raise top.error("training.seq_len", f"seq_len {train.seq_len} not divisible by tp")


def _check_moe_routing(exp: ExperimentConfig) -> None:
    """A routing histogram counts one micro-batch of one EP group (heterosim.config.moe_routing)."""
    routing, moe = exp.model.moe_routing, exp.model.moe
    if routing is None or moe is None:
        return
    tokens = exp.training.micro_batch * exp.training.seq_len
    check_routing_tokens(routing, exp.source, "model.moe_routing", tokens, exp.parallel.ep, moe.top_k)


def parse_experiment(
    data: dict[str, Any],
    source: str,
    base_dir: Path | None = None,
    cluster_override: ClusterConfig | None = None,
) -> ExperimentConfig:
    """Validate an experiment mapping read from ``source``."""
    top = Section(data, source)
    if "jobs" in top.data:
        raise top.error(
            "jobs",
            "an experiment of several jobs runs with heterosim run, compare or "
            "sweep; for this command give one job's experiment file",
        )
    name = plain_name(top.string("name", Path(source).stem if source else "experiment"), "name", source)
    model = resolve_model(top.raw("model"), source, base_dir=base_dir)
    training = _training(top.section("training", required=True), model)
    parallel = _parallel(top.section("parallel", required=True))
    if cluster_override is not None:
        top.raw("cluster", None)
        cluster = cluster_override
    else:
        cluster_value = top.raw("cluster")
        if isinstance(cluster_value, str):
            cluster_path = Path(cluster_value)
            if not cluster_path.is_absolute():
                cluster_path = (base_dir or Path.cwd()) / cluster_path
            cluster = load_cluster(cluster_path)
        elif isinstance(cluster_value, dict):
            cluster = parse_cluster(cluster_value, f"{source}: cluster")
        else:
            raise top.error("cluster", "expected a cluster file path or an inline cluster mapping")
    network = _network(top.section("network"))
    simulation = _simulation(top.section("simulation"))
    check_load_balancing(network, simulation.network_model)
    framework = _framework(top.section("framework"))
    parallel = replace(parallel, tp_backward_overlap=parallel.backward_overlap(framework.name))
    faults = parse_faults(top.raw("faults", None), source)
    top.reject_unknown()
    experiment = ExperimentConfig(
        name=name,
        model=model,
        training=training,
        parallel=parallel,
        cluster=cluster,
        network=network,
        simulation=simulation,
        source=source,
        framework=framework,
        resolved=copy.deepcopy(data),
        faults=faults,
        warnings=(*network_warnings(network, cluster), *fault_warnings(faults)),
    )
    _check_consistency(top, experiment)
    _check_moe_routing(experiment)
    _check_framework(top, experiment)
    check_replica_folding(experiment)
    samples = run_sample_warnings(simulation.sample_interval_ns, simulated_time_floor_ns(experiment))
    if samples:
        experiment = replace(experiment, warnings=(*experiment.warnings, *samples))
    if parallel.plan is not None:
        plan = _check_stages(top, experiment)
        experiment = replace(experiment, parallel=replace(parallel, plan=plan))
    return experiment


def experiment_with_plan(
    experiment: ExperimentConfig, plan: StagedPlan, *, micro_batch_split: str = "auto"
) -> ExperimentConfig:
    """``experiment`` running the explicit plan ``plan`` instead of its own parallel layout (what a
    planner does with each candidate). Validated as ``parallel.stages`` in a file would be (a
    UserError names the key); schedule, sequence parallelism, ZeRO-0/1, bucket size and gradient
    sync are kept from ``experiment`` (interleaving is dropped: plans run 1F1B or GPipe)."""
    par = experiment.parallel
    if par.zero > 1:
        raise UserError(
            f"{experiment.source or 'experiment'}: parallel.zero: an explicit plan "
            f"needs zero 0 or 1, got {par.zero}"
        )
    if micro_batch_split not in PARTITIONS:
        raise ValueError(f"micro_batch_split {micro_batch_split!r} not in {PARTITIONS}")
    parallel = replace(
        par,
        tp=max(r.tp for s in plan.stages for r in s.replicas),
        pp=plan.pp,
        dp=plan.dp,
        ep=1,
        vpp=1,
        schedule=par.schedule if par.schedule != "interleaved" else "1f1b",
        partition="explicit",
        rank_order="stages",
        stage_layers=tuple(s.layers for s in plan.stages),
        plan=plan,
        micro_batch_split=micro_batch_split,
    )
    staged = replace(experiment, parallel=parallel)
    checked = _check_stages(Section({}, experiment.source), staged)
    return replace(staged, parallel=replace(parallel, plan=checked))


def load_experiment(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read, override and validate an experiment YAML file."""
    path = Path(path)
    data = read_yaml_mapping(path)
    data = apply_overrides(data, overrides or [], str(path))
    return parse_experiment(data, str(path), base_dir=path.parent)
