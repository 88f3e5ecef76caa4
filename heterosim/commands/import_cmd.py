"""``heterosim import aicb|sailor|amp FILE``: turn another tool's workload or plan into an experiment.

aicb: a SimAI/AICB workload file; the experiment YAML states the file's parallel sizes, the
model shape read from its communication sizes and the batch. sailor: a Sailor plan JSON; amp: an
AMP ``partition.json`` (with ``--rank-map rank_map.json``); both become an explicit heterogeneous
plan (``parallel.stages``) on ``--cluster`` for ``--model``. Comments at the top say which values
came from the file and which were assumed. Run it with ``heterosim run EXPERIMENT.yaml``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import yaml

from heterosim.errors import UserError

EXAMPLES = """\
examples:
  heterosim import aicb SimAI/example/microAllReduce.txt --out workloads/micro_allreduce.yaml
  heterosim import aicb workload.txt --cluster topologies/h2_128gpu.yaml --out exp.yaml
  heterosim import aicb workload.txt --seq-len 2048 --micro-batch 2   # YAML on stdout
  heterosim import sailor plan_config.json --model gpt3-6.7b --cluster mit.yaml --out exp.yaml
  heterosim import sailor plan.json --model gpt3-350m --cluster c.yaml --gpu-map RTX-2080=RTX-2080-Ti
  heterosim import amp partition.json --rank-map rank_map.json --tp 2 --model gpt3-1.3b \
      --cluster amp.yaml --global-batch 32 --micro-batch 2 --out amp_plan.yaml
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import", help="convert another tool's workload (SimAI/AICB) into an experiment",
        description=__doc__, epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("format", choices=("aicb", "sailor", "amp"),
                        help="input format: aicb (SimAI workload), sailor (plan JSON), amp "
                             "(partition.json)")
    parser.add_argument("file", help="the workload or plan file")
    parser.add_argument("--cluster", metavar="CLUSTER.yaml",
                        help="cluster file (its GPU count must equal all_gpus; default: an "
                             "inline homogeneous H100 cluster of all_gpus GPUs)")
    parser.add_argument("--out", metavar="EXPERIMENT.yaml",
                        help="experiment file to write (default: print it)")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="sequence length the file was generated with (default 4096)")
    parser.add_argument("--micro-batch", type=int, default=None,
                        help="micro-batch size the file was generated with (default 1; sailor: "
                             "the plan's mbs)")
    parser.add_argument("--model", help="sailor/amp: model zoo name the plan was made for")
    parser.add_argument("--training-config", metavar="training_config.json",
                        help="sailor: Sailor's training config (model shape, sequence length, "
                             "global batch) instead of --model")
    parser.add_argument("--global-batch", type=int, default=None,
                        help="sailor/amp: global batch in sequences (sailor: default the plan's gbs)")
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16", "fp32"),
                        help="sailor/amp: training dtype (default fp16, as both planners train)")
    parser.add_argument("--gpu-map", action="append", default=[], metavar="PLAN_NAME=GPU",
                        help="sailor: map a GPU type name of the plan to a catalogue or cluster "
                             "name (repeatable)")
    parser.add_argument("--rank-map", metavar="rank_map.json",
                        help="amp: AMP's rank map (node -> ranks); default rank r on GPU r")
    parser.add_argument("--tp", type=int, default=None, help="amp: the plan's model-parallel degree")
    parser.set_defaults(func=run)


def _cluster_reference(path: Path, out: Path | None, gpus: int) -> str:
    from heterosim.config.cluster import load_cluster

    cluster = load_cluster(path)
    if cluster.world_size != gpus:
        raise UserError(f"--cluster {path}: has {cluster.world_size} GPUs but the workload's "
                        f"all_gpus is {gpus}")
    base = (out.parent if out else Path.cwd()).resolve()
    return os.path.relpath(path.resolve(), base)


def _write(text: str, out: Path | None) -> None:
    if out is None:
        print(text, end="")
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write: {exc.strerror or exc}") from exc


def _run_plan(args: argparse.Namespace, out: Path | None) -> int:
    """sailor / amp: a planner's plan -> an experiment with parallel.stages."""
    from heterosim.config.cluster import load_cluster
    from heterosim.config.experiment import parse_experiment
    from heterosim.config.planners import read_amp_partition, read_sailor_plan

    fmt = args.format
    model: object = args.model
    seq_len, config_batch = args.seq_len, None
    if args.training_config:
        from heterosim.config.planners import read_sailor_training_config

        model, config_seq, config_batch = read_sailor_training_config(args.training_config)
        seq_len = seq_len or config_seq
    if not model or not args.cluster:
        raise UserError(f"import {fmt}: --model (or --training-config) and --cluster are "
                        "required (the plan file names neither the model's shape nor the hosts)")
    cluster = load_cluster(args.cluster)
    if fmt == "sailor":
        gpu_map = {}
        for item in args.gpu_map:
            if "=" not in item:
                raise UserError(f"--gpu-map {item!r}: expected PLAN_NAME=GPU")
            key, value = item.split("=", 1)
            gpu_map[key.strip()] = value.strip()
        imported = read_sailor_plan(args.file, gpu_map)
    else:
        if args.tp is None:
            raise UserError("import amp: --tp is required (AMP's partition does not record it)")
        imported = read_amp_partition(args.file, cluster, args.tp, args.rank_map)
    micro_batch = args.micro_batch or imported.micro_batch or 1
    global_batch = args.global_batch or imported.global_batch or config_batch
    if global_batch is None:
        raise UserError(f"import {fmt}: --global-batch is required (the file gives none)")
    base = (out.parent if out else Path.cwd()).resolve()
    name = Path(args.file).stem
    training: dict = {"global_batch": global_batch, "micro_batch": micro_batch,
                      "dtype": args.dtype}
    if seq_len:
        training["seq_len"] = seq_len
    experiment = {
        "name": name, "model": model, "training": training,
        # both planners' runtimes give every pipeline gbs / (mbs * dp) micro-batches
        "parallel": {"schedule": "1f1b", "partition": "uniform",
                     "stages": imported.plan.as_dict()},
        "cluster": os.path.relpath(Path(args.cluster).resolve(), base),
    }
    # loads as written (the cluster by absolute path: --out's folder may not exist yet)
    parse_experiment({**experiment, "cluster": str(Path(args.cluster).resolve())},
                     str(out or "<stdout>"), base_dir=base)
    header = [f"Imported from the {fmt} plan {args.file} by `heterosim import {fmt}`.",
              *imported.notes,
              f"model {args.model or args.training_config}, micro-batch {micro_batch}, "
              f"global batch {global_batch}"
              f"{'' if args.global_batch or fmt == 'amp' else ' (from the plan)'}, dtype "
              f"{args.dtype}",
              "micro-batches split evenly between pipelines (partition: uniform), as the "
              "planner's runtime runs them"]
    text = "\n".join(f"# {line}" for line in header) + "\n"
    text += yaml.safe_dump(experiment, sort_keys=False, default_flow_style=None, width=100)
    _write(text, out)
    if out is not None:
        plan = imported.plan
        print(f"{out}: {name}: {plan.pp} stages x {plan.dp} replicas, {plan.world_size} GPUs, "
              f"layers {[s.layers for s in plan.stages]}")
    return 0


def run(args: argparse.Namespace) -> int:
    from heterosim.config.experiment import parse_experiment
    from heterosim.workload.aicb import (
        DEFAULT_MICRO_BATCH,
        DEFAULT_SEQ_LEN,
        aicb_experiment,
        read_aicb,
    )

    out = Path(args.out) if args.out else None
    if out is not None and out.is_dir():
        raise UserError(f"--out {out}: is a folder; expected an experiment file name")
    if args.format in ("sailor", "amp"):
        return _run_plan(args, out)
    seq_len = DEFAULT_SEQ_LEN if args.seq_len is None else args.seq_len
    micro_batch = DEFAULT_MICRO_BATCH if args.micro_batch is None else args.micro_batch
    if seq_len < 1 or micro_batch < 1:
        raise UserError("--seq-len and --micro-batch: expected positive integers")
    workload = read_aicb(args.file)
    cluster = (_cluster_reference(Path(args.cluster), out, workload.all_gpus)
               if args.cluster else None)
    experiment, notes = aicb_experiment(workload, seq_len=seq_len, micro_batch=micro_batch,
                                        cluster=cluster)
    # Validate before writing: the experiment must load as written.
    base = (out.parent if out else Path.cwd())
    parse_experiment(experiment, str(out or "<stdout>"), base_dir=base)
    header = [f"Imported from the SimAI/AICB workload {args.file} by `heterosim import aicb`.",
              f"{workload.policy}: tp {workload.tp}, ep {workload.ep}, pp {workload.pp}, "
              f"ga {workload.ga}, all_gpus {workload.all_gpus}, {len(workload.lines)} layer lines.",
              "How each value was found:", *(f"  - {n}" for n in notes)]
    text = "\n".join(f"# {line}" for line in header) + "\n"
    text += yaml.safe_dump(experiment, sort_keys=False, default_flow_style=None, width=100)
    if out is None:
        print(text, end="")
        return 0
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write: {exc.strerror or exc}") from exc
    print(f"{out}: {experiment['name']}: {experiment['model']['layers']} layers, hidden "
          f"{experiment['model']['hidden']}, tp {workload.tp} pp {workload.pp} dp {workload.dp}"
          f"{f' ep {workload.ep}' if workload.ep > 1 else ''}, global batch "
          f"{experiment['training']['global_batch']}")
    return 0
