"""Candidate parallel layouts of one experiment on its cluster.

Two families, each for every micro-batch size in the list:

* ``uniform``: Megatron's tp x pp x dp grid (rank order and placement as the experiment's), the
  layers cut by the heterogeneity-aware partitioner (``partition: auto``: min-max over the
  stages' slowest GPUs, memory-limited) and micro-batches shared by replica speed. TP must divide
  every host's GPU count (a TP group never spans hosts) and the model's heads; pp <= layers;
  dp must divide global_batch / micro_batch.
* ``per-type``: an explicit plan (``parallel.stages``) in which every pipeline runs on one GPU
  type (tp x pp GPUs of that type), layers split evenly and micro-batches split in proportion to
  each pipeline's speed (``micro_batch_split: auto``): the replica placement that keeps a slow
  GPU type out of the fast pipelines. Needs every type's GPU count divisible by tp x pp, pp >= 2
  (with pp 1 the uniform grid already gives each replica its own type and speed-split
  micro-batches) and at least one micro-batch per pipeline.

The experiment's own layout, with ``partition: uniform`` and even micro-batches, is the
*default* candidate (what a homogeneous planner would run); it is always simulated. The layout as
written (when it differs, e.g. ``partition: auto`` or explicit stages) is a candidate too.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from heterosim.config.experiment import ExperimentConfig, StagedPlan
from heterosim.sweep.grid import variant_id
from heterosim.workload.partition import even_cuts

UNIFORM, PER_TYPE, AS_WRITTEN = "uniform", "per-type", "as-written"
# parallel keys a candidate takes from the experiment (the layout keys are the candidate's own)
KEPT_UNIFORM = (
    "schedule",
    "zero",
    "sequence_parallel",
    "dp_bucket",
    "rank_order",
    "distributed_optimizer",
    "zero3_prefetch",
    "grad_sync",
    "ep",
)
KEPT_STAGED = ("schedule", "zero", "sequence_parallel", "dp_bucket", "distributed_optimizer", "grad_sync")
DEFAULT_MICRO_BATCHES = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class Candidate:
    """One layout to try: the experiment's ``parallel`` section and ``training.micro_batch``."""

    kind: str  # uniform | per-type | as-written
    parallel: dict[str, Any]
    micro_batch: int
    default: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def id(self) -> str:
        return variant_id({"parallel": self.parallel, "training.micro_batch": self.micro_batch})

    @property
    def label(self) -> str:
        par = self.parallel
        if "stages" in par:
            stages = par["stages"]
            pipes = []
            for j in range(len(stages[0]["replicas"])):
                cells = [s["replicas"][j] for s in stages]
                names = [f"{c['gpu']}" + (f" tp{c['tp']}" if c.get("tp", 1) > 1 else "") for c in cells]
                pipes.append("+".join(dict.fromkeys(names)))  # a pipeline's types, stage order
            layers = "/".join(str(s["layers"]) for s in stages)
            head = f"stages pp{len(stages)} dp{len(pipes)} layers {layers}"
            return f"{head} pipelines [{', '.join(_runs(pipes))}] mb{self.micro_batch}"
        part = par.get("partition", "auto")
        part = "/".join(map(str, part)) if isinstance(part, list) else part
        return f"tp{par['tp']} pp{par['pp']} dp{par['dp']} mb{self.micro_batch} partition {part}"

    def experiment_data(self, base: dict[str, Any]) -> dict[str, Any]:
        """``base`` (an experiment mapping) running this candidate."""
        data = copy.deepcopy(base)
        data["parallel"] = copy.deepcopy(self.parallel)
        training = dict(data.get("training") or {})
        training["micro_batch"] = self.micro_batch
        data["training"] = training
        return data


def _runs(items: list[str]) -> list[str]:
    """``['a', 'a', 'b']`` -> ``['2 x a', 'b']``."""
    out: list[str] = []
    i = 0
    while i < len(items):
        j = i
        while j < len(items) and items[j] == items[i]:
            j += 1
        out.append(f"{j - i} x {items[i]}" if j - i > 1 else items[i])
        i = j
    return out


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _kept(base_parallel: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    out = {k: copy.deepcopy(base_parallel[k]) for k in keys if k in base_parallel}
    if out.get("schedule") == "interleaved":
        out["schedule"] = "1f1b"
    return out


def tp_choices(exp: ExperimentConfig) -> list[int]:
    """TP degrees that keep a TP group inside one host and divide the model's heads."""
    cluster, model = exp.cluster, exp.model
    sizes = {cluster.host(h).gpus for h in range(cluster.num_hosts)}
    common = min(sizes)
    out = []
    for tp in _divisors(common):
        if (
            all(s % tp == 0 for s in sizes)
            and model.heads % tp == 0
            and (model.kv_heads % tp == 0 or tp % model.kv_heads == 0)
        ):
            out.append(tp)
    return out


def uniform_candidates(
    exp: ExperimentConfig, base_parallel: dict[str, Any], micro_batches: tuple[int, ...]
) -> list[Candidate]:
    world, layers = exp.cluster.world_size, exp.model.layers
    batch = exp.training.global_batch
    kept = _kept(base_parallel, KEPT_UNIFORM)
    out = []
    for tp in tp_choices(exp):
        for pp in _divisors(world // tp):
            dp = world // (tp * pp)
            if pp > layers:
                continue
            for mb in micro_batches:
                if batch % (mb * dp):
                    continue
                par = {"tp": tp, "pp": pp, "dp": dp, "partition": "auto", **kept}
                out.append(Candidate(UNIFORM, par, mb))
    return out


def per_type_candidates(
    exp: ExperimentConfig, base_parallel: dict[str, Any], micro_batches: tuple[int, ...]
) -> list[Candidate]:
    cluster, layers = exp.cluster, exp.model.layers
    counts: dict[str, int] = {}
    for gpu in cluster.gpu_type:
        counts[gpu] = counts.get(gpu, 0) + 1
    if len(counts) < 2:
        return []
    kept = {k: v for k, v in _kept(base_parallel, KEPT_STAGED).items()}
    if kept.get("schedule") not in (None, "1f1b", "gpipe"):
        kept["schedule"] = "1f1b"
    if int(kept.get("zero", 0) or 0) > 1:
        return []  # explicit plans run ZeRO-0/1 only
    out = []
    for tp in tp_choices(exp):
        for pp in range(2, layers + 1):  # pp 1: the uniform grid's dp split is the same plan
            if any(n % (tp * pp) for n in counts.values()):
                continue
            pipelines = [gpu for gpu, n in counts.items() for _ in range(n // (tp * pp))]
            cuts = even_cuts(layers, pp)
            stages = [
                {"layers": len(cut), "replicas": [{"gpu": g, "tp": tp} for g in pipelines]} for cut in cuts
            ]
            for mb in micro_batches:
                if exp.training.global_batch % mb or exp.training.global_batch // mb < len(pipelines):
                    continue
                par = {"stages": copy.deepcopy(stages), "partition": "auto", **kept}
                out.append(Candidate(PER_TYPE, par, mb))
    return out


def default_candidate(exp: ExperimentConfig, base_parallel: dict[str, Any]) -> Candidate:
    """The experiment's layout with uniform layers and even micro-batches."""
    if exp.parallel.plan is not None:  # an explicit plan: keep its stages, split evenly
        par = {
            "stages": _stages_dict(exp.parallel.plan),
            "partition": "uniform",
            **_kept(base_parallel, KEPT_STAGED),
        }
    else:
        par = {
            "tp": exp.parallel.tp,
            "pp": exp.parallel.pp,
            "dp": exp.parallel.dp,
            "partition": "uniform",
            **_kept(base_parallel, KEPT_UNIFORM),
        }
    return Candidate(UNIFORM, par, exp.training.micro_batch, default=True)


def _stages_dict(plan: StagedPlan) -> list[dict[str, Any]]:
    return plan.as_dict()


def enumerate_candidates(
    exp: ExperimentConfig,
    base_parallel: dict[str, Any],
    micro_batches: tuple[int, ...] = DEFAULT_MICRO_BATCHES,
) -> list[Candidate]:
    """Every candidate, the default first, duplicates (same parallel section and micro-batch)
    removed; order is deterministic."""
    default = default_candidate(exp, base_parallel)
    written = Candidate(AS_WRITTEN, copy.deepcopy(base_parallel), exp.training.micro_batch)
    out: dict[str, Candidate] = {default.id: default}
    for cand in [
        written,
        *uniform_candidates(exp, base_parallel, micro_batches),
        *per_type_candidates(exp, base_parallel, micro_batches),
    ]:
        out.setdefault(cand.id, cand)
    return list(out.values())
