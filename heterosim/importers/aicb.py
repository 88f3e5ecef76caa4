"""``heterosim import aicb``: a SimAI/AICB workload file as a HeteroSim experiment YAML, with
comments saying which values came from the file and which were assumed, validated to load as
written (the file format: :mod:`heterosim.workload.aicb`)."""

from __future__ import annotations

from pathlib import Path

import yaml

from heterosim.config.experiment import parse_experiment
from heterosim.errors import UserError
from heterosim.importers.experiment_file import ImportedExperiment, cluster_reference
from heterosim.workload.aicb import DEFAULT_MICRO_BATCH, DEFAULT_SEQ_LEN, aicb_experiment, read_aicb


def import_aicb(
    file: str, cluster: str | None, out: Path | None, seq_len: int | None, micro_batch: int | None
) -> ImportedExperiment:
    """A SimAI/AICB workload file -> an experiment with its parallel sizes, model and batch."""
    seq_len = DEFAULT_SEQ_LEN if seq_len is None else seq_len
    micro_batch = DEFAULT_MICRO_BATCH if micro_batch is None else micro_batch
    if seq_len < 1 or micro_batch < 1:
        raise UserError("--seq-len and --micro-batch: expected positive integers")
    workload = read_aicb(file)
    cluster_ref = cluster_reference(Path(cluster), out, workload.all_gpus) if cluster else None
    experiment, notes = aicb_experiment(
        workload, seq_len=seq_len, micro_batch=micro_batch, cluster=cluster_ref
    )
    # Validate before writing: the experiment must load as written.
    base = out.parent if out else Path.cwd()
    parse_experiment(experiment, str(out or "<stdout>"), base_dir=base)
    header = [
        f"Imported from the SimAI/AICB workload {file} by `heterosim import aicb`.",
        f"{workload.policy}: tp {workload.tp}, ep {workload.ep}, pp {workload.pp}, "
        f"ga {workload.ga}, all_gpus {workload.all_gpus}, {len(workload.lines)} layer lines.",
        "How each value was found:",
        *(f"  - {n}" for n in notes),
    ]
    text = "\n".join(f"# {line}" for line in header) + "\n"
    text += yaml.safe_dump(experiment, sort_keys=False, default_flow_style=None, width=100)
    summary = (
        f"{out}: {experiment['name']}: {experiment['model']['layers']} layers, hidden "
        f"{experiment['model']['hidden']}, tp {workload.tp} pp {workload.pp} dp {workload.dp}"
        f"{f' ep {workload.ep}' if workload.ep > 1 else ''}, global batch "
        f"{experiment['training']['global_batch']}"
    )
    return ImportedExperiment(text, summary)
