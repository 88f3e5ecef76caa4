"""Metis and FlashFlex plans read into an explicit plan (``parallel.stages``).

Metis (github.com/SamsungLabs/Metis) prints its ranked plans as text (cost_het_cluster.py, the
``Results`` block of results/hetero_cost_model)::

    rank, cost, node_sequence, device_group, strategies(dp_deg, tp_deg), batches(number of batch),
    layer_partition
    1, 2396.73, (<DeviceType.T4: 't4'>, <DeviceType.A100: 'a100'>), [8, 8], [(4, 2), (4, 2)], 8, [0, 4, 10]

Devices are numbered type by type in ``node_sequence`` order (model/device_group.py
``_get_device_placement``); stage ``s`` owns the next ``device_group[s]`` of them, and its replica
``d`` (of ``dp``) the ``tp`` devices from ``d * tp`` (``_get_hetero_device_group_execution_time``).
``layer_partition`` holds ``num_stages + 1`` boundaries over Metis's layer list, whose first entry
is the embedding and last the head (README: ``parameters_per_layer_bytes``), so a stage's
transformer layers are its entries other than those two. ``batches`` is the number of
micro-batches: a micro-batch of ``gbs / batches`` sequences per pipeline, split over ``dp``.

FlashFlex / HexiScale (github.com/Relaxed-System-Lab/FlashFlex) takes a JSON of three lists per
pipeline (all_hetero_configs.json, README "Asymmetric Parallel Group Support"): ``hetero_configs``
(TP degree of every stage), ``layer_partitions`` (transformer layers of every stage) and
``devices_id`` (the machine of every GPU of every stage); optional ``global_bsz_size`` and
``chunks`` give each pipeline's batch and micro-batch count. Machine ``m`` is host ``m`` of the
cluster.

HeteroSim's explicit plans need every stage to have the same number of replicas and every
pipeline the same stages (layers per stage): plans outside that are refused in one line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from heterosim.config.cluster import ClusterConfig
from heterosim.config.experiment import ReplicaPlan, StagedPlan, StagePlan
from heterosim.config.fields import read_text_file
from heterosim.errors import UserError
from heterosim.importers.sailor_amp import MAX_PLAN_LIST, ImportedPlan, _int, _read_json, _shown

# Metis DeviceType names (its profile file names, DeviceType.A100 ...) -> catalogue names. Metis's
# sample cluster gives A100 80 GB and V100 16 GB memory (results/hetero_cost_model Clusterfile).
METIS_GPU_NAMES = {
    "A100": "A100-80GB-SXM",
    "V100": "V100-SXM2-16GB",
    "T4": "T4-16GB-PCIe",
    "P100": "P100-PCIe",
    "H100": "H100-SXM",
    "L4": "L4",
}
_METIS_LINE = re.compile(r"^\s*(\d+)\s*,\s*([-+0-9.eE]+)\s*,\s*\((.*?)\)\s*,\s*(\[.*)$")
_DEVICE_TYPE = re.compile(r"DeviceType\.(\w+)")


def _metis_fields(match: re.Match[str], where: str) -> tuple[list[str], list, list, int, list[int]]:
    """(node sequence types, device_group, strategies, batches, layer_partition) of one results
    line, each checked for shape."""
    types = _DEVICE_TYPE.findall(match.group(3))
    if not types:
        raise UserError(f"{where}: node_sequence: expected DeviceType names, got ({match.group(3)})")
    try:
        fields = ast.literal_eval("(" + match.group(4) + ")")
    except (ValueError, SyntaxError):
        raise UserError(f"{where}: expected device_group, strategies, batches, layer_partition") from None
    if not isinstance(fields, tuple) or len(fields) != 4:
        raise UserError(f"{where}: expected device_group, strategies, batches, layer_partition")
    groups, strategies, batches, bounds = fields
    if not isinstance(groups, list) or not groups or len(groups) > MAX_PLAN_LIST:
        raise UserError(f"{where}: device_group: expected a list of GPUs per stage")
    if not isinstance(strategies, list) or len(strategies) != len(groups):
        raise UserError(f"{where}: strategies: expected one (dp, tp) per stage")
    if not isinstance(bounds, list) or len(bounds) != len(groups) + 1:
        raise UserError(f"{where}: layer_partition: expected {len(groups) + 1} boundaries")
    if (
        any(isinstance(b, bool) or not isinstance(b, int) for b in bounds)
        or bounds[0] != 0
        or any(b > c for b, c in zip(bounds, bounds[1:]))
    ):
        raise UserError(f"{where}: layer_partition: expected boundaries from 0, not decreasing, got {bounds}")
    return types, groups, strategies, _int(batches, f"{where}: batches"), bounds


def _metis_type_order(
    types: list[str], names: Mapping[str, str], cluster: ClusterConfig, where: str
) -> list[str]:
    """The cluster's GPU type names of Metis's node sequence, in its order."""
    order = []
    for t in types:
        gpu = names.get(t.upper(), t)
        canonical = cluster.resolve_gpu_name(gpu)
        if canonical is None:
            raise UserError(
                f"{where}: Metis device type {t!r} maps to {gpu!r}, not a GPU of the cluster; use --gpu-map"
            )
        order.append(canonical)
    return order


def _metis_stage(
    s: int,
    gpus: int,
    strategy: Any,
    layers: int,
    devices: list[str],
    start: int,
    where: str,
    first: StagePlan | None,
) -> StagePlan:
    """Stage ``s``: ``gpus`` devices from ``devices[start]`` as dp replicas of tp GPUs each,
    checked against stage 0 (``first``)."""
    if not isinstance(strategy, (list, tuple)) or len(strategy) != 2:
        raise UserError(f"{where}: strategies[{s}]: expected (dp, tp), got {_shown(strategy)}")
    dp = _int(strategy[0], f"{where}: strategies[{s}] dp")
    tp = _int(strategy[1], f"{where}: strategies[{s}] tp")
    if dp * tp != gpus:
        raise UserError(f"{where}: stage {s}: dp {dp} x tp {tp} != device_group {gpus}")
    if layers == 0:
        raise UserError(
            f"{where}: stage {s} holds no transformer layer, which parallel.stages cannot express"
        )
    reps = []
    for d in range(dp):
        kinds = set(devices[start + d * tp : start + (d + 1) * tp])
        if len(kinds) > 1:
            raise UserError(f"{where}: stage {s} replica {d} spans GPU types {sorted(kinds)}")
        reps.append(ReplicaPlan(gpu=kinds.pop(), tp=tp))
    if first is not None and len(reps) != len(first.replicas):
        raise UserError(
            f"{where}: stage {s} has dp {dp} but stage 0 has {len(first.replicas)}; "
            "parallel.stages needs the same number of replicas in every stage"
        )
    return StagePlan(layers, tuple(reps))


def read_metis_plan(
    path: str | Path, cluster: ClusterConfig, rank: int = 1, gpu_names: Mapping[str, str] | None = None
) -> tuple[ImportedPlan, int]:
    """Plan ``rank`` (1 = cheapest) of Metis's printed results (module docstring), and its number of
    micro-batches. Metis numbers the devices type by type in node_sequence order, as many of each
    type as its hostfile has: here the cluster's GPUs of each type."""
    names = {**METIS_GPU_NAMES, **(gpu_names or {})}
    rank = _int(rank, "--plan-rank")
    match = _metis_line(path, rank)
    where = f"{path}: plan {rank}"
    types, groups, strategies, batches, bounds = _metis_fields(match, where)
    head = bounds[-1] - 1
    order = _metis_type_order(types, names, cluster, where)
    devices = [gpu for gpu in order for t in cluster.gpu_type if t == gpu]
    if sum(groups) > len(devices):
        raise UserError(
            f"{where}: the plan uses {sum(groups)} GPUs; the cluster has {len(devices)} of {order}"
        )
    stages: list[StagePlan] = []
    start = 0
    for s, (gpus, strategy) in enumerate(zip(groups, strategies)):
        gpus = _int(gpus, f"{where}: device_group[{s}]")
        layers = sum(1 for b in range(bounds[s], bounds[s + 1]) if 0 < b < head)
        first = stages[0] if stages else None
        stages.append(_metis_stage(s, gpus, strategy, layers, devices, start, where, first))
        start += gpus
    notes = (
        f"Metis plan {rank} (cost {match.group(2)}): node sequence {types}, device groups {groups}, "
        f"(dp, tp) {[tuple(x) for x in strategies]}, boundaries {bounds} (first entry embedding, "
        f"last head) -> layers per stage {[st.layers for st in stages]}",
        f"{batches} micro-batches per iteration; GPU types: "
        + ", ".join(f"{t} -> {g}" for t, g in zip(types, order)),
    )
    return ImportedPlan(StagedPlan(tuple(stages)), None, None, notes), batches


def _metis_line(path: str | Path, rank: int) -> re.Match[str]:
    text = read_text_file(Path(path), "Metis results file")
    found: dict[int, re.Match[str]] = {}
    for line in text.splitlines():
        match = _METIS_LINE.match(line)
        if match:
            found.setdefault(int(match.group(1)), match)
    if not found:
        raise UserError(f"{path}: no Metis result line (rank, cost, node_sequence, device_group, ...)")
    if rank not in found:
        raise UserError(f"{path}: no plan of rank {rank}; ranks 1..{max(found)}")
    return found[rank]


def read_flashflex_plan(path: str | Path, cluster: ClusterConfig) -> ImportedPlan:
    """FlashFlex's hetero config JSON (module docstring) as an explicit plan."""
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise UserError(f"{path}: expected a mapping with hetero_configs, layer_partitions, devices_id")
    configs, parts, devices = (raw.get(k) for k in ("hetero_configs", "layer_partitions", "devices_id"))
    for key, value in (("hetero_configs", configs), ("layer_partitions", parts), ("devices_id", devices)):
        if not isinstance(value, list) or not value or len(value) > MAX_PLAN_LIST:
            raise UserError(f"{path}: {key}: expected a non-empty list with one entry per pipeline")
    assert isinstance(configs, list) and isinstance(parts, list) and isinstance(devices, list)
    if not len(configs) == len(parts) == len(devices):
        raise UserError(
            f"{path}: hetero_configs, layer_partitions and devices_id list different pipeline counts"
        )
    layers0 = parts[0]
    stages_reps: list[list[ReplicaPlan]] = [[] for _ in layers0] if isinstance(layers0, list) else []
    chunks = raw.get("chunks")
    for p, (tps, layers, ids) in enumerate(zip(configs, parts, devices)):
        where = f"{path}: pipeline {p}"
        if not (isinstance(tps, list) and isinstance(layers, list) and isinstance(ids, list)):
            raise UserError(f"{where}: expected lists of stages")
        if not len(tps) == len(layers) == len(ids):
            raise UserError(
                f"{where}: hetero_configs, layer_partitions and devices_id list different stage counts"
            )
        if layers != layers0:
            raise UserError(
                f"{where}: layer_partitions {layers} differ from pipeline 0's {layers0}; parallel.stages "
                "needs every pipeline to split the layers the same way"
            )
        micro = None
        if isinstance(chunks, list) and chunks:
            micro = _int(
                chunks[min(p, len(chunks) - 1)], f"{path}: chunks[{p}]"
            )  # README: padded with the last
        for s, (tp, machines) in enumerate(zip(tps, ids)):
            tp = _int(tp, f"{where}: hetero_configs[{s}]")
            if not isinstance(machines, list) or len(machines) != tp:
                raise UserError(
                    f"{where}: devices_id[{s}]: expected {tp} machine ids (one per GPU of the stage)"
                )
            kinds = set()
            for m in machines:
                if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m < cluster.num_hosts:
                    last = cluster.num_hosts - 1
                    bad = _shown(m)
                    raise UserError(f"{where}: devices_id[{s}]: machine {bad}; hosts are 0..{last}")
                kinds.add(cluster.host(m).gpu)
            if len(kinds) > 1:
                raise UserError(f"{where}: stage {s} spans GPU types {sorted(kinds)}")
            stages_reps[s].append(ReplicaPlan(gpu=kinds.pop(), tp=tp, micro_batches=micro))
    stages = tuple(
        StagePlan(_int(n, f"{path}: layer_partitions[0]"), tuple(r)) for n, r in zip(layers0, stages_reps)
    )
    batch = raw.get("global_bsz_size")
    total = None
    if isinstance(batch, list) and batch:
        total = sum(
            _int(batch[min(p, len(batch) - 1)], f"{path}: global_bsz_size[{p}]") for p in range(len(configs))
        )
    notes = (
        f"FlashFlex plan: {len(configs)} pipelines of {len(layers0)} stages, TP per stage and pipeline "
        f"{configs}, layers per stage {layers0}; machine m of devices_id = host m of the cluster",
    )
    return ImportedPlan(StagedPlan(stages), None, total, notes)
