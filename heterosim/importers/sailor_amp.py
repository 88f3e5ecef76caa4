"""Plans written by heterogeneous planners, read into an explicit plan (``parallel.stages``).

Sailor (github.com/eth-easl/sailor) writes one JSON object per plan
(sailor/Planner/sailor_planner/cpp_src/planner.py, ``get_sorted_plans``; saved plans in
sailor/Planner/simulations/validation/*/plan_config_*.json)::

    {"pipeline_list": [{"num_stages": P,
                        "layers_per_stage": [[0, 1, ...], ...],     # indices over embedding,
                                                                    # transformer layers, head
                        "tmp_per_stage": [[[[["RTX-3090", 8, "zone"]], 8], ...], ...],
                        "dp": [D, D, ...]}],
     "mbs": 2, "gbs": 288, ...}

``layers_per_stage`` numbers ``num_layers + 2`` blocks: 0 is the embedding and the last the head
(Sailor's ``num_all_layers``), so a stage's transformer layers are its indices other than those.
``tmp_per_stage[s]`` lists stage ``s``'s data-parallel replicas, each ``[[(gpu type, GPUs,
zone)], tp]``; replica ``i`` of every stage forms pipeline ``i``, as in HeteroSim.

AMP (github.com/DachengLi1/AMP) hands DeepSpeed a ``partition.json`` and a ``rank_map.json``
(DeepSpeed/DeepSpeedExamples/Megatron-LM-v1.1.5-3D_parallelism/amp_utils.py ``simulate``;
built in cost_het_cluster.py ``predict`` and ``dp_cost``): the partition is DeepSpeed's list of
``pp + 1`` stage boundaries over its layer list ``[embed2h, noop, transformer x L, noop, noop,
embed2v, noop]``; the rank map gives, per node (in hostfile order), the global ranks placed on
it, ranks in DeepSpeed's (pp, dp, mp) order: ``rank = mp + M * dp + M * D * pp``. AMP's plans
are uniform in TP and DP; their heterogeneity is which node type runs which stage. Without a rank
map, rank ``r`` runs on GPU ``r`` of the cluster (DeepSpeed's default).

Placement after import follows HeteroSim's rule (a replica takes free GPUs of its type in cluster
order): a plan names GPU *types* per replica, so two hosts of the same type are interchangeable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heterosim.config.cluster import ClusterConfig
from heterosim.config.experiment import ReplicaPlan, StagedPlan, StagePlan
from heterosim.config.fields import MAX_INT, read_text_file
from heterosim.errors import UserError

# Sailor's GPU type names (sailor/profiling, Planner profiles) -> catalogue names. RTX-2080 is
# not mapped here: a cluster file may define an RTX 2080 of its own (SAILOR_GPU_FALLBACKS).
SAILOR_GPU_NAMES = {
    "A100-40": "A100-40GB-SXM",
    "A100-80": "A100-80GB-SXM",
    "V100-16": "V100-SXM2-16GB",
    "V100-32": "V100-SXM2-32GB",
    "GH-96": "GH200",
    "H100-80": "H100-SXM",
    "RTX-3090": "RTX-3090",
    "Titan-RTX": "Titan-RTX",
}
# Used where the cluster has no GPU of Sailor's name but has this one: Sailor's "RTX-2080" has
# 11 GiB (eth-easl/sailor sailor/Planner/simulations/constants.py GPU_MEMORY_GB, configs/
# basic_cluster_config.json mem_per_gpu 11811160064), the memory of an RTX 2080 Ti (RTX 2080: 8 GB).
SAILOR_GPU_FALLBACKS = {"RTX-2080": "RTX-2080-Ti"}
AMP_LAYER_OVERHEAD = 6  # DeepSpeed layer list entries that are not transformer layers
AMP_FIRST_LAYER = 2  # position of the first transformer layer in that list


@dataclass(frozen=True)
class ImportedPlan:
    """A planner's plan in HeteroSim's terms, with what the file said about the batch."""

    plan: StagedPlan
    micro_batch: int | None
    global_batch: int | None
    notes: tuple[str, ...]


MAX_PLAN_LIST = 10_000  # entries of a plan's lists (stages, boundaries, replicas, ranks of a node)
MAX_AMP_BOUNDARY = 100_000  # AMP's layer list: transformer layers plus a few other entries


def _read_json(path: str | Path) -> Any:
    path = Path(path)
    text = read_text_file(path, "JSON file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise UserError(f"{path}: invalid JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise UserError(f"{path}: invalid JSON: {str(exc).splitlines()[0]}") from None


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {len(str(abs(value)))} digits" if abs(value) < 10**4000 else "a huge integer"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_INT:
        raise UserError(f"{where}: expected a positive integer (at most {MAX_INT}), got {_shown(value)}")
    return value


SAILOR_KEY = "pipeline_list[0]"  # the one pipeline template an importable plan has


def _sailor_template(raw: Any, path: str | Path) -> Any:
    """The plan's one pipeline template (``pipeline_list[0]``)."""
    if (
        not isinstance(raw, dict)
        or not isinstance(raw.get("pipeline_list"), list)
        or not raw["pipeline_list"]
    ):
        raise UserError(f"{path}: pipeline_list: expected a non-empty list (a Sailor plan)")
    if len(raw["pipeline_list"]) > 1:
        raise UserError(
            f"{path}: pipeline_list: {len(raw['pipeline_list'])} pipeline "
            "templates; only plans with one template can be imported"
        )
    return raw["pipeline_list"][0]


def _sailor_stage_lists(pipe: Any, path: str | Path) -> tuple[list, list, int]:
    """(layers_per_stage, tmp_per_stage, index of the head block), the blocks checked to be
    consecutive indices from 0."""
    key = SAILOR_KEY
    layers = pipe.get("layers_per_stage") if isinstance(pipe, dict) else None
    tmps = pipe.get("tmp_per_stage") if isinstance(pipe, dict) else None
    if not isinstance(layers, list) or not isinstance(tmps, list) or not layers or len(layers) != len(tmps):
        raise UserError(f"{path}: {key}: expected layers_per_stage and tmp_per_stage, one entry per stage")
    blocks = sum(len(stage) for stage in layers if isinstance(stage, list))
    if max(len(layers), blocks) > MAX_PLAN_LIST:  # before any entry is read
        raise UserError(f"{path}: {key}.layers_per_stage: {blocks:,} blocks; at most {MAX_PLAN_LIST:,}")
    flat = [i for stage in layers for i in (stage if isinstance(stage, list) else [None])]
    if flat != list(range(len(flat))):
        raise UserError(
            f"{path}: {key}.layers_per_stage: expected consecutive block indices "
            "0..N covering embedding, layers and head"
        )
    return layers, tmps, len(flat) - 1


def _sailor_replica(entry: Any, where: str, names: Mapping[str, str], used: set[str]) -> ReplicaPlan:
    """One ``[[[gpu_type, gpus, zone]], tp]`` entry; a renamed GPU type is added to ``used``."""
    if not (
        isinstance(entry, list)
        and len(entry) == 2
        and isinstance(entry[0], list)
        and entry[0]
        and all(isinstance(g, list) and len(g) >= 2 for g in entry[0])
    ):
        raise UserError(f"{where}: expected [[[gpu_type, gpus, zone]], tp]")
    types = {str(g[0]) for g in entry[0]}
    if len(types) > 1:
        raise UserError(
            f"{where}: one replica on several GPU types {sorted(types)}; "
            "parallel.stages needs one type per replica"
        )
    tp = _int(entry[1], f"{where}[1] (tp)")
    gpus = sum(_int(g[1], f"{where}[0] (GPU count)") for g in entry[0])
    if gpus != tp:
        raise UserError(f"{where}: {gpus} GPUs but tp {tp}; a replica of a stage is one TP group")
    sailor_name = types.pop()
    gpu = names.get(sailor_name, sailor_name)
    if gpu != sailor_name:
        used.add(f"{sailor_name} -> {gpu}")
    return ReplicaPlan(gpu=gpu, tp=tp)


def _sailor_stage(
    pipe: dict,
    path: str | Path,
    s: int,
    blocks: list,
    replicas: Any,
    head: int,
    names: Mapping[str, str],
    used: set[str],
    first: StagePlan | None,
) -> StagePlan:
    """Stage ``s``: its transformer layers (blocks other than embedding and head) and replicas,
    checked against ``dp`` and against stage 0 (``first``)."""
    key = SAILOR_KEY
    count = sum(1 for b in blocks if 0 < b < head)
    if count == 0:
        raise UserError(
            f"{path}: {key}.layers_per_stage[{s}]: stage holds no transformer "
            "layer (only embedding/head), which parallel.stages cannot express"
        )
    if not isinstance(replicas, list) or not replicas or len(replicas) > MAX_PLAN_LIST:
        raise UserError(
            f"{path}: {key}.tmp_per_stage[{s}]: expected a list of at most {MAX_PLAN_LIST:,} replicas"
        )
    reps = [
        _sailor_replica(entry, f"{path}: {key}.tmp_per_stage[{s}][{r}]", names, used)
        for r, entry in enumerate(replicas)
    ]
    dp = pipe.get("dp")
    if isinstance(dp, list) and len(dp) == len(pipe["layers_per_stage"]) and dp[s] != len(reps):
        raise UserError(
            f"{path}: {key}.dp[{s}]: says {dp[s]} but tmp_per_stage[{s}] lists {len(reps)} replicas"
        )
    if first is not None and len(reps) != len(first.replicas):
        raise UserError(
            f"{path}: {key}.tmp_per_stage[{s}]: {len(reps)} replicas but stage 0 "
            f"has {len(first.replicas)}; parallel.stages needs the same "
            "number in every stage"
        )
    return StagePlan(count, tuple(reps))


def read_sailor_plan(path: str | Path, gpu_names: Mapping[str, str] | None = None) -> ImportedPlan:
    """Sailor's plan JSON (module docstring) as an explicit plan.

    ``gpu_names`` maps Sailor's GPU type names to catalogue or cluster names (on top of
    :data:`SAILOR_GPU_NAMES`); a name mapped nowhere is kept as written.
    """
    raw = _read_json(path)
    names = {**SAILOR_GPU_NAMES, **(gpu_names or {})}
    pipe = _sailor_template(raw, path)
    layers, tmps, head = _sailor_stage_lists(pipe, path)
    stages: list[StagePlan] = []
    used: set[str] = set()
    notes = [
        f"{len(layers)} stages; Sailor's block 0 (embedding) and {head} (head) are not transformer layers"
    ]
    for s, (blocks, replicas) in enumerate(zip(layers, tmps)):
        first = stages[0] if stages else None
        stages.append(_sailor_stage(pipe, path, s, blocks, replicas, head, names, used, first))
    mbs = raw.get("mbs")
    gbs = raw.get("gbs")
    if used:
        notes.append("GPU names mapped: " + ", ".join(sorted(used)))
    return ImportedPlan(
        plan=StagedPlan(tuple(stages)),
        micro_batch=_int(mbs, f"{path}: mbs") if mbs is not None else None,
        global_batch=_int(gbs, f"{path}: gbs") if gbs is not None else None,
        notes=tuple(notes),
    )


def _amp_stage_layers(bounds: Any, where: str) -> tuple[int, list[int]]:
    """(transformer layers, transformer layers per stage) from DeepSpeed's stage boundaries."""
    if (
        not isinstance(bounds, list)
        or len(bounds) < 2
        or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
    ):
        raise UserError(f"{where}: expected DeepSpeed stage boundaries, a list of pp+1 integers")
    if len(bounds) > MAX_PLAN_LIST:  # before any stage is counted
        raise UserError(f"{where}: {len(bounds):,} boundaries; at most {MAX_PLAN_LIST:,}")
    if bounds[-1] > MAX_AMP_BOUNDARY:
        raise UserError(f"{where}: last boundary {_shown(bounds[-1])}; at most {MAX_AMP_BOUNDARY:,}")
    if bounds[0] != 0 or any(b >= c for b, c in zip(bounds, bounds[1:])):
        raise UserError(f"{where}: boundaries must start at 0 and increase, got {bounds}")
    layers = bounds[-1] - AMP_LAYER_OVERHEAD
    if layers < 1:
        raise UserError(
            f"{where}: last boundary {bounds[-1]} leaves no transformer layer "
            f"(AMP's layer list has {AMP_LAYER_OVERHEAD} non-transformer entries)"
        )
    counts = [  # transformer layers k (entry k + AMP_FIRST_LAYER) with lo <= entry < hi
        max(0, min(hi, layers + AMP_FIRST_LAYER) - max(lo, AMP_FIRST_LAYER))
        for lo, hi in zip(bounds, bounds[1:])
    ]
    for s, c in enumerate(counts):
        if c == 0:
            raise UserError(
                f"{where}: stage {s} ({bounds[s]}..{bounds[s + 1]}) holds no "
                "transformer layer, which parallel.stages cannot express"
            )
    return layers, counts


def _amp_rank_gpus(rank_map_path: str | Path, cluster: ClusterConfig, world: int) -> dict[int, int]:
    """Global rank -> GPU id from AMP's ``rank_map.json`` (node index -> ranks on that node)."""
    rank_gpu: dict[int, int] = {}
    rmap = _read_json(rank_map_path)
    if not isinstance(rmap, dict):
        raise UserError(f"{rank_map_path}: expected a mapping of node index to ranks")
    for node_key, ranks in rmap.items():
        try:
            node = int(node_key)
        except ValueError:
            raise UserError(f"{rank_map_path}: {node_key!r}: expected a node index") from None
        if not 0 <= node < cluster.num_hosts:
            raise UserError(f"{rank_map_path}: node {node}: the cluster has hosts 0..{cluster.num_hosts - 1}")
        if not isinstance(ranks, list) or len(ranks) > cluster.host(node).gpus:
            raise UserError(f"{rank_map_path}: node {node}: expected at most {cluster.host(node).gpus} ranks")
        first = int(cluster.gpu_host.tolist().index(node))
        for i, rank in enumerate(ranks):
            if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
                raise UserError(
                    f"{rank_map_path}: node {node}: ranks[{i}]: expected a rank (an integer >= 0), "
                    f"got {_shown(rank)}"
                )
            if rank in rank_gpu or rank >= world:
                raise UserError(f"{rank_map_path}: rank {rank} placed twice or out of range")
            rank_gpu[rank] = first + i
    if len(rank_gpu) != world:
        raise UserError(f"{rank_map_path}: places {len(rank_gpu)} ranks but tp*pp*dp = {world}")
    return rank_gpu


def read_amp_partition(
    partition_path: str | Path, cluster: ClusterConfig, tp: int, rank_map_path: str | Path | None = None
) -> ImportedPlan:
    """AMP's ``partition.json`` (and ``rank_map.json``) as an explicit plan (module docstring)."""
    bounds = _read_json(partition_path)
    where = str(partition_path)
    layers, counts = _amp_stage_layers(bounds, where)
    pp = len(bounds) - 1
    tp = _int(tp, "--tp")
    world = cluster.world_size
    if world % (tp * pp):
        raise UserError(f"--tp {tp}: tp * pp = {tp * pp} does not divide the cluster's {world} GPUs")
    dp = world // (tp * pp)
    if rank_map_path is None:
        rank_gpu = {r: r for r in range(world)}
    else:
        rank_gpu = _amp_rank_gpus(rank_map_path, cluster, world)
    stages = []
    for s in range(pp):
        reps = []
        for d in range(dp):
            types = {cluster.gpu_type[rank_gpu[m + tp * d + tp * dp * s]] for m in range(tp)}
            if len(types) > 1:
                raise UserError(
                    f"{rank_map_path or where}: stage {s} replica {d} spans GPU types "
                    f"{sorted(types)}; parallel.stages needs one type per replica"
                )
            reps.append(ReplicaPlan(gpu=types.pop(), tp=tp))
        stages.append(StagePlan(counts[s], tuple(reps)))
    notes = (
        f"DeepSpeed boundaries {bounds} over {layers} transformer layers + "
        f"{AMP_LAYER_OVERHEAD} other entries -> layers per stage {counts}",
        f"tp {tp}, pp {pp}, dp {dp}; replica GPU types from "
        f"{'the rank map' if rank_map_path else 'rank r on GPU r'}",
    )
    return ImportedPlan(StagedPlan(tuple(stages)), None, None, notes)


def read_sailor_training_config(path: str | Path) -> tuple[dict, int, int | None]:
    """(inline model, sequence length, global batch) from Sailor's training config JSON
    (sailor/Planner/simulations/configs/training_config_*.json: ``hidden_size``, ``num_layers``,
    ``heads``, ``vocab_size``, ``sequence_length``, ``global_batch_size``). The FFN is 4 x hidden
    (GPT/OPT, which those configs describe)."""
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise UserError(f"{path}: expected a JSON object (Sailor training config)")

    def get(key: str) -> int:
        if key not in raw:
            raise UserError(f"{path}: {key}: missing (Sailor training config)")
        return _int(raw[key], f"{path}: {key}")

    hidden, layers, heads = get("hidden_size"), get("num_layers"), get("heads")
    model = {
        "name": str(raw.get("model", Path(path).stem)),
        "arch": "gpt",
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "kv_heads": heads,
        "ffn": 4 * hidden,
        "vocab": get("vocab_size"),
        "seq": get("sequence_length"),
    }
    batch = raw.get("global_batch_size")
    return model, get("sequence_length"), _int(batch, f"{path}: global_batch_size") if batch else None
