"""Another tool's workload or plan as a HeteroSim experiment (``heterosim import``).

:func:`import_plan` a Sailor plan JSON, an AMP partition (:mod:`heterosim.importers.sailor_amp`), a
Metis result line or a FlashFlex hetero config (:mod:`heterosim.importers.metis_flashflex`) as
an explicit heterogeneous plan (``parallel.stages``). Each returns the experiment YAML, with
comments saying which values came from the file and which were assumed, validated to load as
written, and a one-line summary.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from heterosim.config.fields import positive_int
from heterosim.errors import UserError

# What Sailor's runtime (its Megatron-DeepSpeed fork) trains with, as its launch scripts configure it
# (eth-easl/sailor, commit cf2c8e3: sailor/Worker/run_agent.sh, ae_scripts/clariden_scripts/
# run_opt.slurm): neither --fp16 nor --bf16 and no "fp16" section in the DeepSpeed config, so
# Megatron keeps parameters and activations in fp32 (its simulator is called with fp16=False,
# sailor/Planner/simulations/validation/validate.py); no --use-flash-attn, so Megatron's core
# attention runs unfused (batched QK^T and PV GEMMs around a softmax of the s x s scores).
SAILOR_DTYPE = "fp32"
SAILOR_ATTENTION = "unfused"


@dataclass(frozen=True)
class ImportedExperiment:
    """An experiment file's text and what to print once it is written."""

    text: str
    summary: str


@dataclass(frozen=True)
class PlanImport:
    """What ``heterosim import sailor|amp`` needs besides the plan file."""

    model: str | None = None
    training_config: str | None = None
    cluster: str | None = None
    seq_len: int | None = None
    micro_batch: int | None = None
    global_batch: int | None = None
    dtype: str | None = None  # None: the planner's own (SAILOR_DTYPE, fp16 otherwise)
    gpu_map: list[str] = field(default_factory=list)
    rank_map: str | None = None
    tp: int | None = None
    plan_rank: int = 1  # metis: which of its ranked plans (1 = cheapest)


def cluster_reference(path: Path, out: Path | None, gpus: int) -> str:
    from heterosim.config.cluster import load_cluster

    cluster = load_cluster(path)
    if cluster.world_size != gpus:
        raise UserError(
            f"--cluster {path}: has {cluster.world_size} GPUs but the workload's all_gpus is {gpus}"
        )
    base = (out.parent if out else Path.cwd()).resolve()
    return os.path.relpath(path.resolve(), base)


def write_experiment(text: str, out: Path | None) -> None:
    """Write ``text`` to ``out`` (creating its folder), or print it when ``out`` is None."""
    if out is None:
        print(text, end="")
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write: {exc.strerror or exc}") from exc


def _first_given(*values: int | None) -> int | None:
    """The first value that is not None (0 is a value: it is checked, not skipped)."""
    return next((v for v in values if v is not None), None)


def _uneven_split_warning(file: str, global_batch: int, micro_batch: int, pipelines: int) -> str | None:
    """The planners' runtimes give every pipeline ``global_batch / (micro_batch x pipelines)``
    micro-batches: a batch that does not split so is not the plan the planner timed."""
    if global_batch % (micro_batch * pipelines) == 0:
        return None
    total = global_batch // micro_batch
    return (
        f"{file}: global batch {global_batch} does not split evenly into micro-batches of "
        f"{micro_batch} over {pipelines} pipelines ({global_batch / (micro_batch * pipelines):g} "
        f"each); imported with {total} micro-batches shared as evenly as they go"
    )


def import_plan(fmt: str, file: str, options: PlanImport, out: Path | None) -> ImportedExperiment:
    """sailor / amp / metis / flashflex: a planner's plan -> an experiment with parallel.stages."""
    from heterosim.config.cluster import load_cluster
    from heterosim.config.experiment import parse_experiment

    _check_numbers(options)
    model, seq_len, config_batch, cluster_path = _model_and_sequence(fmt, options)
    cluster = load_cluster(cluster_path)
    imported, metis_batches = _read_plan(fmt, file, cluster, options, _gpu_map(options.gpu_map))
    imported, global_batch, micro_batch = _batches(fmt, options, imported, config_batch, metis_batches)
    uneven = _uneven_split_warning(file, global_batch, micro_batch, imported.plan.dp)
    if uneven:
        print(f"heterosim: warning: {uneven}", file=sys.stderr)
    base = (out.parent if out else Path.cwd()).resolve()
    dtype = options.dtype or (SAILOR_DTYPE if fmt == "sailor" else "fp16")
    experiment = _experiment(fmt, file, imported, model, seq_len, dtype, cluster_path, base)
    experiment["training"].update(global_batch=global_batch, micro_batch=micro_batch)
    # loads as written (the cluster by absolute path: --out's folder may not exist yet)
    parse_experiment(
        {**experiment, "cluster": str(Path(cluster_path).resolve())}, str(out or "<stdout>"), base_dir=base
    )
    header = _header(fmt, file, options, imported, global_batch, micro_batch, dtype, bool(uneven))
    text = "\n".join(f"# {line}" for line in header) + "\n"
    text += yaml.safe_dump(experiment, sort_keys=False, default_flow_style=None, width=100)
    plan = imported.plan
    summary = (
        f"{out}: {experiment['name']}: {plan.pp} stages x {plan.dp} replicas, {plan.world_size} GPUs, "
        f"layers {[s.layers for s in plan.stages]}"
    )
    return ImportedExperiment(text, summary)


def _check_numbers(options: PlanImport) -> None:
    """Every numeric option given is a positive integer (a one-line error naming it)."""
    for option, given in (
        ("--micro-batch", options.micro_batch),
        ("--global-batch", options.global_batch),
        ("--seq-len", options.seq_len),
        ("--tp", options.tp),
    ):
        if given is not None:
            positive_int(given, option)


def _model_and_sequence(fmt: str, options: PlanImport) -> tuple[object, int | None, int | None, str]:
    """(model, sequence length, the training config's global batch, cluster file) from the options
    or Sailor's training config; the model and the cluster are required."""
    model: object = options.model
    seq_len, config_batch = options.seq_len, None
    if options.training_config:
        from heterosim.importers.sailor_amp import read_sailor_training_config

        model, config_seq, config_batch = read_sailor_training_config(options.training_config)
        seq_len = seq_len or config_seq
    if not model or not options.cluster:
        raise UserError(
            f"import {fmt}: --model (or --training-config) and --cluster are "
            "required (the plan file names neither the model's shape nor the hosts)"
        )
    return model, seq_len, config_batch, options.cluster


def _gpu_map(items: list[str]) -> dict[str, str]:
    """``--gpu-map PLAN_NAME=GPU`` items as a mapping."""
    gpu_map = {}
    for item in items:
        if "=" not in item:
            raise UserError(f"--gpu-map {item!r}: expected PLAN_NAME=GPU")
        key, value = item.split("=", 1)
        gpu_map[key.strip()] = value.strip()
    return gpu_map


def _read_plan(
    fmt: str, file: str, cluster: Any, options: PlanImport, gpu_map: dict[str, str]
) -> tuple[Any, int | None]:
    """(the plan read from ``file``, Metis's micro-batches per pipeline or None)."""
    from heterosim.importers.metis_flashflex import read_flashflex_plan, read_metis_plan
    from heterosim.importers.sailor_amp import SAILOR_GPU_FALLBACKS, read_amp_partition, read_sailor_plan

    if fmt == "sailor":
        present = set(cluster.gpu_type)
        for sailor_name, fallback in SAILOR_GPU_FALLBACKS.items():
            if (
                sailor_name not in gpu_map
                and cluster.resolve_gpu_name(sailor_name) not in present
                and cluster.resolve_gpu_name(fallback) in present
            ):
                gpu_map[sailor_name] = fallback
        return read_sailor_plan(file, gpu_map), None
    if fmt == "metis":
        return read_metis_plan(file, cluster, options.plan_rank, gpu_map)
    if fmt == "flashflex":
        return read_flashflex_plan(file, cluster), None
    if options.tp is None:
        raise UserError("import amp: --tp is required (AMP's partition does not record it)")
    return read_amp_partition(file, cluster, options.tp, options.rank_map), None


def _batches(
    fmt: str, options: PlanImport, imported: Any, config_batch: int | None, metis_batches: int | None
) -> tuple[Any, int, int]:
    """(the plan, global batch, micro-batch): the options first, then the file, then Sailor's
    training config; Metis gives micro-batches per pipeline, so its micro-batch follows from them."""
    global_batch = _first_given(options.global_batch, imported.global_batch, config_batch)
    if global_batch is None:
        raise UserError(f"import {fmt}: --global-batch is required (the file gives none)")
    if metis_batches is not None and options.micro_batch is None:  # Metis: gbs / batches per pipeline
        per_replica = global_batch // (metis_batches * imported.plan.dp)
        if per_replica < 1 or per_replica * metis_batches * imported.plan.dp != global_batch:
            raise UserError(
                f"import metis: --global-batch {global_batch} does not split into the plan's "
                f"{metis_batches} micro-batches over {imported.plan.dp} pipelines; give --micro-batch"
            )
        imported = replace(imported, micro_batch=per_replica)
    return imported, global_batch, _first_given(options.micro_batch, imported.micro_batch) or 1


def _experiment(
    fmt: str,
    file: str,
    imported: Any,
    model: object,
    seq_len: int | None,
    dtype: str,
    cluster_path: str,
    base: Path,
) -> dict[str, Any]:
    """The experiment mapping (the batch sizes are added by the caller)."""
    training: dict[str, Any] = {"dtype": dtype}
    if fmt == "sailor":
        training["attention"] = SAILOR_ATTENTION
    if seq_len:
        training["seq_len"] = seq_len
    # both planners' runtimes give every pipeline gbs / (mbs * dp) micro-batches
    parallel: dict[str, Any] = {"schedule": "1f1b", "partition": "uniform", "stages": imported.plan.as_dict()}
    if fmt == "sailor":
        # Sailor runs DeepSpeed's PipelineEngine, which sends 1/tp of each activation and gradient
        # per TP rank (PartitionedTensor; eth-easl/sailor deepspeed/pipe_engine.py)
        parallel["p2p_scatter_gather"] = True
    if fmt in ("sailor", "amp"):
        # TP input gradients reduced blocking, between dgrad and wgrad: Sailor's Megatron-DeepSpeed
        # turns the asynchronous all-reduce off under DeepSpeed (megatron/arguments.py: "if
        # args.deepspeed: args.async_tensor_model_parallel_allreduce = False"); AMP's
        # Megatron-LM v1.1.5 predates it
        parallel["tp_backward_overlap"] = False
    return {
        "name": Path(file).stem,
        "model": model,
        "training": training,
        "parallel": parallel,
        "cluster": os.path.relpath(Path(cluster_path).resolve(), base),
    }


def _header(
    fmt: str,
    file: str,
    options: PlanImport,
    imported: Any,
    global_batch: int,
    micro_batch: int,
    dtype: str,
    uneven: bool,
) -> list[str]:
    """The comment lines above the YAML: where each value came from."""
    header = [
        f"Imported from the {fmt} plan {file} by `heterosim import {fmt}`.",
        *imported.notes,
        f"model {options.model or options.training_config}, micro-batch {micro_batch}, "
        f"global batch {global_batch}"
        f"{'' if options.global_batch or fmt == 'amp' else ' (from the plan)'}, dtype "
        f"{dtype}{'' if options.dtype else ' (the planner runtime default)'}",
        "micro-batches split evenly between pipelines (partition: uniform), as the "
        "planner's runtime runs them"
        + (" (this batch does not split evenly: see the warning at import)" if uneven else ""),
    ]
    if fmt == "sailor":
        header.append(
            "attention unfused: Sailor's launch scripts pass no --use-flash-attn"
            + ("" if options.dtype else "; fp32: nor --fp16/--bf16")
        )
        header.append(
            "pipeline sends carry 1/tp of each activation and gradient per TP rank "
            "(p2p_scatter_gather, where all replicas share one TP degree), as Sailor's "
            "DeepSpeed pipeline engine partitions them"
        )
    if fmt in ("sailor", "amp"):
        header.append(
            "TP collectives of the backward blocking (tp_backward_overlap: false): "
            + (
                "Sailor's Megatron-DeepSpeed turns the asynchronous all-reduce off under DeepSpeed"
                if fmt == "sailor"
                else "AMP's Megatron-LM v1.1.5 predates the asynchronous all-reduce"
            )
        )
    return header
